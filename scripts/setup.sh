#!/usr/bin/env bash
# Installs what building and testing webtrain needs: only what is missing,
# without prompting. A second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
say() { echo "setup: $*" >&2; }

# Debian packages, as root: Chromium + its driver (browser tiers) and
# lavapipe (the native tier without a GPU). No binaryen: wasm-opt is off
# (crate/Cargo.toml says why).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in chromium chromium-driver mesa-vulkan-drivers; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if ! wasm-pack --version 2>/dev/null | grep -qF " $WASM_PACK_VERSION"; then
  say "installing wasm-pack $WASM_PACK_VERSION"
  cargo install wasm-pack --version "$WASM_PACK_VERSION"
fi

wb=$(wasm_bindgen_version)
if ! wasm-bindgen --version 2>/dev/null | grep -qF " $wb"; then
  say "installing wasm-bindgen-cli $wb (must equal Cargo.lock's wasm-bindgen)"
  cargo install wasm-bindgen-cli --version "$wb"
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages"
  npm ci --no-audit --no-fund
fi
