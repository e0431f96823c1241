# GPU part 3 of 5 (timeouts summed: 360 s): PyTorch's LlamaForCausalLM on
# the base shape, fp32 (TF32 off) and fp16 autocast with a GradScaler
# (../shared/peers/torch_llama_bench.py, or a copy carried in .gpubin/),
# Muon's share of the base and small steps beside AdamW's, and the base
# step with bf16-sr master weights beside f32 ones (bf16 on the GPU, each
# tensor widened for its readers: what that costs). Carried and run as
# part 1 says.

source "$(dirname "$0")/gpu-common.sh"
gpu_binary

PEER="$(dirname "$0")/../../shared/peers/torch_llama_bench.py"
[ -e "$PEER" ] || PEER=.gpubin/torch_llama_bench.py
SHAPE="--vocab 16384 --d-model 768 --layers 12 --heads 12 --kv-heads 12 --ffn 2048 --seq 512 --batch 8 --steps 20 --warmup 5 --device cuda"
step 90 "PyTorch fp32 (TF32 off)" python3 "$PEER" $SHAPE > "$OUT/torch-fp32.json"
step 90 "PyTorch fp16 autocast + GradScaler" python3 "$PEER" $SHAPE --amp fp16 > "$OUT/torch-amp.json"
step 90 "base and small steps fp32, AdamW and Muon" "$BIN" bench --what steps --sizes seed --presets small,base \
    --states fp32 --reps 5 --precisions fp32 --optimizers adamw,muon > "$OUT/steps-muon.json"
step 90 "base steps fp32, f32 and bf16-sr master weights" "$BIN" bench --what steps --sizes seed --presets base \
    --states fp32 --reps 5 --precisions fp32 --master-weights f32,bf16-sr > "$OUT/steps-master.json"
summary "PyTorch fp32=$OUT/torch-fp32.json" "PyTorch fp16 autocast=$OUT/torch-amp.json" "native, AdamW then Muon=$OUT/steps-muon.json" \
    "native, f32 then bf16-sr master weights=$OUT/steps-master.json"
echo "== done ($(date +%T)); log: $LOG"
