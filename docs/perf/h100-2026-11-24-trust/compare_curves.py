#!/usr/bin/env python3
"""Compares the loss curves and epoch times of the determinism and resume runs.

Usage: compare_curves.py RUN_DIR   (RUN_DIR: the `run/` folder of scripts/gpu-trust-run.sh)
Prints a markdown table; exits 1 if a deterministic pair is not bit-identical.
"""
import json
import struct
import sys
from pathlib import Path

run = Path(sys.argv[1] if len(sys.argv) > 1 else "run")


def gnn(name):
    return json.loads((run / name).read_text())["gnn"]


def bits(x):
    return struct.pack("<d", x)


def compare(a, b):
    """(identical bits, epochs compared, max |a-b|, max |a-b|/|a|)."""
    n = min(len(a), len(b))
    diffs = [abs(x - y) for x, y in zip(a[:n], b[:n])]
    rel = [d / abs(x) for d, x in zip(diffs, a) if x != 0]
    same = len(a) == len(b) and all(bits(x) == bits(y) for x, y in zip(a, b))
    return same, n, max(diffs, default=0.0), max(rel, default=0.0)


bad = False
print("| pair | epochs | bit-identical loss curve | max abs diff | max rel diff | median epoch ms (a / b) | test acc (a / b) |")
print("|---|---|---|---|---|---|---|")
pairs = []
for model in ["gcn2", "maxk4"]:
    for mode in ["plain", "det"]:
        pairs.append((f"{model} {mode}: run 1 vs run 2", f"det_{model}_{mode}_1.json", f"det_{model}_{mode}_2.json", mode == "det"))
for mode in ["det", "plain"]:
    pairs.append((f"resume {mode}: uninterrupted vs 10 + resumed 10", f"resume_{mode}_full.json", f"resume_{mode}_resumed.json", mode == "det"))
for label, fa, fb, must_match in pairs:
    if not (run / fa).exists() or not (run / fb).exists():
        continue
    a, b = gnn(fa), gnn(fb)
    same, n, d, r = compare(a["loss_curve"], b["loss_curve"])
    ra, rb = a["report"], b["report"]
    print(
        f"| {label} | {n} | {'yes' if same else 'no'} | {d:.3e} | {r:.3e} | "
        f"{ra['epoch_ms_median']:.1f} / {rb['epoch_ms_median']:.1f} | "
        f"{100 * ra['test_acc']:.2f} / {100 * rb['test_acc']:.2f} |"
    )
    if must_match and not same:
        bad = True
sys.exit(1 if bad else 0)
