#!/usr/bin/env bash
# The study in docs/TASKS.md, "does it still learn?": add and modadd in
# each precision mode, accuracy over steps, and the figure. By hand, not
# in CI (about an hour on lavapipe; minutes on a GPU).
#   scripts/task-study.sh OUT_DIR [extra webtrain train flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/task-study.sh OUT_DIR [flags…]}
shift
mkdir -p "$out"
webtrain=target/release/webtrain
cargo build --release --quiet --bin webtrain
runs=()
for task in "modadd --task-option p=23 --steps 2000" "add --task-option digits=2 --steps 1000"; do
  name=${task%% *}
  for precision in fp32 f16 sf16 fp8; do
    log="$out/$name-$precision.jsonl"
    echo "== $name $precision" >&2
    # shellcheck disable=SC2086 # the task's flags split on purpose
    "$webtrain" train --task $task --batch 16 --val-every 50 --precision "$precision" "$@" > "$log"
    runs+=("$name/$precision=$log")
  done
done
python3 scripts/plot_tasks.py docs/tasks-precision.png "${runs[@]}"
