# Sourced by the other scripts: tool paths and pinned versions.
export PATH="$HOME/.cargo/bin:$PATH"
WASM_PACK_VERSION=0.15.1
CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
# The wasm-bindgen version the lock file resolved: the CLI must match it exactly.
wasm_bindgen_version() {
  awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}
