# GPU part 4 of 5 (timeouts summed: 390 s): the wasm build on Dawn
# (dawn.node: the browser's engine), tiny and base fp32 (against part 2's
# native figures), and base amp-f16 with Dawn's subgroup matrices off and
# on (the kernels the page builds in Chrome; Dawn offers them with unsafe
# APIs). Needs .dawnpack (scripts/pack-dawn.sh, after scripts/build.sh)
# carried. Part 5 runs it for mxfp8 and nvfp4 (`units`: the recipes in
# $PRECISIONS only).

source "$(dirname "$0")/gpu-common.sh"
[ -d .dawnpack ] || { echo "no .dawnpack: run scripts/pack-dawn.sh here and carry it"; exit 1; }

# base's 16384-token vocabulary needs the whole corpus (about 6 s to train in wasm)
TEXT="--text-bytes 6000000"
UNSAFE="enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia"
PRECISIONS="${PRECISIONS:-amp-f16}"
files=()
if [ "${1:-}" != units ]; then
    step 150 "Dawn, tiny and base fp32" bash .dawnpack/run.sh --presets tiny,base --precisions fp32 --steps 10 $TEXT > "$OUT/dawn-fp32.json"
    files+=("Dawn=$OUT/dawn-fp32.json")
fi
for p in ${PRECISIONS//,/ }; do
    for units in off auto; do
        step 120 "Dawn base $p, subgroup matrices $units" bash .dawnpack/run.sh --presets base \
            --precisions "$p" --steps 10 $TEXT --dawn "$UNSAFE" --matrix-units "$units" > "$OUT/dawn-$p-$units.json"
        files+=("Dawn, subgroup matrices $units=$OUT/dawn-$p-$units.json")
    done
done
summary "${files[@]}"
echo "== done ($(date +%T)); log: $LOG"
