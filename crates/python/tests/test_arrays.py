"""Data from arrays: every bad input is a TypeError or ValueError naming the array (and the
index and value where one is at fault), never a crash; good inputs of every accepted layout
give the same dataset."""

from __future__ import annotations

import numpy as np
import pytest

import gnn
from conftest import small_arrays


def build(a: dict, **extra) -> gnn.Data:
    a = {**a, **extra}
    x = a.pop("x")
    return gnn.Data(x, a.pop("edge_index", None), a.pop("y", None), **a)


def with_(key, value):
    return lambda a: {**a, key: value}


def edited(key, f):
    return lambda a: {**a, key: f(a[key].copy())}


def setitem(arr, idx, v):
    arr[idx] = v
    return arr


BAD = [
    # (case id, edit of the good arrays, exception, substrings of the message)
    ("edge_index float", edited("edge_index", lambda e: e.astype(np.float32)), TypeError, ["edge_index has dtype float32"]),
    ("edge_index 3 rows", edited("edge_index", lambda e: np.vstack([e, e[:1]])), ValueError, ["edge_index has shape (3, 20)", "(2, E)"]),
    ("edge_index transposed", edited("edge_index", lambda e: np.ascontiguousarray(e.T)), ValueError, ["edge_index has shape (20, 2)", "transpose"]),
    ("edge_index 1-D", edited("edge_index", lambda e: e[0]), ValueError, ["edge_index has shape (20,)"]),
    ("negative id", edited("edge_index", lambda e: setitem(e, (0, 5), -1)), ValueError, ["edge_index[0, 5] = -1 is negative"]),
    ("id out of range", edited("edge_index", lambda e: setitem(e, (1, 7), 10)), ValueError, ["edge_index[1, 7] = 10 is out of range", "0..10"]),
    ("huge id", edited("edge_index", lambda e: setitem(e, (1, 0), 2**40)), ValueError, ["edge_index[1, 0] = 1099511627776"]),
    ("x int", edited("x", lambda x: (x * 10).astype(np.int64)), TypeError, ["x has dtype int64"]),
    ("x bool", edited("x", lambda x: x > 0.5), TypeError, ["x has dtype bool"]),
    ("x object", with_("x", np.array([[None] * 4] * 10, dtype=object)), TypeError, ["x has dtype object"]),
    ("x 1-D", edited("x", lambda x: x[:, 0]), ValueError, ["x has shape (10,)"]),
    ("x 3-D", edited("x", lambda x: x[:, :, None]), ValueError, ["x has shape (10, 4, 1)"]),
    ("x NaN", edited("x", lambda x: setitem(x, (3, 2), np.nan)), ValueError, ["x[3, 2] = NaN", "finite"]),
    ("x inf", edited("x", lambda x: setitem(x, (9, 0), np.inf)), ValueError, ["x[9, 0] = inf"]),
    ("x float16 inf", edited("x", lambda x: setitem(x.astype(np.float16), (1, 1), np.inf)), ValueError, ["x[1, 1] = inf"]),
    ("x float64 overflow", edited("x", lambda x: setitem(x.astype(np.float64), (2, 3), 1e300)), ValueError, ["x[2, 3] = inf"]),
    ("empty graph", lambda a: {**a, "x": np.zeros((0, 4), np.float32), "edge_index": np.zeros((2, 0), np.int64), "y": np.zeros(0, np.int64), "train": None, "val": None, "test": None}, ValueError, ["empty graph", "x has 0 rows"]),
    ("no features", edited("x", lambda x: x[:, :0]), ValueError, ["x has shape (10, 0)"]),
    ("y too short", edited("y", lambda y: y[:9]), ValueError, ["y has 9 entries for 10 nodes"]),
    ("y too long", edited("y", lambda y: np.concatenate([y, y[:1]])), ValueError, ["y has 11 entries for 10 nodes"]),
    ("y 2-D", edited("y", lambda y: np.stack([y, y], 1)), ValueError, ["y has shape (10, 2)"]),
    ("y float", edited("y", lambda y: y.astype(np.float32)), TypeError, ["y has dtype float32"]),
    ("y bool", edited("y", lambda y: y > 0), TypeError, ["y has dtype bool"]),
    ("y below -1", edited("y", lambda y: setitem(y, 2, -5)), ValueError, ["y[2] = -5"]),
    ("y beyond num_classes", lambda a: {**a, "num_classes": 2}, ValueError, ["y[2] = 2 is out of range", "num_classes = 2"]),
    ("more classes than nodes", lambda a: {**a, "num_classes": 11}, ValueError, ["11 classes for 10 nodes"]),
    ("num_classes negative", lambda a: {**a, "num_classes": -1}, ValueError, ["num_classes = -1", "non-negative"]),
    ("split_seed negative", lambda a: {**a, "train": None, "val": None, "test": None, "split_seed": -3}, ValueError, ["split_seed = -3"]),
    ("split_seed past 64 bits", lambda a: {**a, "split_seed": 2**64}, ValueError, ["split_seed = 18446744073709551616", "too large"]),
    ("mask too short", with_("train", np.ones(9, bool)), ValueError, ["train is a boolean mask of shape (9,)", "(10,)"]),
    ("mask 2-D", with_("val", np.ones((10, 2), bool)), ValueError, ["val is a boolean mask of shape (10, 2)"]),
    ("split id out of range", with_("train", np.array([0, 10])), ValueError, ["train[1] = 10 is out of range"]),
    ("split id negative", with_("val", np.array([-1, 4])), ValueError, ["val[0] = -1 is negative"]),
    ("split float", with_("test", np.array([7.0, 8.0])), TypeError, ["test has dtype float64", "mask", "node ids"]),
    ("split overlap", with_("test", np.array([0, 8, 9])), ValueError, ["test[0] = 0", "also in train"]),
    ("split repeat", with_("train", np.array([0, 1, 1])), ValueError, ["train[2] = 1", "twice in train"]),
    ("split unlabeled", edited("y", lambda y: setitem(y, 5, -1)), ValueError, ["val[1] = 5", "no label", "y[5] = -1"]),
    ("split partial", lambda a: {**a, "val": None, "test": None}, ValueError, ["missing: val, test"]),
    ("no graph", lambda a: {**a, "edge_index": None}, ValueError, ["no graph"]),
    ("both graphs", lambda a: {**a, "indptr": np.zeros(11, np.int64), "indices": np.zeros(0, np.int64)}, ValueError, ["not both"]),
    ("indptr alone", lambda a: {**a, "edge_index": None, "indptr": np.zeros(11, np.int64)}, ValueError, ["indptr and indices go together"]),
]


@pytest.mark.parametrize("case,edit,exc,needles", BAD, ids=[b[0] for b in BAD])
def test_bad_arrays_raise_naming_the_array(small, case, edit, exc, needles):
    with pytest.raises(exc) as info:
        build(edit(small))
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{case}: {needle!r} not in {message!r}"


def csr_of(a: dict) -> tuple:
    """indptr, indices of the small ring (row = target)."""
    n = a["x"].shape[0]
    src, dst = a["edge_index"]
    order = np.lexsort((src, dst))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    return indptr, src[order]


CSR_BAD = [
    ("indptr length", lambda p, i: (p[:-1], i), ["indptr has shape (10,)", "(11,)"]),
    ("indptr start", lambda p, i: (p + 1, i), ["indptr[0] = 1, expected 0"]),
    ("indptr decreasing", lambda p, i: (setitem(p.copy(), 3, 1), i), ["indptr[3] = 1 is below indptr[2] = 4", "must not decrease"]),
    ("indptr end", lambda p, i: (p, i[:-1]), ["indptr[10] = 20 but indices has 19 entries"]),
    ("index out of range", lambda p, i: (p, setitem(i.copy(), 3, 99)), ["indices[3] = 99 is out of range"]),
    ("index negative", lambda p, i: (p, setitem(i.copy(), 0, -2)), ["indices[0] = -2 is negative"]),
    ("indices float", lambda p, i: (p, i.astype(np.float64)), ["indices has dtype float64"]),
]


@pytest.mark.parametrize("case,edit,needles", CSR_BAD, ids=[b[0] for b in CSR_BAD])
def test_bad_csr_raises_naming_the_array(small, case, edit, needles):
    indptr, indices = edit(*csr_of(small))
    a = {**small, "edge_index": None, "indptr": indptr, "indices": indices}
    with pytest.raises((ValueError, TypeError)) as info:
        build(a)
    for needle in needles:
        assert needle in str(info.value), f"{case}: {needle!r} not in {info.value}"


def same(a: gnn.Data, b: gnn.Data) -> None:
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    for part in ("train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
    assert a.num_classes == b.num_classes


def test_every_layout_gives_the_same_data(small):
    ref = build(small)
    assert (ref.num_nodes, ref.num_edges, ref.num_features, ref.num_classes) == (10, 20, 4, 3)
    same(ref, build(small, edge_index=small["edge_index"].astype(np.int32)))
    # A transposed (non-contiguous) view of an (E, 2) list.
    same(ref, build(small, edge_index=np.ascontiguousarray(small["edge_index"].T).T))
    indptr, indices = csr_of(small)
    same(ref, build({**small, "edge_index": None}, indptr=indptr, indices=indices.astype(np.int32)))
    masks = {p: np.isin(np.arange(10), small[p]) for p in ("train", "val", "test")}
    same(ref, build(small, **masks))
    same(ref, build(small, y=small["y"].astype(np.int32)[:, None]))
    same(ref, build(small, x=small["x"].astype(np.float64)))
    # Lists are converted by numpy.asarray.
    same(ref, build(small, edge_index=small["edge_index"].tolist()))
    # Repeated edges are merged; undirected adds the reverse of each edge.
    same(ref, build(small, edge_index=np.hstack([small["edge_index"], small["edge_index"][:, :3]])))
    one_way = small["edge_index"][:, :10]
    same(ref, build(small, edge_index=one_way, undirected=True))
    assert build(small, edge_index=one_way).num_edges == 10


def test_half_precision_features_widen_exactly(small):
    x16 = small["x"].astype(np.float16)
    np.testing.assert_array_equal(build(small, x=x16).x, x16.astype(np.float32))
    # bfloat16 as its bits: the top half of each float32.
    bits = (small["x"].view(np.uint32) >> 16).astype(np.uint16)
    expect = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(build(small, x=bits).x, expect)


def test_without_a_split_one_is_drawn_and_without_labels_none(small):
    a = {**small, "train": None, "val": None, "test": None}
    d = build(a, split_seed=3)
    assert len(d.train_idx) + len(d.val_idx) + len(d.test_idx) == 10
    np.testing.assert_array_equal(d.train_idx, build(a, split_seed=3).train_idx)
    blind = build({**a, "y": None})
    assert blind.num_classes == 0 and len(blind.train_idx) == 0
    assert (blind.y == -1).all()
    with pytest.raises(ValueError, match="no training nodes"):
        gnn.train(blind, epochs=1, device="cpu", progress=False)


def test_load_reads_the_engines_formats(tmp_path, cora, small):
    assert (cora.name, cora.num_nodes, cora.num_edges, cora.num_classes) == ("cora", 2708, 10556, 7)
    assert cora.row_normalize and (len(cora.train_idx), len(cora.val_idx)) == (140, 500)
    # An edge-list folder written from arrays reads back as the same data.
    np.savetxt(tmp_path / "edges.txt", small["edge_index"].T, fmt="%d")
    np.save(tmp_path / "features.npy", small["x"])
    np.save(tmp_path / "labels.npy", small["y"])
    for part in ("train", "val", "test"):
        np.save(tmp_path / f"{part}.npy", small[part])
    same(gnn.load(tmp_path), build(small))
    with pytest.raises(FileNotFoundError):
        gnn.load(tmp_path / "missing")
    (tmp_path / "labels.npy").unlink()
    with pytest.raises(ValueError, match="labels.npy"):
        gnn.load(tmp_path)


def test_ml_dtypes_bfloat16_arrays_are_taken(small):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = small["x"].astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(build(small, x=xb).x, xb.astype(np.float32))
