"""Training: the engine's trainer through Python gives train_cora's losses bit for bit; the
callback, the progress display, stopping and the released GIL."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import gnn
from conftest import CORA as CORA_DIR
from conftest import ROOT, small_arrays


def train_cora_json(tmp_path, *flags: str) -> dict:
    """Runs the Rust example `train_cora` with `flags` (one seed, CPU) and returns its JSON.
    GNN_TRAIN_CORA names a built binary; otherwise `cargo run` builds it (the dev profile,
    or release when GNN_CARGO_RELEASE=1)."""
    out = tmp_path / "train_cora.json"
    args = ["--seeds", "1", "--cpu", "--no-save", "--json", str(out), *flags]
    binary = os.environ.get("GNN_TRAIN_CORA")
    if binary:
        cmd = [binary, *args]
    else:
        release = ["--release"] if os.environ.get("GNN_CARGO_RELEASE") == "1" else []
        cmd = ["cargo", "run", "--quiet", *release, "--example", "train_cora", "--", *args]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def losses(report: dict) -> list:
    return [h["loss"] for h in report["history"]]


@pytest.mark.parametrize(
    "model,flags,options",
    [
        ("gcn", [], {"hidden": 16}),
        ("sage", ["--epochs", "30", "--hidden", "32", "--lr", "0.02"], {"hidden": 32, "epochs": 30, "lr": 0.02}),
    ],
)
def test_losses_equal_train_cora_bit_for_bit(tmp_path, cora, model, flags, options):
    ref = train_cora_json(tmp_path, "--model", model, *flags)
    _, report = gnn.train(cora, model, device="cpu", progress=False, seed=0, **options)
    assert losses(report) == ref["gnn"]["loss_curve"]
    assert report["test_acc"] == ref["runs"][0]["test_acc"]
    assert report["best_epoch"] == ref["runs"][0]["best_epoch"]
    # The same data built from NumPy arrays trains identically.
    arrays = gnn.Data(
        cora.x, cora.edge_index, cora.y,
        train=cora.train_idx, val=cora.val_idx, test=cora.test_idx, row_normalize=True,
    )
    _, again = gnn.train(arrays, model, device="cpu", progress=False, **options)
    assert losses(again) == ref["gnn"]["loss_curve"]


def test_the_report_holds_history_time_to_accuracy_and_breakdown(cora):
    _, r = gnn.train(cora, hidden=16, epochs=40, device="cpu", progress=False, profile=True)
    assert r["stopped"] is None and r["epochs_run"] == 40 and len(r["history"]) == 40
    assert r["history"][0]["epoch"] == 1 and len(r["history"][0]["acc"]) == 3
    assert 0.6 < r["test_acc"] <= 1.0 and r["model"]["kind"] == "gcn"
    tta = r["time_to_accuracy"]
    assert 1 <= tta["epoch"] <= 40 and tta["train_s"] > 0
    phases = {row["phase"] for row in r["breakdown_rows"]}
    assert "aggregation (SpMM fwd+bwd)" in phases and "epoch total" in phases
    assert r["breakdown"]["epochs"] > 0 and r["device"] == "cpu"


def test_on_epoch_sees_every_epoch_and_false_stops_with_the_same_losses(cora):
    seen = []
    _, full = gnn.train(cora, hidden=16, epochs=12, device="cpu", progress=False, on_epoch=seen.append)
    assert [s["epoch"] for s in seen] == list(range(1, 13))
    assert seen[0]["epochs"] == 12 and seen[0]["val_acc"] is not None
    assert [s["loss"] for s in seen] == losses(full)

    def stop_at_5(log):
        return log["epoch"] < 5

    model, cut = gnn.train(cora, hidden=16, epochs=12, device="cpu", progress=False, on_epoch=stop_at_5)
    assert cut["stopped"] == "callback" and cut["epochs_run"] == 5
    assert losses(cut) == losses(full)[:5]
    assert model.evaluate(cora)["val"] == pytest.approx(cut["best_val_acc"])


def test_an_exception_in_on_epoch_is_raised(cora):
    def boom(log):
        if log["epoch"] == 2:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        gnn.train(cora, hidden=16, epochs=5, device="cpu", progress=False, on_epoch=boom)


def test_plain_progress_prints_about_ten_lines(cora, capsys):
    gnn.train(cora, hidden=16, epochs=20, device="cpu", progress="plain")
    lines = [l for l in capsys.readouterr().err.splitlines() if l.strip().startswith("[gcn] epoch")]
    assert [l.split()[2] for l in lines] == ["1/20"] + [f"{e}/20" for e in range(2, 21, 2)]
    gnn.train(cora, hidden=16, epochs=3, device="cpu", progress=False)
    assert capsys.readouterr().err == ""


def test_the_gil_is_released_while_training(cora):
    """A Python thread keeps running while the engine trains: with the GIL held it could only
    run at the epoch boundaries (progress and callback off, one attach per epoch)."""
    count = [0]
    done = threading.Event()

    def spin():
        while not done.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        start = time.perf_counter()
        _, r = gnn.train(cora, hidden=64, epochs=30, device="cpu", progress=False)
        seconds = time.perf_counter() - start
    finally:
        done.set()
        t.join()
    # A free-running loop counts millions per second; holding the GIL it would get about one
    # switch interval (5 ms) per epoch boundary.
    assert count[0] > 20_000 * seconds, (count[0], seconds)


BAD_SETTINGS = [
    ({"model": "resnet"}, "unknown"),
    ({"precision": "bf16"}, "CUDA"),
    ({"precision": "f8"}, "f8"),
    ({"device": "tpu"}, "tpu"),
    ({"dropout": 1.5}, "dropout = 1.5"),
    ({"lr": -1.0}, "lr = -1"),
    ({"maxk": 0}, "maxk = 0"),
    ({"epochs": 0}, "epochs"),
    ({"optimizer": "sgd"}, "sgd"),
    ({"activation": "tanh"}, "tanh"),
    ({"model": "gat", "hidden": 30, "heads": 8}, "heads"),
    # Negative integers are ValueErrors naming the argument (not OverflowError).
    ({"layers": -1}, "layers = -1"),
    ({"hidden": -16}, "hidden = -16"),
    ({"epochs": -5}, "epochs = -5"),
    ({"maxk": -2}, "maxk = -2"),
    ({"seed": -1}, "seed = -1"),
    ({"seed": 2**64}, "seed = 18446744073709551616: too large"),
    ({"eval_every": -1}, "eval_every = -1"),
    ({"patience": -3}, "patience = -3"),
    ({"model": "gat", "heads": -8}, "heads = -8"),
]


@pytest.mark.parametrize("options,needle", BAD_SETTINGS, ids=[str(o) for o, _ in BAD_SETTINGS])
def test_bad_settings_raise_value_error(options, needle):
    a = small_arrays()
    data = gnn.Data(a["x"], a["edge_index"], a["y"], train=a["train"], val=a["val"], test=a["test"])
    options = {"device": "cpu", **options}
    with pytest.raises(ValueError) as info:
        gnn.train(data, progress=False, **options)
    assert needle in str(info.value)


@pytest.mark.skipif(gnn.CUDA, reason="a CUDA build opens the GPU")
def test_a_cpu_build_says_how_to_get_cuda():
    a = small_arrays()
    data = gnn.Data(a["x"], a["edge_index"], a["y"], train=a["train"], val=a["val"], test=a["test"])
    with pytest.raises(ValueError, match="--features cuda"):
        gnn.train(data, device="cuda", progress=False)


def test_negative_integers_elsewhere_raise_value_error_naming_them():
    for call, needle in [
        (lambda: gnn.load(CORA_DIR, split_seed=-1), "split_seed = -1"),
        (lambda: gnn.reddit_shaped(scale=0.01, seed=-7), "seed = -7"),
        (lambda: gnn.from_pyg_state_dict({}, "gat", heads=-2), "heads = -2"),
    ]:
        with pytest.raises(ValueError, match=needle):
            call()


def test_labelled_output_rows_train_as_every_rows_output(cora):
    # Cora's test split cut to 100 nodes: 740 of 2,708 labelled, so the output layer runs on
    # those rows alone by default; labelled_output=False computes every node's logits.
    cut = gnn.Data(
        cora.x, cora.edge_index, cora.y,
        train=cora.train_idx, val=cora.val_idx, test=cora.test_idx[:100], row_normalize=True,
    )
    runs = [
        gnn.train(cut, "gcn", device="cpu", progress=False, hidden=16, epochs=8, labelled_output=on)[1]
        for on in (True, False)
    ]
    assert np.allclose(losses(runs[0]), losses(runs[1]), rtol=1e-5, atol=0)
    assert [h["acc"] for h in runs[0]["history"]] == [h["acc"] for h in runs[1]["history"]]
