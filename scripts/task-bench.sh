#!/usr/bin/env bash
# The tasks' quality bar (docs/TASKS.md, "What the presets reach"): sort
# and reverse learned to ≥ 99% of held-out answers wholly right, on the
# release binary. By hand, not in CI (about 3 minutes on lavapipe; CI
# checks a shorter run that a task is learned at all).
#   scripts/task-bench.sh [extra webtrain train flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
webtrain=target/release/webtrain
cargo build --release --quiet --bin webtrain
status=0
for run in "sort len=4 800" "reverse len=3 200"; do
  read -r task option steps <<< "$run"
  start=$(date +%s)
  # the last validation line's exact match, and whether it is ≥ 99%
  read -r exact verdict < <("$webtrain" train --task "$task" --task-option "$option" \
      --steps "$steps" --val-every 100 "$@" | node -e '
    const lines = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
    const exact = lines.filter((l) => l.accuracy !== undefined).pop().accuracy;
    console.log(exact, exact >= 0.99 ? "ok" : "BELOW-99%");')
  [ "$verdict" = ok ] || status=1
  echo "$task $option, $steps steps: held-out exact match $exact ($verdict), $(( $(date +%s) - start )) s"
done
exit $status
