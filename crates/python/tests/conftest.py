"""Shared fixtures: the repository's Cora files and a small hand-made graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gnn

ROOT = Path(__file__).resolve().parents[3]
CORA = ROOT / "data" / "cora" / "raw"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def cora() -> gnn.Data:
    return gnn.load(CORA)


def small_arrays(n: int = 10, f: int = 4, classes: int = 3) -> dict:
    """A ring of ``n`` nodes with ``f`` features and ``classes`` classes, split 4/3/3."""
    rng = np.random.default_rng(0)
    src = np.arange(n, dtype=np.int64)
    dst = (src + 1) % n
    return {
        "x": rng.random((n, f), dtype=np.float32),
        "edge_index": np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]),
        "y": np.arange(n, dtype=np.int64) % classes,
        "train": np.array([0, 1, 2, 3]),
        "val": np.array([4, 5, 6]),
        "test": np.array([7, 8, 9]),
    }


@pytest.fixture
def small() -> dict:
    return small_arrays()
