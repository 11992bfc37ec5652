#!/usr/bin/env python3
"""Per-kernel totals of one training epoch from sage-ncu.csv.xz (ncu --csv, gpu__time_duration).

Usage: python3 summarize.py [FIRST LAST]  (kernel ids of the epoch; default 199 382, the
second epoch: ids 14-198 are the first, 383 on the final evaluation)."""
import collections, csv, io, lzma, os, sys

first, last = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (199, 382)
here = os.path.dirname(os.path.abspath(__file__))
rows = list(csv.reader(io.StringIO(lzma.open(os.path.join(here, "sage-ncu.csv.xz"), "rt").read())))
hdr = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
keys = rows[hdr]
total, us, n = 0.0, collections.Counter(), collections.Counter()
for r in rows[hdr + 1:]:
    if len(r) != len(keys):
        continue
    d = dict(zip(keys, r))
    if not first <= int(d["ID"]) <= last:
        continue
    name = d["Kernel Name"]
    key = "cuBLAS nvjet (sm90)" if "nvjet" in name else (
        "cuBLAS cutlass_80 (sm80)" if "cutlass_80" in name else (
            "cuBLAS split-K reduce" if "splitKreduce" in name else (
                "cuBLAS internal::kernel" if "internal::kernel" in name else name.split("(")[0])))
    t = float(d["Metric Value"].replace(",", "")) / 1000.0
    total += t
    us[key] += t
    n[key] += 1
print(f"kernels {first}..{last}: {sum(n.values())} launches, {total / 1000:.2f} ms of GPU time")
print(f"{'kernel':40s} {'launches':>8s} {'ms':>8s} {'share':>6s}")
for k, v in us.most_common():
    print(f"{k:40s} {n[k]:8d} {v / 1000:8.3f} {100 * v / total:5.1f}%")
