#!/usr/bin/env bash
# Builds the app: the built-in corpus (public/corpus/), the wasm package
# (pkg/) and the page (dist/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
node scripts/brown-corpus.mjs
wasm-pack build crate --release --target web --out-dir ../pkg
npx vite build --logLevel warn
