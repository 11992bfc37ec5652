#!/usr/bin/env python3
"""Registers and spill bytes per GAT kernel from `nvcc -Xptxas -v` output (xz).

Usage: python3 spills.py AFTER.txt.xz [BEFORE.txt.xz]. The outputs here came from, in the
repository root with scripts/cuda-toolkit.sh's environment:
  nvcc -arch=sm_90 -cubin -O3 -Xptxas -v -I crates/kernels/cuda crates/kernels/cuda/gat_aggregate.cu -o /tmp/x.cubin
at 2647919, 3f2bee4 and with rows-smem.patch applied."""
import lzma, re, sys


def parse(path):
    out, cur = {}, None
    for line in lzma.open(path, "rt"):
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            out.setdefault(cur, {})["spill"] = (int(m.group(2)), int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out.setdefault(cur, {})["regs"] = int(m.group(1))
    return out


after = parse(sys.argv[1])
before = parse(sys.argv[2]) if len(sys.argv) > 2 else {}
print(f"{'kernel':26s} {'regs':>5s} {'spill st/ld':>12s}   {'before':>6s} {'spill st/ld':>12s}")
for k in sorted(after):
    if k.startswith("gat_"):
        a, b = after[k], before.get(k, {})
        print(f"{k:26s} {a.get('regs', '-'):>5} {str(a.get('spill', '-')):>12s}   "
              f"{b.get('regs', '-'):>6} {str(b.get('spill', '-')):>12s}")
