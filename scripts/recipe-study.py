#!/usr/bin/env python3
"""The recipe study's figures and table from `webtrain train` logs.

    python3 scripts/recipe-study.py DIR PREFIX OUT.svg

DIR holds PREFIX-<recipe>.jsonl files (a JSON line per step, validation
lines, a summary: what `webtrain train` prints, e.g. from
scripts/gpu-recipes.sh). Writes an SVG of each recipe's training loss
(smoothed over 10 steps) minus fp32's, and prints a markdown table: final
train loss, validation loss and its gap to fp32's, accuracy where the run
has one, skipped steps, and the operand counts of the last step. No
dependencies beyond Python 3.
"""

import json
import pathlib
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
          "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aa3377"]


def load(path):
    steps, vals, summary = [], [], None
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "summary" in d:
            summary = d["summary"]
        elif "val_loss" in d:
            vals.append((d["step"], d["val_loss"]))
        elif "loss" in d and "step" in d:
            steps.append(d)
    return steps, vals, summary


def smooth(xs, n=10):
    return [sum(xs[max(0, i - n + 1):i + 1]) / len(xs[max(0, i - n + 1):i + 1]) for i in range(len(xs))]


def operand_totals(step):
    ops = step.get("operands")
    if not ops:
        return ""
    sat = sum(c["saturated"] for p in ops.values() for c in p)
    flush = sum(c["flushed"] for p in ops.values() for c in p)
    under = sum(c["blocks_scale_underflowed"] for p in ops.values() for c in p)
    return f"{sat} / {flush} / {under}"


def main():
    folder, prefix, out = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
    runs = {}
    for path in sorted(folder.glob(f"{prefix}-*.jsonl")):
        name = path.stem[len(prefix) + 1:]
        steps, vals, summary = load(path)
        if steps:
            runs[name] = (steps, vals, summary)
    if "fp32" not in runs:
        sys.exit(f"no {prefix}-fp32.jsonl in {folder}: the gaps are to fp32")
    base = smooth([s["loss"] for s in runs["fp32"][0]])
    base_val = runs["fp32"][1][-1][1] if runs["fp32"][1] else None

    print("| recipe | train loss (last 10) | val loss | vs fp32 | accuracy | skipped | last step's operands: saturated / flushed / scales underflowed |")
    print("|---|---|---|---|---|---|---|")
    for name, (steps, vals, summary) in runs.items():
        last = smooth([s["loss"] for s in steps])[-1]
        val = vals[-1][1] if vals else None
        gap = f"{100 * (val - base_val) / base_val:+.2f} %" if val is not None and base_val else "—"
        acc = summary.get("accuracy") if summary else None
        skipped = sum(1 for s in steps if s.get("skipped"))
        print(f"| {name} | {last:.4f} | {val:.4f} | {gap} | {'—' if acc is None else f'{acc:.3f}'} | {skipped} | {operand_totals(steps[-1])} |"
              if val is not None else f"| {name} | {last:.4f} | — | — | — | {skipped} | {operand_totals(steps[-1])} |")

    w, h, pad = 760, 420, 50
    curves = {n: [a - b for a, b in zip(smooth([s["loss"] for s in r[0]]), base)] for n, r in runs.items() if n != "fp32"}
    finite = [v for c in curves.values() for v in c if v == v and abs(v) < 10]
    lo, hi = min(finite + [0.0]), max(finite + [0.0])
    n = max(len(c) for c in curves.values())
    x = lambda i: pad + (w - 2 * pad) * i / max(1, n - 1)
    y = lambda v: h - pad - (h - 2 * pad) * (min(max(v, lo), hi) - lo) / max(1e-9, hi - lo)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 20 * ((len(curves) + 3) // 4)}" font-family="sans-serif" font-size="12">',
           f'<text x="{pad}" y="20">{prefix}: training loss minus fp32\'s (10-step mean), by step</text>',
           f'<line x1="{pad}" x2="{w - pad}" y1="{y(0)}" y2="{y(0)}" stroke="#999"/>',
           f'<text x="5" y="{y(hi) + 4}">{hi:+.3f}</text><text x="5" y="{y(lo) + 4}">{lo:+.3f}</text>',
           f'<text x="{w - pad - 30}" y="{h - pad + 16}">{n} steps</text>']
    for i, (name, c) in enumerate(curves.items()):
        pts = " ".join(f"{x(j):.1f},{y(v):.1f}" for j, v in enumerate(c) if v == v)
        color = COLORS[i % len(COLORS)]
        svg.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
        lx, ly = pad + 170 * (i % 4), h + 5 + 20 * (i // 4)
        svg.append(f'<rect x="{lx}" y="{ly}" width="12" height="3" fill="{color}"/><text x="{lx + 16}" y="{ly + 5}">{name}</text>')
    svg.append("</svg>")
    out.write_text("\n".join(svg))


if __name__ == "__main__":
    main()
