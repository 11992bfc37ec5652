#!/usr/bin/env python3
"""Table of the before/after MaxK-32 runs of one call folder (scripts/maxk-layer-gpu.sh):
median epoch, backward-dense phase, peak allocated (all phases and per phase), final loss,
test accuracy and time to accuracy, per binary, precision and round.
Usage: python3 summarize.py CALL_DIR..."""
import json
import sys
from pathlib import Path

GIB = 2**30


def ms(d):
    return (d["secs"] * 1e9 + d["nanos"]) / 1e6


for call in sys.argv[1:]:
    print(f"## {call}")
    print("| run | median epoch ms | backward dense ms/epoch | peak GiB | fwd / bwd peak GiB | final loss | test % | to accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for f in sorted(Path(call).glob("train_reddit*_r*.json")):
        d = json.loads(f.read_text())
        r = d["gnn"]["report"]
        b = r["breakdown"]
        bd = ms(b["backward_dense"]) / b["epochs"]
        ph = r["peak_allocated_by_phase"]
        peak = r["peak_allocated_bytes"] / GIB
        tta = r.get("time_to_accuracy") or {}
        tta_s = f"epoch {tta.get('epoch')}, {tta.get('train_s', float('nan')):.2f} s" if tta else "-"
        print(
            f"| {f.stem} | {r['epoch_ms_median']:.2f} | {bd:.2f} | {peak:.2f} | "
            f"{ph['forward'] / GIB:.2f} / {ph['backward'] / GIB:.2f} | {r['final_loss']:.5f} | "
            f"{100 * d['runs'][0]['test_acc']:.2f} | {tta_s} |"
        )
    print()
