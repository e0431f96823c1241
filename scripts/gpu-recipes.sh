# Runs ON the GPU machine (x86-64, NVIDIA driver, no Rust, no network),
# from the repository root, against release binaries built elsewhere and
# carried: issue #29's recipes. Everything goes to "$OUT".
#
#   bash scripts/gpu-recipes.sh 1   # benches and the small preset (~5 min)
#   bash scripts/gpu-recipes.sh 2   # the add task (~3 min)
# binaries: .gpubin/webtrain (new), .gpubin/webtrain-old; carry
# public/corpus (the small preset's text).
#
# 1. today's modes, old binary against new, alternated (no slower?);
# 2. what each new recipe's pre-passes cost on the base preset;
# 3. the study: every named recipe on the small preset (300 steps) and
#    the add task, seed 1, a JSON line per step (scripts/recipe-study.py
#    draws them).
# Each step has its own timeout; the whole run stays under 9 minutes.

source "$(dirname "$0")/gpu-common.sh"
mkdir -p "$OUT/study"
NEW=/tmp/webtrain-new OLD=/tmp/webtrain-old
cp .gpubin/webtrain "$NEW" && cp .gpubin/webtrain-old "$OLD" && chmod +x "$NEW" "$OLD" || exit 1

PART=${1:-1}
RECIPES="fp32 f16 sf16 sf16-wide-head fp8 bf16 amp-f16 fp8-hybrid mxfp8 mxfp4 nvfp4 nvfp4-naive"
if [ "$PART" = 2 ]; then
    for r in $RECIPES; do
        step 30 "add, $r" "$NEW" train --task add --seed 1 --precision "$r" > "$OUT/study/add-$r.jsonl"
    done
    echo "== done $(date +%T)"
    exit 0
fi
step 30 "adapter" "$NEW" info
for round in 1 2; do
    for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        step 60 "base steps, $b binary, round $round" "$bin" bench --what steps --presets base \
            --precisions fp32,f16,fp8 --states fp32 --reps 5 > "$OUT/bench-$b-$round.jsonl"
    done
done
step 120 "base steps, new recipes" "$NEW" bench --what steps --presets base \
    --precisions fp32,bf16,amp-f16,fp8-hybrid,mxfp8,mxfp4,nvfp4,nvfp4-naive --states fp32 --reps 3 \
    > "$OUT/bench-recipes.jsonl"
for r in $RECIPES; do
    step 40 "small, $r" "$NEW" train --corpus public/corpus/brown.txt --preset small --steps 300 \
        --seed 1 --precision "$r" --val-every 50 > "$OUT/study/small-$r.jsonl"
done
echo "== done $(date +%T)"
