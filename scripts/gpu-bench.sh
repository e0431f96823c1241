for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig;
# Runs ON the GPU machine (x86-64, NVIDIA driver, no Rust, no network,
# python3 with PyTorch), from the repository root, against a release
# binary built elsewhere and carried: issue #30's cooperative-matrix probe
# and the numbers to read it against. Everything goes to "$OUT"/gpu.log.
#
#   bash .gpubin/gpu-bench.sh            # binary: .gpubin/webtrain
#   WEBTRAIN_BIN=path/to/webtrain bash scripts/gpu-bench.sh
#
# Each step has its own timeout; the worst case is about 6 minutes, the
# expected run (H200) well under 3. A step that fails is logged and the
# next one runs.

source "$(dirname "$0")/gpu-common.sh"

BIN_SRC="${WEBTRAIN_BIN:-.gpubin/webtrain}"
BIN=/tmp/webtrain-gpu-bin
cp "$BIN_SRC" "$BIN" && chmod +x "$BIN" || { echo "no binary at $BIN_SRC"; exit 1; }

step 15 "GPUs" nvidia-smi -L
step 40 "adapter" "$BIN" info
step 90 "coop GEMMs" "$BIN" bench --what coop --reps 10
step 80 "fp32 linear kernels" "$BIN" bench --what kernels --sizes seed --only linear --reps 10
step 80 "base steps" "$BIN" bench --what steps --sizes seed --presets base --precisions fp32,f16 --states fp32 --reps 5

cat > "$OUT/torch_roof.py" <<'PY'
# torch.matmul at the seed's GEMM shapes (M = 4096): fp32 (TF32 off),
# fp16 and bf16 (f32 accumulation: reduced-precision reductions off).
import json, time
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
M = 4096
SHAPES = [("qkv", 768, 2304), ("o", 768, 768), ("gate|up", 768, 4096), ("down", 2048, 768), ("head", 768, 16384)]
# clocks up first
x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
t = time.time()
while time.time() - t < 1.0:
    x @ x
torch.cuda.synchronize()
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for name, k, n in SHAPES:
        a = torch.randn(M, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        for _ in range(5):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                torch.matmul(a, b)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 20)
        ms = sorted(times)[2]
        tflops = 2 * M * n * k / (ms * 1e-3) / 1e12
        dt = str(dtype).replace("torch.", "")
        print(f"torch {dt:9} {name:8} {M}x{n}x{k:<6} {ms:8.4f} ms {tflops:7.1f} TFLOP/s")
        print(json.dumps({"torch": dt, "product": name, "m": M, "n": n, "k": k, "ms": ms, "tflop_s": tflops}))
PY
step 60 "PyTorch roof" python3 "$OUT/torch_roof.py"
echo
echo "== done ($(date +%T)); log: $LOG"
