#!/usr/bin/env python3
"""Tables of docs/perf/h100-2026-11-25-first-epoch/ from its raw files (run from this folder).

1. calls 2 and 3 (train_reddit, one process per run): first epoch, its host graph set-up,
   time to accuracy (each run's best validation minus 0.5 points), test accuracy;
2. the maxk_sweep runs (calls 1 and 4, three seeds on one generated graph): epochs and
   seconds after the first epoch to a common 94.76 % validation, and the depth of MaxK's dip
   (the lowest validation accuracy after the run first reaches 90 %).
"""
import glob
import json


def per_process(call):
    print(f"\n{call}: run | first epoch ms | of it graph set-up ms | time to accuracy s (epoch) | test %")
    for f in sorted(glob.glob(f"{call}/*_s?.json")):
        r = json.load(open(f))["gnn"]["report"]
        fe = r["first_epoch"]["total"]
        t = r["time_to_accuracy"]
        print(f"{f.split('/')[-1][:-5]:10} | {(fe['secs'] * 1e3 + fe['nanos'] / 1e6):7.0f} | "
              f"{r['first_epoch_graph_setup_ms']:6.0f} | {t['train_s']:.2f} ({t['epoch']}) | "
              f"{100 * r['test_acc']:.2f}")


def sweeps(pattern, target=94.76):
    print(f"\nsweep | model | epoch ms | test % | per seed: epoch to {target} %, s after the first epoch, dip")
    for f in sorted(glob.glob(pattern)):
        for r in json.load(open(f))["rows"]:
            cells = []
            for c in r["val_curve_seeds"]:
                first = c[0][1]
                hit = next(((e, s) for e, s, v in c if v >= target), None)
                i90 = next((i for i, (_, _, v) in enumerate(c) if v >= 90), None)
                dip = min(v for _, _, v in c[i90:]) if i90 is not None else float("nan")
                cells.append(f"e{hit[0]} {hit[1] - first:.2f} s dip {dip:.1f}" if hit else "never")
            name = f.split("/")[-2]
            print(f"{name:14} | {r['activation']:8} | {r['epoch_ms']:5.1f} | {r['test_acc']:.2f} | "
                  + " | ".join(cells))


per_process("call2-tta-before")
per_process("call3-tta-after")
sweeps("call1-first-epoch-lr/*/sweep.json")
sweeps("call4-maxk-dip/*/sweep.json")
