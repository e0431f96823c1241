# GPU part 2 of 5 (timeouts summed: 510 s): the base step (the seed's
# shape: d 768, 12 layers, batch 8 × 512) natively, in fp32, amp-f16,
# mxfp8 and nvfp4, on the scalar GEMMs and on the matrix units; amp-f16
# with attention's products in f16 too (scripts/amp-f16-attention.json).
# Carried and run as part 1 says.

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

BASE="--what steps --sizes seed --presets base --states fp32 --reps 5"
step 180 "base steps, scalar" "$BIN" bench $BASE --precisions fp32,amp-f16,mxfp8,nvfp4 --matrix-units off > "$OUT/steps-scalar.json"
step 150 "base steps on matrix units" "$BIN" bench $BASE --precisions amp-f16,mxfp8,nvfp4 --matrix-units auto > "$OUT/steps-units.json"
ATTN=scripts/amp-f16-attention.json
step 90 "base steps amp-f16 + f16 attention, scalar" "$BIN" bench $BASE --precisions $ATTN --matrix-units off > "$OUT/steps-attn-scalar.json"
step 90 "base steps amp-f16 + f16 attention on matrix units" "$BIN" bench $BASE --precisions $ATTN --matrix-units auto > "$OUT/steps-attn-units.json"
summary "native=$OUT/steps-scalar.json" "native=$OUT/steps-units.json" \
    "native, f16 attention=$OUT/steps-attn-scalar.json" "native, f16 attention=$OUT/steps-attn-units.json"
echo "== done ($(date +%T)); log: $LOG"
