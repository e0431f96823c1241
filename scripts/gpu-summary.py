#!/usr/bin/env python3
"""One line per figure from the GPU parts' JSON lines (scripts/gpu-part*.sh).

    python3 scripts/gpu-summary.py LABEL=FILE...

Reads each FILE's JSON lines and prints, per row: a unit GEMM's TFLOP/s
(`webtrain bench --what coop`), a training step's ms and tokens/s
(`webtrain bench --what steps`, scripts/dawn-bench.mjs), PyTorch's median
step (torch_llama_bench.py's summary), or a short run's losses (`webtrain
train`: first and last, and the products on matrix units). A missing or
empty file says so: the part's log tells why.
"""
import json
import sys


def rows(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.startswith("{")]
    except (OSError, json.JSONDecodeError) as e:
        print(f"  (no rows in {path}: {e})")
        return []


def describe(label, r):
    if "tflop_s" in r:
        return f"{label}: {r['product']} {r['m']}x{r['n']}x{r['k']} {r['kernel']}: {r['tflop_s']:.1f} TFLOP/s ({r['ms']:.3f} ms)"
    if "step_ms" in r:
        units = r.get("matrix_units") or "off"
        return (f"{label}: {r['preset']} {r['precision']} units {units}: {r['step_ms']:.1f} ms a step, "
                f"{r['tokens_per_s']:.0f} tokens/s")
    if r.get("summary") is True and "median_step_ms" in r:
        return f"{label}: {r['median_step_ms']:.1f} ms a step, {r['tokens_per_s']:.0f} tokens/s"
    if isinstance(r.get("summary"), dict):
        s = r["summary"]
        return (f"{label}: {s.get('steps')} steps, loss {s.get('loss'):.4f}, units {s.get('matrix_units') or 'off'}"
                + (f", products on units {s['products_on_units']}" if "products_on_units" in s else ""))
    return None


for arg in sys.argv[1:]:
    label, _, path = arg.partition("=")
    lines = [d for d in (describe(label, r) for r in rows(path)) if d]
    if not lines:
        print(f"{label}: nothing measured ({path})")
    for line in lines:
        print(line)
