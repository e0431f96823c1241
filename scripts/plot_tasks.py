#!/usr/bin/env python3
"""Accuracy over steps of `webtrain train --task` runs, one panel per task.

    python3 scripts/plot_tasks.py OUT.png PANEL/LABEL=RUN.jsonl [...]

e.g. `add/fp32=add-fp32.jsonl modadd/fp8=modadd-fp8.jsonl`. Each run's
held-out exact-match accuracy is a solid line, its accuracy on the fixed
sample of training examples a dashed one (grokking: the dashed line at
100% long before the solid one rises). Where the runs report a weight norm
(`weight_norm`, the decaying weights' ‖W‖₂), a second row draws it: the
fall the grokking papers watch. Prints each run's final numbers and
the first steps held-out accuracy reached 95% and 99%, and training
accuracy 99%. Needs matplotlib; run by hand, not in CI.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = []
    for line in open(path):
        d = json.loads(line)
        if "accuracy" in d and "step" in d:
            rows.append((d["step"], d["accuracy"], d["train_accuracy"], d.get("weight_norm")))
    return rows


def main():
    out, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    panels = list(dict.fromkeys(name.split("/")[0] for name, _ in runs))
    logs = {path: read(path) for _, path in runs}
    norms = any(r[3] is not None for rows in logs.values() for r in rows)
    fig, axes = plt.subplots(1 + norms, len(panels), figsize=(6 * len(panels), 4.2 * (1 + norms)),
                             dpi=110, squeeze=False)
    for name, path in runs:
        panel, label = name.split("/", 1)
        ax = axes[0][panels.index(panel)]
        rows = logs[path]
        steps = [r[0] for r in rows]
        line, = ax.plot(steps, [100 * r[1] for r in rows], label=f"{label} held out")
        ax.plot(steps, [100 * r[2] for r in rows], "--", color=line.get_color(), alpha=0.7,
                label=f"{label} training sample")
        if norms:
            axes[1][panels.index(panel)].plot(steps, [r[3] for r in rows], color=line.get_color(), label=label)
        first = lambda column, level: next((r[0] for r in rows if r[column] >= level), None)  # noqa: E731
        print(f"{panel} {label}: final held-out {100 * rows[-1][1]:.1f}%, training {100 * rows[-1][2]:.1f}%; "
              f"held out ≥ 95% from step {first(1, 0.95)}, ≥ 99% from {first(1, 0.99)}; "
              f"training ≥ 99% from {first(2, 0.99)}")
    for panel, ax in zip(panels, axes[0]):
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.set_ylabel("exact-match accuracy (%)")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[1] if norms else []:
        ax.set_xlabel("step")
        ax.set_ylabel("weight norm of the decaying weights")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
