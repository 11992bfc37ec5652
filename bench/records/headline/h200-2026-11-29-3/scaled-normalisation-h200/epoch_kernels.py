#!/usr/bin/env python3
"""Kernels of one training epoch from an ncu CSV of train_reddit (3 epochs, --csv --metrics ...).

The epoch is the launches after the second optimiser step's last adam_apply up to the third's:
every launch over 8 us is printed (time, DRAM and L2 bytes), the rest summed.
Usage: python3 epoch_kernels.py NCU.csv[.xz]
"""
import collections, csv, io, lzma, sys

path = sys.argv[1]
text = lzma.open(path, "rt").read() if path.endswith(".xz") else open(path).read()
hdr, launches = None, collections.OrderedDict()
for r in csv.reader(io.StringIO(text)):
    if r and r[0] == "ID":
        hdr = r
        continue
    if hdr and len(r) == len(hdr):
        d = dict(zip(hdr, r))
        k = launches.setdefault(d["ID"], {"name": d["Kernel Name"][:70]})
        k[d["Metric Name"]] = float(d["Metric Value"].replace(",", ""))
L = list(launches.values())
ends = [i for i, x in enumerate(L)
        if x["name"].startswith("adam_apply") and i + 1 < len(L) and not L[i + 1]["name"].startswith("adam")]
a, b = ends[-2] + 1, ends[-1] + 1
total = small = 0.0
for x in L[a:b]:
    t = x.get("gpu__time_duration.sum", 0) / 1e3
    total += t
    if t > 8:
        dram = (x.get("dram__bytes_read.sum", 0) + x.get("dram__bytes_write.sum", 0)) / 1e6
        print("%8.1f us  dram %7.1f MB  L2 %8.1f MB  %s" % (t, dram, x.get("lts__t_bytes.sum", 0) / 1e6, x["name"]))
    else:
        small += t
print("launches %d, under 8 us: %.1f us; epoch GPU time %.1f us" % (b - a, small, total))
