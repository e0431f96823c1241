# GPU part 1 of 5 (scripts/gpu-part*.sh, each one device call of under
# 9 minutes, timeouts summed: 455 s): the matrix units' kernels and the
# recipes trained on them. On the GPU machine, from the repository root,
# with .gpubin/webtrain (a release binary) carried:
#
#   cargo build --release --bin webtrain && mkdir -p .gpubin && cp target/release/webtrain .gpubin/
#   then on the device: bash scripts/gpu-part1-units.sh   ($OUT gets the JSON)
#
# Every cooperative-matrix variant against the CPU twin, and its TFLOP/s
# at the seed's shapes beside the tuned fp32 GEMM (bench --what coop); then
# amp-f16, mxfp8 and nvfp4 trained 30 tiny steps with the units off and
# on: the summary's loss gap says whether the units compute the scalar
# path's products, its products_on_units how many ran there.

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

step 15 "GPUs" nvidia-smi -L
step 40 "adapter" "$BIN" info
step 100 "unit GEMMs: correctness and TFLOP/s" "$BIN" bench --what coop --reps 10 > "$OUT/units-gemm.json"
files=("unit GEMM=$OUT/units-gemm.json")
for p in amp-f16 mxfp8 nvfp4; do
    for units in off auto; do
        step 50 "$p tiny, 30 steps, matrix units $units" \
            "$BIN" train --preset tiny --synthetic --steps 30 --seed 1 --precision "$p" --matrix-units "$units" \
            > "$OUT/units-tiny-$p-$units.jsonl"
        files+=("$p tiny units $units=$OUT/units-tiny-$p-$units.jsonl")
    done
done
summary "${files[@]}"
python3 - "$OUT" <<'PY'
import json, sys
for p in ("amp-f16", "mxfp8", "nvfp4"):
    runs = {}
    for units in ("off", "auto"):
        try:
            lines = [json.loads(l) for l in open(f"{sys.argv[1]}/units-tiny-{p}-{units}.jsonl") if l.startswith("{")]
        except OSError:
            lines = []
        runs[units] = [l["loss"] for l in lines if "loss" in l and "step" in l]
    if runs["off"] and runs["auto"]:
        gaps = [abs(a - b) / b for a, b in zip(runs["auto"], runs["off"])]
        print(f"{p} tiny: relative loss gap, units against scalar: first step {gaps[0]:.2e}, largest {max(gaps):.2e}")
        lines = [json.loads(l) for l in open(f"{sys.argv[1]}/units-tiny-{p}-auto.jsonl") if l.startswith("{")]
        where = [l["summary"].get("products_on_units") for l in lines if "summary" in l]
        print(f"{p} tiny: the last step's products on the units: {where[0] if where else None}")
    else:
        print(f"{p} tiny: no loss gap (a run is missing)")
PY
echo "== done ($(date +%T)); log: $LOG"
