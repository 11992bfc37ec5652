"""Serving: predict / logits / evaluate on any graph, sampled and INT8 inference, the
save / load round trip in the engine's format, the shipped Rust checkpoints, state_dicts."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gnn
from conftest import ROOT


@pytest.fixture(scope="module")
def trained(cora):
    return gnn.train(cora, hidden=16, epochs=60, device="cpu", progress=False)


def test_predictions_agree_with_the_report(trained, cora):
    model, report = trained
    logits = model.logits(cora)
    assert logits.shape == (2708, 7) and logits.dtype == np.float32
    pred = model.predict(cora)
    np.testing.assert_array_equal(pred, logits.argmax(1))
    acc = model.evaluate(cora)
    test = cora.test_idx
    assert acc["test"] == pytest.approx((pred[test] == cora.y[test]).mean())
    assert acc["test"] == pytest.approx(report["test_acc"])
    assert acc["val"] == pytest.approx(report["best_val_acc"])


def test_sampled_and_int8_inference_stay_close(trained, cora):
    model, _ = trained
    exact = model.evaluate(cora)["test"]
    for aggregation in ("fastrand:4", "bucket:4", "aes:8"):
        assert abs(model.evaluate(cora, aggregation=aggregation)["test"] - exact) < 0.05, aggregation
    assert abs(model.evaluate(cora, int8=True)["test"] - exact) < 0.02
    # Wide enough samples take every edge of Cora (largest degree 169 with the self loop).
    np.testing.assert_allclose(model.logits(cora, aggregation="fastrand:256"), model.logits(cora), atol=1e-5)
    with pytest.raises(ValueError, match="aggregation"):
        model.predict(cora, aggregation="median:3")


def test_a_model_serves_other_graphs(trained, cora):
    model, _ = trained
    before = model.logits(cora)
    alone = gnn.Data(cora.x, np.zeros((2, 0), np.int64), cora.y, row_normalize=True)
    assert alone.num_edges == 0
    assert not np.allclose(model.logits(alone), before)
    np.testing.assert_array_equal(model.logits(cora), before)
    narrow = gnn.Data(cora.x[:, :100], cora.edge_index)
    with pytest.raises(ValueError, match="1433"):
        model.predict(narrow)


def test_save_and_load_round_trip(trained, cora, tmp_path):
    model, report = trained
    path = model.save(tmp_path / "gcn-cora")
    assert path.endswith("gcn-cora.safetensors")
    record = json.loads((tmp_path / "gcn-cora.json").read_text())
    assert record["info"]["row_normalize"] is True
    assert record["info"]["test_acc"] == report["test_acc"]
    for where in (tmp_path / "gcn-cora", path):
        loaded = gnn.load_model(where)
        assert loaded.row_normalize is True and loaded.config == model.config
        np.testing.assert_array_equal(loaded.logits(cora), model.logits(cora))
    with pytest.raises(OSError):
        gnn.load_model(tmp_path / "missing")


def test_the_engines_own_checkpoints_load(cora):
    """weights/gcn-cora was trained by train_cora: its recorded test accuracy comes back."""
    stem = ROOT / "weights" / "gcn-cora"
    info = json.loads(stem.with_suffix(".json").read_text())["info"]
    model = gnn.load_model(stem)
    assert model.row_normalize is None  # not recorded: the data's own setting applies
    assert model.evaluate(cora)["test"] == pytest.approx(info["saved_test_acc"])


def test_state_dict_round_trips_through_the_pyg_layout(trained, cora):
    model, _ = trained
    sd = model.state_dict()
    assert sorted(sd) == ["convs.0.bias", "convs.0.lin.weight", "convs.1.bias", "convs.1.lin.weight"]
    assert sd["convs.0.lin.weight"].shape == (16, 1433)  # PyG's Linear: (out, in)
    back = gnn.from_pyg_state_dict({k: v.astype(np.float64) for k, v in sd.items()}, "gcn")
    np.testing.assert_allclose(back.logits(cora, row_normalize=True), model.logits(cora), atol=1e-6)
    extra = {**sd, "bn.weight": np.ones(16, np.float32)}
    with pytest.raises(ValueError, match="bn.weight"):
        gnn.from_pyg_state_dict(extra, "gcn")
    with pytest.raises(TypeError, match="convs.0.bias"):
        gnn.from_pyg_state_dict({**sd, "convs.0.bias": np.zeros(16, np.int64)}, "gcn")
