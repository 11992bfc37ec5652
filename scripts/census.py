#!/usr/bin/env python3
"""Per-epoch kernel census from two Nsight Compute runs that differ only in epoch count.

usage: census.py SHORT.csv LONG.csv EPOCHS_DIFF

Each CSV is what `ncu -i RUN.ncu-rep --csv --page raw --metrics gpu__time_duration.sum` prints
for a run recorded on the GPU machine with
`ncu --clock-control none --metrics gpu__time_duration.sum -o RUN <binary> ... --epochs E`
(e.g. train_reddit at E = 3 and E = 6, EPOCHS_DIFF = 3).

Sums gpu__time_duration by kernel name (with grid size, which tells apart launches of one
kernel on different shapes) in each run; (long - short) / EPOCHS_DIFF is one training epoch.
Prints the table, largest first, with launches per epoch and the running share.
"""
import csv, sys
from collections import defaultdict


def load(path):
    t, n = defaultdict(float), defaultdict(int)
    with open(path) as f:
        rows = [r for r in csv.reader(f) if len(r) >= 12]
    for r in rows[2:]:
        key = (r[4][:60], r[8])
        t[key] += float(r[11])
        n[key] += 1
    return t, n


(ts, ns), (tl, nl) = load(sys.argv[1]), load(sys.argv[2])
d = float(sys.argv[3])
rows = []
for k in set(tl) | set(ts):
    ms = (tl.get(k, 0) - ts.get(k, 0)) / d
    cnt = (nl.get(k, 0) - ns.get(k, 0)) / d
    if cnt != 0 or abs(ms) > 1e-4:
        rows.append((ms, cnt, k))
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
print(f"per epoch: {total:.3f} ms of kernels, {sum(r[1] for r in rows):.0f} launches")
print(f"{'ms':>8} {'share':>6} {'cum':>6} {'n':>5}  kernel (grid)")
cum = 0.0
for ms, cnt, (name, grid) in rows:
    cum += ms
    print(f"{ms:8.3f} {100 * ms / total:5.1f}% {100 * cum / total:5.1f}% {cnt:5.1f}  {name} {grid}")
