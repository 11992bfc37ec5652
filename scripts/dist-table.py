"""Strong-scaling table of scripts/dist-2gpu.sh (or dist-memory-gpu.sh) run folders: for every
`<name>_single.json` (train_reddit, one GPU) and every `<name>_*ranks2.json` (train_dist --nccl
--ranks 2, e.g. `<name>_ranks2`, `<name>_split_ranks2`), the median epoch times, the speed-up,
the 2-GPU run's communication (rank 0: ms per epoch and its share of the epoch; MB per epoch),
test accuracies and peak allocated memory (single vs the larger rank).

usage: python3 scripts/dist-table.py RUN_DIR [RUN_DIR ...]"""
import json
import pathlib
import re
import sys


def peak_single(log):
    m = re.search(r"peak device memory allocated.*?: ([0-9.]+) GiB", log.read_text())
    return float(m.group(1)) if m else float("nan")


def row(run, single, dist):
    label = dist.name[: -len("_ranks2.json")]
    s, d = json.loads(single.read_text()), json.loads(dist.read_text())
    t1 = s["runs"][0]["epoch_ms_median"]
    r0 = d["ranks"][0]
    t2 = max(r["epoch_ms_median"] for r in d["ranks"])
    phase = {b["phase"]: b["ms_per_epoch"] for b in r0["breakdown"]}
    comm_ms = next(v for k, v in phase.items() if k.startswith("communication"))
    total_ms = phase["epoch total"]
    peak2 = max((r["peak_allocated_bytes"] or 0) for r in d["ranks"]) / 2**30
    peak1 = peak_single(single.with_suffix(".log"))
    return (
        f"| {run.name}/{label} | {t1:.1f} | {t2:.1f} | {t1 / t2:.2f}x | "
        f"{comm_ms:.2f} ({100 * comm_ms / total_ms:.1f} %) | "
        f"{r0['comm_bytes_per_epoch'] / 1e6:.0f} | "
        f"{100 * s['runs'][0]['test_acc']:.2f} / {100 * d['test_acc']:.2f} | "
        f"{peak1:.2f} / {peak2:.2f} |"
    )


print(
    "| run | 1 GPU ms | 2 GPUs ms | speed-up | comm ms (share) | comm MB/epoch | "
    "test 1 / 2 GPUs | peak GiB 1 / 2 GPUs (per rank) |"
)
print("|---|---|---|---|---|---|---|---|")
for folder in sys.argv[1:]:
    run = pathlib.Path(folder)
    for single in sorted(run.glob("*_single.json")):
        name = single.name[: -len("_single.json")]
        for dist in sorted(run.glob(f"{name}_*ranks2.json")):
            print(row(run, single, dist))
