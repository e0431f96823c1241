#!/usr/bin/env python3
"""Loss curves of `webtrain train` runs, from their JSON lines, as one PNG.

    python3 scripts/plot_runs.py OUT.png LABEL=RUN.jsonl [LABEL=RUN.jsonl ...]

Plots each run's training loss (a moving average of 10 steps, the raw
points faint) and its validation losses, and prints each run's final
numbers with the gap to the first run. Needs matplotlib (pip install
matplotlib); run by hand, not in CI.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    steps, losses, val = [], [], []
    for line in open(path):
        d = json.loads(line)
        if "val_loss" in d:
            val.append((d["step"], d["val_loss"]))
        elif "loss" in d and "step" in d:
            steps.append(d["step"])
            losses.append(d["loss"])
    return steps, losses, val


def moving_average(xs, k=10):
    out, total = [], 0.0
    for i, x in enumerate(xs):
        total += x
        if i >= k:
            total -= xs[i - k]
        out.append(total / min(i + 1, k))
    return out


def main():
    out, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    first = None
    for label, path in runs:
        steps, losses, val = read(path)
        line, = ax.plot(steps, moving_average(losses), label=f"{label} (train, 10-step mean)")
        ax.plot(steps, losses, color=line.get_color(), alpha=0.15, linewidth=0.8)
        if val:
            ax.plot(*zip(*val), "o--", color=line.get_color(), label=f"{label} (validation)")
        final = (moving_average(losses)[-1], val[-1][1] if val else None)
        first = first or final
        gap = lambda a, b: f"{100 * (a - b) / b:+.2f}%" if a is not None and b else "-"
        print(f"{label}: final train (10-step mean) {final[0]:.4f} ({gap(final[0], first[0])}), "
              f"validation {final[1] if final[1] is None else round(final[1], 4)} ({gap(final[1], first[1])})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
