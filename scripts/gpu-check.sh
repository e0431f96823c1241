# Issue #30's measurements in one call ON the GPU machine (x86-64, NVIDIA
# driver, python3 with PyTorch, no Rust, no Node, no network), from the
# repository root, on a release binary built here and carried:
#
#   cargo build --release --bin webtrain && mkdir -p .gpubin && cp target/release/webtrain .gpubin/
#   bash scripts/pack-dawn.sh        # optional: Node, dawn.node and pkg/ into .dawnpack/
#   then on the device: carry .gl .gpubin (.dawnpack);
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; bash scripts/gpu-check.sh
#
# 1. matrix units' correctness: every cooperative-matrix variant against the
#    CPU twin (bench --what coop prints each one's error before its speed),
#    and amp-f16 trained 30 steps on them against the scalar GEMMs;
# 2. the base step in fp32 and amp-f16, amp-f16 with and without matrix units,
#    and with attention's products in f16 too (scripts/amp-f16-attention.json),
#    scalar and on the units;
# 3. PyTorch's LlamaForCausalLM on the same shape: fp32 (TF32 off) and fp16
#    autocast with a GradScaler;
# 3b. Muon's share of the base and small steps (issue #31);
# 4. the wasm build on Dawn (dawn.node) against native, where .dawnpack is,
#    and amp-f16 there with and without Dawn's subgroup matrices (the
#    kernels the page builds in Chrome; Dawn offers them with unsafe APIs).
# Each step has its own timeout; the whole run stays under 8 minutes.

source "$(dirname "$0")/gpu-common.sh"
BIN=/tmp/webtrain-gpu-bin
cp .gpubin/webtrain "$BIN" && chmod +x "$BIN" || { echo "no binary at .gpubin/webtrain"; exit 1; }

step 15 "GPUs" nvidia-smi -L
step 40 "adapter" "$BIN" info
step 100 "coop GEMMs: correctness and TFLOP/s" "$BIN" bench --what coop --reps 10

for units in off auto; do
    step 60 "amp-f16 tiny, 30 steps, matrix units $units" \
        "$BIN" train --preset tiny --synthetic --steps 30 --seed 1 --precision amp-f16 --matrix-units "$units" \
        > "$OUT/amp-tiny-$units.jsonl"
done
python3 - "$OUT" <<'PY'
import json, sys
runs = {}
for units in ("off", "auto"):
    lines = [json.loads(l) for l in open(f"{sys.argv[1]}/amp-tiny-{units}.jsonl") if l.startswith("{")]
    runs[units] = [l["loss"] for l in lines if "loss" in l and "step" in l]
    units_used = [l["summary"].get("matrix_units") for l in lines if "summary" in l]
    print(f"amp-f16 tiny, --matrix-units {units}: {len(runs[units])} steps, units {units_used}")
if runs["off"] and runs["auto"]:
    gaps = [abs(a - b) / b for a, b in zip(runs["auto"], runs["off"])]
    print(f"relative loss gap, matrix units against scalar: first step {gaps[0]:.2e}, largest {max(gaps):.2e}")
PY

BASE="--sizes seed --presets base --states fp32 --reps 5"
step 90 "base steps fp32, amp-f16 (scalar)" "$BIN" bench --what steps $BASE --precisions fp32,amp-f16
step 90 "base steps amp-f16 on matrix units" "$BIN" bench --what steps $BASE --precisions amp-f16 --matrix-units auto
# autocast's numerics in full: attention's products in f16 too, on the units
ATTN=scripts/amp-f16-attention.json
step 90 "base steps amp-f16 + f16 attention (scalar)" "$BIN" bench --what steps $BASE --precisions $ATTN
step 90 "base steps amp-f16 + f16 attention on matrix units" "$BIN" bench --what steps $BASE --precisions $ATTN --matrix-units auto
# issue #31: Muon's share of the step (Newton–Schulz on the batched GEMMs), AdamW beside it
step 90 "base and small steps fp32, AdamW and Muon" "$BIN" bench --what steps --sizes seed --presets small,base --states fp32 --reps 5 --precisions fp32 --optimizers adamw,muon

PEER="$(dirname "$0")/../../shared/peers/torch_llama_bench.py"
[ -e "$PEER" ] || PEER=.gpubin/torch_llama_bench.py
SHAPE="--vocab 16384 --d-model 768 --layers 12 --heads 12 --kv-heads 12 --ffn 2048 --seq 512 --batch 8 --steps 20 --warmup 5 --device cuda"
step 90 "PyTorch fp32 (TF32 off)" python3 "$PEER" $SHAPE
step 90 "PyTorch fp16 autocast + GradScaler" python3 "$PEER" $SHAPE --amp fp16

if [ -d .dawnpack ]; then
    # base's 16384-token vocabulary needs the whole corpus (about 6 s to train in wasm)
    TEXT="--text-bytes 6000000"
    step 150 "Dawn (wasm on dawn.node) against native, tiny and base fp32" bash .dawnpack/run.sh --presets tiny,base --precisions fp32 --steps 10 $TEXT
    for units in off auto; do
        step 120 "Dawn base amp-f16, subgroup matrices $units" bash .dawnpack/run.sh --presets base --precisions amp-f16 --steps 10 $TEXT \
            --dawn enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia --matrix-units "$units"
    done
else
    echo "== no .dawnpack: the Dawn harness is not measured (scripts/pack-dawn.sh)"
fi
echo
echo "== done ($(date +%T)); log: $LOG"
