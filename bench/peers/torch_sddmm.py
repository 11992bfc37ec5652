#!/usr/bin/env python3
"""PyTorch's gather formulation of SDDMM, e[p] = <A[row_p], B[col_p]>, written as
`(A[row] * B[col]).sum(-1)` (what PyG's attention layers do per edge), timed on the graph that
`bench_sddmm --dump DIR` wrote (indptr.npy, indices.npy: the same CSR our kernels and cuSPARSE
ran on). Edges go in chunks of --chunk so the two gathered [chunk, K] operands fit in memory
(a single 114.5 M x 256 gather alone needs 117 GB). CUDA events, median of --reps after
3 warm-ups; writes JSON.

    python3 bench/peers/torch_sddmm.py --dir DIR --k 16,32,64,128,256 --json torch_sddmm.json
"""
import argparse
import json

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--k", default="16,32,64,128,256")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=1 << 24)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    dev = torch.device("cuda")
    indptr = torch.from_numpy(np.load(f"{a.dir}/indptr.npy")).to(dev)
    col = torch.from_numpy(np.load(f"{a.dir}/indices.npy")).to(dev)
    n = indptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(n, device=dev), indptr[1:] - indptr[:-1])
    nnz = col.numel()
    rows = []
    for k in [int(x) for x in a.k.split(",")]:
        A = torch.randn(n, k, device=dev)
        B = torch.randn(int(col.max()) + 1, k, device=dev)
        out = torch.empty(nnz, device=dev)

        def run():
            for s in range(0, nnz, a.chunk):
                r, c = row[s:s + a.chunk], col[s:s + a.chunk]
                out[s:s + a.chunk] = (A[r] * B[c]).sum(-1)

        for _ in range(3):
            run()
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            run()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        ms = sorted(ts)[len(ts) // 2]
        print(f"K {k:4d}: torch gather {ms:.3f} ms (chunks of {a.chunk} edges)", flush=True)
        rows.append({"k": k, "torch_gather_ms": ms, "chunk_edges": a.chunk})
        del A, B, out
        torch.cuda.empty_cache()
    doc = {"nodes": n, "nnz": nnz, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "reps": a.reps, "rows": rows}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
