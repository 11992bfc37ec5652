#!/usr/bin/env python3
"""Tables of docs/perf/h100-2026-11-25-cosine/ from its raw files (run from this folder):
the maxk_sweep runs (3 seeds on one graph: epoch and seconds after the first epoch to a common
94.76 % validation, and MaxK's dip, the lowest validation after the run first reaches 90 %),
then the per-process train_reddit runs (each seed its own graph: first epoch, time to accuracy
against the run's own best minus 0.5 points, dip, test accuracy)."""
import glob
import json
import re

print("sweep | model | epoch ms | test % | per seed: epoch to 94.76 %, s after the first epoch, dip")
for f in sorted(glob.glob("sweep_*/sweep.json")):
    for r in json.load(open(f))["rows"]:
        cells = []
        for c in r["val_curve_seeds"]:
            first = c[0][1]
            hit = next(((e, s) for e, s, v in c if v >= 94.76), None)
            i90 = next((i for i, (_, _, v) in enumerate(c) if v >= 90), None)
            dip = min(v for _, _, v in c[i90:]) if i90 is not None else float("nan")
            cells.append(f"e{hit[0]} {hit[1] - first:.2f} s dip {dip:.1f}" if hit else "never")
        print(f"{f.split('/')[0]:17} | {r['activation']:8} | {r['epoch_ms']:5.1f} | "
              f"{r['test_acc']:.2f} | " + " | ".join(cells))

print("\nrun | first epoch ms | time to accuracy s (epoch) | dip % | test %")
for f in sorted(glob.glob("*_s?.json")):
    r = json.load(open(f))["gnn"]["report"]
    log = open(f[:-5] + ".log").read()
    vals = [float(v) * 100 for v in re.findall(r"epoch +\d+/\d+ .*? val ([0-9.]+)", log)]
    i90 = next(i for i, v in enumerate(vals) if v >= 90)
    fe = r["first_epoch"]["total"]
    t = r["time_to_accuracy"]
    print(f"{f[:-5]:9} | {fe['secs'] * 1e3 + fe['nanos'] / 1e6:4.0f} | {t['train_s']:.2f} "
          f"({t['epoch']}) | {min(vals[i90:]):.1f} | {100 * r['test_acc']:.2f}")
