# GPU part 6 (timeout 540 s): the recipe study with error bars (issue
# #42): every named recipe on the small preset, 300 steps, seeds 1, 2 and
# 3 (`webtrain study`: the logs, study.md with each row's gap to fp32 as
# mean ± sd, study.svg). On an H200 a small run took 3–5 s of training
# (2026-11-26) plus its start; a study cut off by the timeout keeps its
# finished runs, and the same call again goes on from there. Carried: the
# release binary in .gpubin/ and public/corpus (the small preset's text).

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

RECIPES=fp32,f16,sf16,sf16-wide-head,fp8,bf16,amp-f16,fp8-hybrid,mxfp8,mxfp4,nvfp4,nvfp4-naive,nvfp4-4over6,fp8-rowwise,fp8-rowwise-gw-hp,quartet,quartet-ii
step 540 "small, every recipe × 3 seeds" "$BIN" study --precisions "$RECIPES" --seeds 1,2,3 \
    --preset small --steps 300 --val-every 50 --out "$OUT/study-small" \
    -- --corpus public/corpus/brown.txt > "$OUT/study-small.jsonl"
cat "$OUT/study-small/study.md" 2>/dev/null
echo "== done ($(date +%T)); log: $LOG"
