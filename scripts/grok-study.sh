#!/usr/bin/env bash
# The grokking study in docs/TASKS.md: modadd's preset with AdamW and with
# Muon, fp32 and 8-bit state, over seeds: accuracy (training and held out)
# over steps, the figure, and the first step each run held 95% held out.
# By hand, not in CI (each run takes minutes on lavapipe). A log already
# written is kept, so an interrupted study goes on where it stopped.
#   scripts/grok-study.sh OUT_DIR [SEEDS, default "1 2 3"] [extra webtrain train flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/grok-study.sh OUT_DIR [SEEDS] [flags…]}
seeds=${2:-1 2 3}
shift $(($# < 2 ? $# : 2))
mkdir -p "$out"
webtrain=target/release/webtrain
cargo build --release --quiet --bin webtrain
runs=()
for optimizer in adamw muon; do
  for state in fp32 int8; do
    for seed in $seeds; do
      log="$out/modadd-$optimizer-$state-$seed.jsonl"
      if [ ! -s "$log" ]; then
        echo "== modadd $optimizer $state seed $seed" >&2
        "$webtrain" train --task modadd --optimizer "$optimizer" --optim-state "$state" \
          --seed "$seed" "$@" > "$log.partial"
        mv "$log.partial" "$log"
      fi
      runs+=("$optimizer/$state seed $seed=$log")
    done
  done
done
python3 scripts/plot_tasks.py docs/figures/grokking.png "${runs[@]}"
