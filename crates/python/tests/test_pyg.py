"""PyG-layout import without torch: any object with edge_index, x, y and *_mask attributes
whose values expose .numpy()."""

from __future__ import annotations

import numpy as np
import pytest

import gnn


class FakeTensor:
    """What from_pyg needs of a torch tensor: .numpy()."""

    def __init__(self, array):
        self.array = np.asarray(array)

    def numpy(self):
        return self.array


class FakeData:
    """PyG's Data layout: attributes, masks as booleans."""

    def __init__(self, **fields):
        for key, value in fields.items():
            setattr(self, key, FakeTensor(value) if value is not None else None)


def pyg_like(cora, **override):
    n = cora.num_nodes
    fields = {
        "edge_index": cora.edge_index,
        "x": cora.x,
        "y": cora.y,
        "train_mask": np.isin(np.arange(n), cora.train_idx),
        "val_mask": np.isin(np.arange(n), cora.val_idx),
        "test_mask": np.isin(np.arange(n), cora.test_idx),
    }
    fields.update(override)
    return FakeData(**fields)


def test_a_pyg_layout_object_imports_as_the_same_data(cora):
    data = gnn.from_pyg(pyg_like(cora), row_normalize=True, name="cora")
    np.testing.assert_array_equal(data.edge_index, cora.edge_index)
    np.testing.assert_array_equal(data.x, cora.x)
    for part in ("train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(getattr(data, part), getattr(cora, part))
    _, a = gnn.train(data, hidden=16, epochs=5, device="cpu", progress=False)
    _, b = gnn.train(cora, hidden=16, epochs=5, device="cpu", progress=False)
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]


def test_multi_split_masks_take_a_column_and_missing_masks_draw_a_split(cora):
    n = cora.num_nodes
    two = {f"{p}_mask": np.stack([np.zeros(n, bool), np.isin(np.arange(n), getattr(cora, f"{p}_idx"))], 1)
           for p in ("train", "val", "test")}
    data = gnn.from_pyg(pyg_like(cora, **two), split=1)
    np.testing.assert_array_equal(data.train_idx, cora.train_idx)
    with pytest.raises(ValueError, match=r"train is a boolean mask of shape \(2708, 2\)"):
        gnn.from_pyg(pyg_like(cora, **two))
    drawn = gnn.from_pyg(pyg_like(cora, train_mask=None, val_mask=None, test_mask=None))
    assert len(drawn.train_idx) == 20 * 7


def test_bad_pyg_objects_say_what_is_missing_or_wrong(cora):
    with pytest.raises(TypeError, match="no `edge_index`"):
        gnn.from_pyg(object())
    with pytest.raises(ValueError, match=r"edge_index\[1, 3\] = 5000 is out of range"):
        bad = cora.edge_index.copy()
        bad[1, 3] = 5000
        gnn.from_pyg(pyg_like(cora, edge_index=bad))
    with pytest.raises(TypeError, match="y has dtype float32"):
        gnn.from_pyg(pyg_like(cora, y=cora.y.astype(np.float32)))


def test_bfloat16_bits_and_plain_arrays_are_taken(cora):
    bits = (cora.x.view(np.uint32) >> 16).astype(np.uint16)  # Cora's 0/1 features are exact
    data = gnn.from_pyg(pyg_like(cora, x=bits))
    np.testing.assert_array_equal(data.x, cora.x)
    plain = pyg_like(cora)
    plain.x = cora.x  # a NumPy array, no .numpy() needed
    assert gnn.from_pyg(plain).num_features == 1433
