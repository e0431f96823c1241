# Sourced by the scripts that run on the lent GPU machine (gpu-part*.sh,
# gpu-bench.sh, gpu-recipes.sh), from the repository root: everything they
# print goes to "$OUT"/gpu.log too; the Vulkan loader finds the NVIDIA ICD
# (nvidia-icd.sh); `step SECONDS TITLE COMMAND...` runs one measurement
# under its own timeout, logs its status and time, and never stops the
# script.

OUT="${OUT:-/tmp/webtrain-gpu-out}"
mkdir -p "$OUT"
LOG="$OUT/gpu.log"
exec > >(tee -a "$LOG") 2>&1

source "$(dirname "${BASH_SOURCE[0]}")/nvidia-icd.sh"
echo "== vulkan ICD: ${found_icd:-none in the usual places}; VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
export RUST_BACKTRACE=1

step() { # step SECONDS TITLE COMMAND...
    local secs=$1 title=$2
    shift 2
    # the headers on stderr (logged as stdout is), so `step … > FILE` keeps
    # only the command's output
    echo >&2
    echo "== $title  ($(date +%T), timeout ${secs}s): $*" >&2
    local t0=$SECONDS
    timeout "$secs" "$@"
    echo "== $title: rc=$? in $((SECONDS - t0)) s" >&2
}

# The release binary carried in .gpubin/, copied where it may run: $BIN.
gpu_binary() {
    BIN=/tmp/webtrain-gpu-bin
    cp .gpubin/webtrain "$BIN" && chmod +x "$BIN" || { echo "no binary at .gpubin/webtrain"; exit 1; }
}

# One line per figure of the JSON files given as LABEL=FILE.
summary() {
    echo
    echo "== summary"
    python3 "$(dirname "${BASH_SOURCE[0]}")/gpu-summary.py" "$@"
}
