"""Compares the loss curves and accuracies of train_dist runs with the train_reddit run of the
same model (scripts/dist-gpu.sh): `<model>_single.json` against every `<model>_*.json`."""
import json
import pathlib
import sys

run = pathlib.Path(sys.argv[1])
for single in sorted(run.glob("*_single.json")):
    model = single.name[: -len("_single.json")]
    s = json.loads(single.read_text())
    want = s["gnn"]["loss_curve"]
    want_test = s["runs"][0]["test_acc"]
    for other in sorted(run.glob(f"{model}_*.json")):
        if other == single:
            continue
        d = json.loads(other.read_text())
        if "gnn" in d:  # another train_reddit run (the run-to-run spread of one GPU)
            d = {
                "loss_curve": d["gnn"]["loss_curve"],
                "test_acc": d["runs"][0]["test_acc"],
                "ranks": [{"epoch_ms_median": d["runs"][0]["epoch_ms_median"]}],
            }
        got = d["loss_curve"]
        n = min(len(got), len(want))
        worst = max(abs(a - b) / abs(b) for a, b in zip(got[:n], want[:n]))
        print(
            f"{other.stem:<22} epochs {n:>3}  max rel loss diff {worst:.2e}  "
            f"final loss {got[n-1]:.5f} vs {want[n-1]:.5f}  test {100*d['test_acc']:.2f} "
            f"vs {100*want_test:.2f}  epoch ms {d['ranks'][0]['epoch_ms_median']:.1f} vs "
            f"{s['runs'][0]['epoch_ms_median']:.1f}"
        )
