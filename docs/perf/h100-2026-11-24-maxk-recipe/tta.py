#!/usr/bin/env python3
"""Time to a common validation accuracy from train_reddit's JSON report + log.

usage: tta.py THRESHOLD RUN.json...   (RUN.log must sit beside RUN.json)

The log has the validation accuracy every eval_every epochs; the report has the run's own
time to accuracy (training seconds up to that epoch, first epoch included) and the median
epoch. Time to THRESHOLD = own TTA seconds + (epochs between the two) x median epoch.
Also prints the validation curve every 20 epochs.
"""
import json, os, re, sys

thr = float(sys.argv[1])
for f in sys.argv[2:]:
    rep = json.load(open(f))["gnn"]["report"]
    tta, med = rep["time_to_accuracy"], rep["epoch_ms_median"]
    log = open(f[:-5] + ".log").read()
    vals = [(int(m.group(1)), float(m.group(2)))
            for m in re.finditer(r"epoch +(\d+)/\d+ .*? val ([0-9.]+)", log)]
    e = next((ep for ep, v in vals if v >= thr), None)
    t = None if e is None else tta["train_s"] + (e - tta["epoch"]) * med / 1000
    curve = " ".join(f"{100 * v:.1f}" for ep, v in vals if ep % 20 == 0)
    print(f"{os.path.basename(f):32s} test {100 * rep['test_acc']:.2f} median {med:.1f} ms "
          f"own-tta epoch {tta['epoch']} {tta['train_s']:.2f} s | to {thr}: epoch {e} "
          f"{'-' if t is None else f'{t:.2f} s'} | val every 20: {curve}")
