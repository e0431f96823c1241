# GPU part 7 (timeout 420 s): the optimizer states with error bars
# (issue #42): fp32 weights and products, AdamW's moments and Muon's
# momentum in fp32, bf16, fp8, int8, int8-linear and int4, on the small
# preset, 300 steps, seeds 1, 2 and 3 (`webtrain study`: 36 runs of about
# 10 s on an H200).
# A study cut off by the timeout keeps its finished runs, and the same
# call again goes on from there. Carried as part 6.

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

# the int4 state's maps, torch's f32 against the twin's (a second)
python3 "$(dirname "$0")/int4-map-check.py" 2>&1 | tee -a "$LOG"

step 420 "small, every optimizer state × AdamW and Muon × 3 seeds" "$BIN" study --precisions fp32 \
    --optim-states fp32,bf16,fp8,int8,int8-linear,int4 --optimizers adamw,muon --seeds 1,2,3 \
    --preset small --steps 300 --val-every 50 --out "$OUT/study-states-small" \
    -- --corpus public/corpus/brown.txt > "$OUT/study-states-small.jsonl"
cat "$OUT/study-states-small/study.md" 2>/dev/null
echo "== done ($(date +%T)); log: $LOG"
