#!/usr/bin/env python3
"""The Python package's `gnn.train` driven as `train_reddit --data-dir` is: the same files, the
same recipe (train_reddit's Reddit recipe: Adam 0.01, dropout 0.5, no input dropout, no weight
decay, evaluated every 5 epochs, raw features), the same flags, and a JSON report in
train_reddit's shape, so bench/run.py reads both alike (the `python` peer of a train case).
What it measures: the Python side's cost per epoch, against train_reddit on the same files
back to back (issue 40's goal: at most 2 % of the GPU epoch).

    python3 bench/peers/python_train.py --data-dir DIR --model gcn --layers 2 --hidden 128 \\
        --precision bf16 --epochs 60 --seed 0 --no-baseline --no-profile --json out.json

The package must be importable (`pip install` of the wheel scripts/python-wheel.sh builds;
`PYTHONPATH` works too). Flags train_reddit has and this script does not take are refused.

Besides train_reddit's fields the report holds `python`: the wall time between consecutive
epoch callbacks (the whole loop as the user's code sees it: step, evaluation, the engine's
bookkeeping and the Python hook with its progress display), and that time minus the engine's
own epoch time, over the epochs after the warm-up that do not evaluate (`between_ms_median`:
an upper bound on the Python side's cost per epoch, since it includes the engine's own
bookkeeping).
"""

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description="gnn.train on train_reddit's files, flags and JSON shape")
    ap.add_argument("--data-dir", required=True, help="the files train_reddit --data-dir reads")
    ap.add_argument("--dataset", default="reddit", help="the dataset's name inside --data-dir")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--input-dropout", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--precision", default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu", action="store_true", help="train on the CPU (as train_reddit --cpu)")
    ap.add_argument("--no-input-cache", action="store_true")
    ap.add_argument("--no-train-rows", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--no-baseline", action="store_true",
                    help="accepted for train_reddit's flags: this script never trains the MLP baseline")
    ap.add_argument("--progress", default="auto", choices=["auto", "plain", "line", "off"],
                    help="the progress display (auto: what a user gets, gnn.train's default)")
    ap.add_argument("--save", help="write the trained model here (Model.save)")
    ap.add_argument("--json", required=True)
    a = ap.parse_args(argv)

    import gnn  # after the flags: --help works without the package

    t_all = time.perf_counter()
    data = gnn.load(a.data_dir, name=a.dataset, split_seed=a.split_seed)
    load_s = time.perf_counter() - t_all
    stamps = []  # (perf_counter, epoch, the engine's epoch_ms, evaluated)

    def on_epoch(log):
        stamps.append((time.perf_counter(), log["epoch"], log["epoch_ms"], log["val_acc"] is not None))

    progress = {"auto": True, "off": False}.get(a.progress, a.progress)
    model, report = gnn.train(
        data, a.model, layers=a.layers, hidden=a.hidden, epochs=a.epochs, lr=a.lr,
        dropout=a.dropout, input_dropout=a.input_dropout, weight_decay=a.weight_decay,
        eval_every=a.eval_every, precision=a.precision, device="cpu" if a.cpu else "cuda",
        seed=a.seed, profile=not a.no_profile, input_cache=not a.no_input_cache,
        train_rows=not a.no_train_rows,
        row_normalize=False, on_epoch=on_epoch, progress=progress)
    if a.save:
        model.save(a.save)

    warmup = report["train"]["warmup"]
    walls, between = [], []
    for (t0, _, _, _), (t1, epoch, ms, evaluated) in zip(stamps, stamps[1:]):
        if epoch > warmup and not evaluated:
            walls.append((t1 - t0) * 1e3)
            between.append((t1 - t0) * 1e3 - ms)
    median = (lambda v: statistics.median(v) if v else None)
    summary = {"nodes": data.num_nodes, "edges": data.num_edges, "features": data.num_features,
               "classes": data.num_classes, "train": len(data.train_idx), "val": len(data.val_idx),
               "test": len(data.test_idx)}
    doc = {
        "dataset": report["dataset"],
        "dataset_summary": summary,
        "device": report["device"],
        "args": " ".join(sys.argv),
        "package": {"version": gnn.__version__, "cuda": gnn.CUDA, "file": os.path.dirname(gnn.__file__)},
        "graph_prep_s": report["graph_prep_s"],
        "kernels_used": report["kernels_used"],
        "model": report["model"],
        "train": report["train"],
        "gnn": {"model": report["model"], "seed": a.seed,
                "report": {k: v for k, v in report.items() if k != "history"},
                "breakdown": report["breakdown_rows"],
                "loss_curve": [h["loss"] for h in report["history"]]},
        "python": {"load_s": load_s, "epochs_timed": len(walls),
                   "wall_ms_median": median(walls), "between_ms_median": median(between),
                   "epoch_ms_median": report["epoch_ms_median"]},
        "total_s": time.perf_counter() - t_all,
    }
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    p = doc["python"]
    print(f"{a.model} {a.layers}x{a.hidden} {a.precision}: epoch {report['epoch_ms_median']:.3f} ms (engine), "
          f"{p['wall_ms_median'] or float('nan'):.3f} ms between callbacks, "
          f"{p['between_ms_median'] or float('nan'):.3f} ms outside the step; test {report['test_acc']:.4f}")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
