#!/usr/bin/env bash
# Installs what building and testing webtrain needs: only what is missing,
# without prompting. A second run takes seconds.
#
# First it checks the prerequisites it cannot install (Rust via rustup,
# Node ≥ 20.19 with npm) and, where it cannot install Debian packages (not
# root, or no apt-get), a C compiler, Chromium, ChromeDriver and lavapipe;
# if any is missing it names each, with the command that installs it, and
# stops before installing anything. Under `npm start` and `npm run build`
# the browser tiers' pieces only warn: serving the page needs none of them.
# Tools are looked up on PATH (`id` too) and the browser's paths come from
# CHROMIUM, CHROMEDRIVER and WEBTRAIN_VULKAN_ICD_DIRS, so tests/setup/ can
# run this on a bare PATH without touching the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
say() { echo "setup: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
ICD_DIRS=${WEBTRAIN_VULKAN_ICD_DIRS:-/usr/share/vulkan/icd.d:/etc/vulkan/icd.d:/usr/local/share/vulkan/icd.d}
root_apt=false
if [ "$(id -u)" = 0 ] && have apt-get; then root_apt=true; fi
if have apt-get; then as_root="(as root)"; else as_root="(on Debian, as root)"; fi

fatal=()     # missing, and setup cannot install it: one line each
browser=()   # missing pieces of the browser and native tiers (not root)
debs=()      # Debian packages to install (root) or that were not installed

# Rust via rustup: the wasm32 target comes from rustup, so a distribution's
# cargo alone will not do. env.sh has put ~/.cargo/bin on PATH.
if ! have rustup && ! have cargo; then
  fatal+=("Rust via rustup (no rustup or cargo on PATH or in ~/.cargo/bin): install Rust with rustup (see the Rust project's install page)")
elif ! have rustup; then
  fatal+=("rustup (found $(command -v cargo) without it; the wasm32 target is added with rustup): install Rust with rustup (see the Rust project's install page)")
elif ! have cargo; then
  fatal+=("cargo (rustup has no default toolchain): rustup default stable")
fi

# Node: package-lock's engines ask for ^20.19.0 || ^22.13.0 || >=23.5.0
# (vite and its tools); Debian 12's nodejs is 18.
node_ok() {
  [[ $1 =~ ^v([0-9]+)\.([0-9]+)\. ]] || return 1
  local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  (( (major == 20 && minor >= 19) || (major == 22 && minor >= 13) || (major == 23 && minor >= 5) || major >= 24 ))
}
node_how="Debian 12's nodejs is 18; install Node 22 from NodeSource or with nvm (nvm install 22), which bring npm"
if ! have node; then
  fatal+=("Node ≥ 20.19 with npm (no node on PATH): $node_how")
else
  node_version=$(node --version 2>/dev/null || echo unknown)
  if ! node_ok "$node_version"; then
    fatal+=("Node ≥ 20.19 (found $node_version at $(command -v node); package-lock's engines ask for 20.19+ or 22.13+): $node_how")
  elif ! have npm; then
    fatal+=("npm (found node $node_version without it): install the npm that matches this Node (NodeSource's and nvm's Node bring it)")
  fi
fi

# A C compiler (build scripts of the crates link with it): apt-get can
# install it as root, so only a machine where it cannot is told to.
if ! have cc && ! have gcc && ! have clang; then
  if $root_apt; then debs+=(gcc)
  else fatal+=("a C compiler (no cc, gcc or clang on PATH): apt-get install gcc $as_root"); fi
fi
have pkg-config || debs+=(pkg-config)

# Chromium and ChromeDriver (the chrome and e2e tiers) and lavapipe, Mesa's
# Vulkan driver (the native tier on a machine without a GPU).
lavapipe=""
IFS=: read -ra dirs <<<"$ICD_DIRS"
for d in "${dirs[@]}"; do compgen -G "$d/lvp_icd*.json" >/dev/null && lavapipe=$d; done
if $root_apt; then
  for pkg in chromium chromium-driver mesa-vulkan-drivers; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || debs+=("$pkg")
  done
else
  if [ ! -x "$CHROMIUM" ]; then
    debs+=(chromium); browser+=("Chromium (no $CHROMIUM; the chrome and e2e tiers): apt-get install chromium $as_root")
  fi
  if [ ! -x "$CHROMEDRIVER" ]; then
    debs+=(chromium-driver); browser+=("ChromeDriver (no $CHROMEDRIVER; the chrome tier): apt-get install chromium-driver $as_root")
  fi
  if [ -z "$lavapipe" ]; then
    debs+=(mesa-vulkan-drivers); browser+=("lavapipe, Mesa's Vulkan driver (no lvp_icd*.json in ${ICD_DIRS//:/, }; the native tier without a GPU): apt-get install mesa-vulkan-drivers $as_root")
  fi
  if [ ${#debs[@]} -gt 0 ]; then
    if have apt-get; then why="not root"; else why="no apt-get"; fi
    say "$why: not installing the Debian packages ${debs[*]}; the browser tiers (chrome, e2e) need chromium and chromium-driver, the native tier without a GPU mesa-vulkan-drivers"
  fi
fi

# Serving the page (npm start, npm run build) needs no browser of its own.
case "${npm_lifecycle_event:-}" in
  start|build)
    if [ ${#browser[@]} -gt 0 ]; then
      say "npm test will need:"; printf '  - %s\n' "${browser[@]}" >&2
      browser=()
    fi ;;
esac
fatal+=(${browser[@]+"${browser[@]}"})
if [ ${#fatal[@]} -gt 0 ]; then
  {
    echo "setup: missing prerequisites; nothing was installed:"
    printf '  - %s\n' "${fatal[@]}"
    if [ ${#browser[@]} -gt 0 ]; then
      echo "  (the Debian packages in one command, as root: apt-get install ${debs[*]}; run as root, this script installs them itself)"
    fi
    echo "Install these, then run this again."
  } >&2
  exit 1
fi

# Debian packages, as root: a C compiler if there is none, pkg-config,
# Chromium + its driver (browser tiers) and lavapipe (the native tier
# without a GPU). No binaryen: wasm-opt is off (crate/Cargo.toml says why).
if $root_apt && [ ${#debs[@]} -gt 0 ]; then
  say "installing ${debs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >/dev/null
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
