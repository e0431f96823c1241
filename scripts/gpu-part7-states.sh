# GPU part 7 (timeout 300 s): the optimizer states with error bars
# (issue #42): fp32 weights and products, AdamW's moments and Muon's
# momentum in fp32, bf16, fp8 and int8, on the small preset, 300 steps,
# seeds 1, 2 and 3 (`webtrain study`: 24 runs of about 10 s on an H200).
# A study cut off by the timeout keeps its finished runs, and the same
# call again goes on from there. Carried as part 6.

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

step 300 "small, every optimizer state × AdamW and Muon × 3 seeds" "$BIN" study --precisions fp32 \
    --optim-states fp32,bf16,fp8,int8 --optimizers adamw,muon --seeds 1,2,3 \
    --preset small --steps 300 --val-every 50 --out "$OUT/study-states-small" \
    -- --corpus public/corpus/brown.txt > "$OUT/study-states-small.jsonl"
cat "$OUT/study-states-small/study.md" 2>/dev/null
echo "== done ($(date +%T)); log: $LOG"
