"""Several ranks from Python (``train(..., devices=...)``): on the CPU the ranks run over the
in-process communicator, the engine's thread-ranks path; the losses are those of the Rust
``train_dist`` run with the same settings, and the single-device run's within the tolerance the
engine's own equivalence tests use. Bad ``devices`` are ValueErrors / TypeErrors naming it."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import gnn
from conftest import ROOT, small_arrays

# train_dist's recipe (the Reddit one) at Cora's size: what both sides train below.
RECIPE = {"hidden": 16, "epochs": 20, "weight_decay": 0.0, "input_dropout": 0.0, "eval_every": 5}


def losses(report: dict) -> list:
    return [h["loss"] for h in report["history"]]


def train_dist_json(tmp_path, *flags: str) -> dict:
    """Runs the Rust example `train_dist` on the bundled Cora, CPU, ranges (as the package
    partitions), and returns its JSON. GNN_TRAIN_DIST names a built binary; otherwise `cargo
    run` builds it (the dev profile, or release when GNN_CARGO_RELEASE=1)."""
    out = tmp_path / "train_dist.json"
    args = ["--cpu", "--dataset", "cora", "--partition", "range", "--json", str(out), *flags]
    binary = os.environ.get("GNN_TRAIN_DIST")
    if binary:
        cmd = [binary, *args]
    else:
        release = ["--release"] if os.environ.get("GNN_CARGO_RELEASE") == "1" else []
        cmd = ["cargo", "run", "--quiet", *release, "--example", "train_dist", "--", *args]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def test_cpu_ranks_give_train_dist_s_losses_bit_for_bit(tmp_path, cora):
    ref = train_dist_json(
        tmp_path, "--ranks", "2", "--hidden", "16", "--epochs", "20", "--seed", "0"
    )
    model, report = gnn.train(cora, device="cpu", devices=2, progress=False, seed=0, **RECIPE)
    assert losses(report) == ref["loss_curve"]
    assert report["test_acc"] == ref["test_acc"]
    assert report["best_epoch"] == ref["best_epoch"]
    assert report["exchange"] == ref["exchange"] and report["comm"] == "in-process"
    assert [r["rows"] for r in report["ranks"]] == [r["rows"] for r in ref["ranks"]]


def test_cpu_ranks_follow_the_single_device_run(cora):
    _, one = gnn.train(cora, device="cpu", progress=False, **RECIPE)
    model, three = gnn.train(cora, device="cpu", devices=3, progress=False, **RECIPE)
    assert len(three["history"]) == len(one["history"]) == RECIPE["epochs"]
    # The engine's equivalence tolerance (gnn_train::dist tests): relative 1e-4 per epoch,
    # accuracies equal up to a logit tie flipping between two summation orders.
    for a, b in zip(three["history"], one["history"]):
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(b["loss"]), (a, b)
        if a["acc"] is not None:
            assert abs(a["acc"][1] - b["acc"][1]) <= 2 / 500, (a, b)
    # Same kinds of objects as one device: the model is rank 0's, whole, and serves the graph.
    assert isinstance(model, gnn.Model) and model.device == "cpu"
    assert three["devices"] == ["cpu"] * 3 and len(three["ranks"]) == 3
    rows = [r["rows"] for r in three["ranks"]]
    assert rows[0][0] == 0 and rows[-1][1] == cora.num_nodes
    assert all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    assert all(r["comm_bytes_per_epoch"] > 0 for r in three["ranks"])
    pred = model.predict(cora)
    assert pred.shape == (cora.num_nodes,) and pred.dtype == np.int64
    # The kept weights are those of the best validation epoch (whole-graph inference).
    assert model.evaluate(cora)["val"] == pytest.approx(three["best_val_acc"], abs=2 / 500)
    for key in ("time_to_accuracy", "breakdown", "best_val_acc", "stopped", "model", "train"):
        assert key in three and key in one


@pytest.mark.parametrize("kind", ["gat", "transformer"])
def test_attention_models_train_on_cpu_ranks_as_on_one_device(cora, kind):
    # GAT and TransformerConv partition too (edge softmax over each rank's own rows, the
    # sources' projections exchanged): the engine's tolerance, relative 1e-4 per epoch.
    opts = {"model": kind, "hidden": 8, "heads": 2, "epochs": 6, "progress": False}
    _, one = gnn.train(cora, device="cpu", **opts)
    _, two = gnn.train(cora, device="cpu", devices=2, **opts)
    assert len(two["history"]) == len(one["history"]) == 6
    for a, b in zip(two["history"], one["history"]):
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(b["loss"]), (a, b)


def test_a_list_of_ids_is_the_same_run_as_a_count(cora):
    _, by_count = gnn.train(cora, device="cpu", devices=2, progress=False, epochs=6, hidden=16)
    _, by_list = gnn.train(cora, device="cpu", devices=[0, 1], progress=False, epochs=6, hidden=16)
    _, by_tuple = gnn.train(cora, device="cpu", devices=(3, 5), progress=False, epochs=6, hidden=16)
    assert losses(by_list) == losses(by_count) == losses(by_tuple)


def test_on_epoch_false_stops_every_rank_after_that_epoch(cora):
    seen = []
    _, full = gnn.train(cora, device="cpu", devices=3, progress=False, epochs=8, hidden=16)

    def stop_at_3(log):
        seen.append(log["epoch"])
        return log["epoch"] < 3

    model, cut = gnn.train(
        cora, device="cpu", devices=3, progress=False, epochs=8, hidden=16, on_epoch=stop_at_3
    )
    assert seen == [1, 2, 3]
    assert cut["stopped"] == "callback" and cut["epochs_run"] == 3
    assert losses(cut) == losses(full)[:3]
    assert model.evaluate(cora)["val"] == pytest.approx(cut["best_val_acc"], abs=2 / 500)


def test_an_exception_in_on_epoch_is_raised_with_ranks(cora):
    def boom(log):
        if log["epoch"] == 2:
            raise RuntimeError("stop the ranks here")

    with pytest.raises(RuntimeError, match="stop the ranks here"):
        gnn.train(cora, device="cpu", devices=2, epochs=5, hidden=16, progress=False, on_epoch=boom)


def small_data() -> gnn.Data:
    a = small_arrays()
    return gnn.Data(a["x"], a["edge_index"], a["y"], train=a["train"], val=a["val"], test=a["test"])


BAD_DEVICES = [
    # (devices, other options, exception, substrings of the message)
    ([], {}, ValueError, ["devices is empty"]),
    ([0, 1, 0], {}, ValueError, ["devices[2] = 0 repeats devices[0]"]),
    ([0, -1], {}, ValueError, ["devices[1] = -1", "non-negative"]),
    (0, {}, ValueError, ["devices = 0", "at least one"]),
    (-2, {}, ValueError, ["devices = -2"]),
    (True, {}, TypeError, ["devices must be an int", "bool"]),
    ("0,1", {}, TypeError, ["devices must be an int", "str"]),
    (1.5, {}, TypeError, ["devices must be an int", "float"]),
    ([0, 1.0], {}, TypeError, ["devices[1] is float"]),
    ([0, None], {}, TypeError, ["devices[1] is NoneType"]),
    ([0, 1], {"device": "cuda:1"}, ValueError, ["device = \"cuda:1\" with devices", "device=\"cuda\""]),
    ([0, 1], {"device": "tpu"}, ValueError, ["device \"tpu\""]),
]


@pytest.mark.parametrize("devices,options,exc,needles", BAD_DEVICES, ids=[repr(b[:2]) for b in BAD_DEVICES])
def test_bad_devices_raise_naming_devices(devices, options, exc, needles):
    options = {"device": "cpu", **options}
    with pytest.raises(exc) as info:
        gnn.train(small_data(), devices=devices, progress=False, **options)
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


@pytest.mark.skipif(gnn.CUDA, reason="a CUDA build opens the GPUs")
def test_a_cpu_build_says_how_to_get_gpu_ranks():
    with pytest.raises(ValueError, match="--features nccl"):
        gnn.train(small_data(), device="cuda", devices=[0, 1], progress=False)
