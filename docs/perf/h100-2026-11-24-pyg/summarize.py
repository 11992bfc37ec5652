#!/usr/bin/env python3
"""Table of ours vs PyG from run.sh's outputs. Usage: summarize.py RUN_DIR"""
import json
import sys
from pathlib import Path

run = Path(sys.argv[1] if len(sys.argv) > 1 else "run")
pyg = json.loads((run / "same_graph_pyg.json").read_text())
g = pyg["graph"]
print(f"graph: {g['nodes']:,} nodes, {g['nnz']:,} non-zeros, max degree {g['max_deg']:,}; "
      f"{pyg['device']}, torch {pyg['torch']}, PyG {pyg['pyg']}\n")
print("| model | ours epoch ms | PyG epoch ms | speed-up | ours / PyG inference ms | "
      "ours / PyG test acc | ours peak (driver view) | PyG peak (max allocated) |")
print("|---|---|---|---|---|---|---|---|")
for name in ["gcn_2x128", "sage_2x128", "gcn_4x256", "sage_4x256", "gcn_4x256_maxk32"]:
    f = run / f"ours_{name}.json"
    if not f.exists():
        continue
    o = json.loads(f.read_text())["gnn"]["report"]
    peer = name.replace("_maxk32", "")
    p = pyg["pyg_runs"].get(peer, {})
    label = name if peer == name else f"{name} (PyG: ReLU {peer})"
    if "epoch_ms_median" not in p:
        print(f"| {label} | {o['epoch_ms_median']:.1f} | {p.get('error', '-')} | | | | | |")
        continue
    print(
        f"| {label} | {o['epoch_ms_median']:.1f} | {p['epoch_ms_median']:.1f} | "
        f"{p['epoch_ms_median'] / o['epoch_ms_median']:.2f}x | "
        f"{o['inference_ms_median']:.1f} / {p['inference_ms_median']:.1f} | "
        f"{100 * o['test_acc']:.2f} / {100 * p['test_acc']:.2f} | "
        f"{o['peak_device_bytes'] / 2**30:.2f} GiB | {p['peak_GiB']:.2f} GiB |"
    )
