#!/usr/bin/env bash
# Packs what scripts/dawn-bench.mjs needs on a machine with no Node and no
# network (the lent GPU machine, x86-64 Linux) into .dawnpack/: this
# machine's node binary, dawn.node (npm `webgpu`, linux-x64) and its JS,
# the wasm package (pkg/), the harness and the text it trains on, as one
# xz archive under 64 MiB (what a device run may carry), and run.sh, which
# unpacks it once and runs the harness:
#
#   bash scripts/pack-dawn.sh                     # here, after scripts/build.sh and npm ci
#   bash .dawnpack/run.sh --presets tiny,small --precisions fp32 --steps 20   # there
#
# run.sh points Vulkan at the NVIDIA ICD as the GPU scripts do
# (scripts/nvidia-icd.sh, from the repository root it is run in) and uses
# the packed Vulkan loader only where the machine has none.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "pack-dawn: $*" >&2; }
die() { say "$*"; exit 1; }

out=.dawnpack
limit=$((64 * 1024 * 1024))
dawn=node_modules/webgpu/dist/linux-x64/dawn.node
text=public/corpus/brown.txt
[ -f pkg/webtrain_bg.wasm ] && [ -f pkg/webtrain.js ] || die "pkg/ is missing: run scripts/build.sh first"
[ -f "$text" ] || die "$text is missing: run scripts/build.sh first"
[ -f "$dawn" ] || die "$dawn is missing: run npm ci (the webgpu devDependency)"
node_bin=$(readlink -f "$(command -v node)") || die "no node on PATH"
vulkan=$(ldconfig -p 2>/dev/null | awk '/libvulkan\.so\.1 .*x86-64/ { print $NF; exit }')

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/dawn"
mkdir -p "$root"/{bin,lib,scripts,www,pkg,public/corpus,node_modules/webgpu/dist/linux-x64}
cp "$node_bin" "$root/bin/node"
cp node_modules/webgpu/index.js node_modules/webgpu/package.json "$root/node_modules/webgpu/"
cp "$dawn" "$root/node_modules/webgpu/dist/linux-x64/"
cp pkg/webtrain.js pkg/webtrain_bg.wasm pkg/package.json "$root/pkg/"
cp scripts/dawn-bench.mjs "$root/scripts/"
cp www/matrix-units-patch.js "$root/www/"
cp "$text" "$root/public/corpus/"
[ -n "$vulkan" ] && cp -L "$vulkan" "$root/lib/libvulkan.so.1"
cat > "$root/VERSION" <<EOF
commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- scripts pkg crate shaders 2>/dev/null || echo ' (with changes)')
node $("$node_bin" --version)
webgpu $(node -p "require('./node_modules/webgpu/package.json').version")
packed $(date -u +%FT%TZ)
EOF

rm -rf "$out"
mkdir -p "$out"
say "compressing (xz, about a minute)"
tar -C "$stage" -cf - dawn | xz -T0 -6 > "$out/dawn.tar.xz"
cat > "$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# Unpacks dawn.tar.xz once (to $DAWNPACK_DIR, default /tmp/webtrain-dawn)
# and runs the Dawn bench with the arguments given: one JSON line per case.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir="${DAWNPACK_DIR:-/tmp/webtrain-dawn}"
if [ ! -x "$dir/dawn/bin/node" ] || [ "$here/dawn.tar.xz" -nt "$dir/dawn/bin/node" ]; then
    rm -rf "$dir" && mkdir -p "$dir" && xz -dc "$here/dawn.tar.xz" | tar -C "$dir" -xf -
    touch "$dir/dawn/bin/node"
fi
# (it also unpacks .gl/*.deb where there are some; a failure there is not ours)
[ -f scripts/nvidia-icd.sh ] && { source scripts/nvidia-icd.sh; } || true
ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' || export LD_LIBRARY_PATH="$dir/dawn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cat "$dir/dawn/VERSION" >&2
exec "$dir/dawn/bin/node" "$dir/dawn/scripts/dawn-bench.mjs" "$@"
EOF
chmod +x "$out/run.sh"

bytes=$(du -cb "$out"/* | awk 'END { print $1 }')
unpacked=$(du -sb "$root" | awk '{ print $1 }')
say "$out: $((bytes / 1024 / 1024)) MiB ($bytes bytes; $((unpacked / 1024 / 1024)) MiB unpacked)"
[ "$bytes" -lt "$limit" ] || die "$out is over 64 MiB: a device run cannot carry it"
