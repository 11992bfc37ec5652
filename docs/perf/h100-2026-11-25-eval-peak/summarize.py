#!/usr/bin/env python3
"""Table of a before/after run of scripts/eval-peak-gpu.sh: peak allocated (GiB) overall and per
epoch phase, median epoch and the phase breakdown (ms). Usage: summarize.py RUN_DIR [RUN_DIR...]"""
import glob, json, os, sys

G = 2**30
rows = []
for d in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(d, "train_reddit*.json"))):
        name = os.path.basename(f)[len("train_reddit_"):-5]
        which = next((b for b in ["prev", "release0", "keep"] if name.startswith(b + "_")), "")
        cfg = name[len(which) + 1:] if which else name
        which = {"prev": "before", "": "after"}.get(which, which)
        r = json.load(open(f))["gnn"]["report"]
        p = r.get("peak_allocated_by_phase") or {}
        b = r["breakdown"]
        n = max(b.get("epochs", 1), 1)
        ms = {k: 1e3 * (b[k]["secs"] + b[k]["nanos"] * 1e-9) / n
              for k in ["aggregation", "gemm", "elementwise", "backward_dense", "loss_optimizer", "total"]}
        rows.append((cfg, which, os.path.basename(d.rstrip("/")), (r["peak_allocated_bytes"] / G, (r.get("peak_device_bytes") or 0) / G),
                     {k: v / G for k, v in p.items()}, r["epoch_ms_median"], r["test_acc"], ms))
print(f"{'config':<18} {'build':<8} {'run':<5} {'peak':>5} {'drv':>5}  {'fwd':>5} {'loss':>5} {'bwd':>5} {'step':>5} {'eval':>5}  {'epoch ms':>8} {'test %':>7}  {'agg':>6} {'gemm':>5} {'elem':>5} {'bwd':>6} {'l+opt':>5} {'mean':>6}")
for cfg, which, run, peak, p, ep, acc, ms in sorted(rows, key=lambda r: (r[0], r[2], ["before", "release0", "after", "keep"].index(r[1]))):
    ph = " ".join(f"{p.get(k, float('nan')):5.2f}" for k in ["forward", "loss", "backward", "step", "eval"])
    print(f"{cfg:<18} {which:<8} {run:<5} {peak[0]:5.2f} {peak[1]:5.2f}  {ph}  {ep:8.2f} {100 * acc:7.2f}  "
          f"{ms['aggregation']:6.2f} {ms['gemm']:5.2f} {ms['elementwise']:5.2f} {ms['backward_dense']:6.2f} "
          f"{ms['loss_optimizer']:5.2f} {ms['total']:6.2f}")
