"""PyG-layout import without torch: anything with ``edge_index``, ``x``, ``y`` and
``*_mask`` attributes whose values are NumPy arrays or expose ``.numpy()``."""

from __future__ import annotations

import sys
from typing import Any, Optional

import numpy as np

from ._native import Data


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    torch = sys.modules.get("torch")  # only if the caller already imported it
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        if value.dtype == torch.bfloat16:  # NumPy has no bfloat16: pass its bits
            return value.view(torch.int16).numpy().view(np.uint16)
        return value.numpy()
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def from_pyg(
    obj: Any,
    *,
    split: Optional[int] = None,
    undirected: bool = False,
    row_normalize: bool = False,
    num_classes: Optional[int] = None,
    split_seed: int = 0,
    name: str = "pyg",
) -> Data:
    """A ``Data`` from a PyG ``Data``-like object: ``edge_index`` (2 x E), ``x``, ``y`` and,
    when present, ``train_mask`` / ``val_mask`` / ``test_mask`` (without them a stratified split
    is drawn from ``split_seed``). Values may be NumPy arrays or anything with ``.numpy()``
    (CPU or CUDA torch tensors, bfloat16 included); torch itself is never imported.

    ``split`` picks a column of two-dimensional masks (datasets that ship several splits, such
    as WikiCS). The other options are ``Data``'s. Bad arrays raise ``TypeError`` /
    ``ValueError`` naming the array (``train``, ``val`` and ``test`` are the masks)."""
    def attr(key: str, required: bool) -> Optional[np.ndarray]:
        value = getattr(obj, key, None)
        if value is None:
            if required:
                raise TypeError(
                    f"from_pyg: the object has no `{key}` (expected a PyG Data-like object with "
                    "edge_index, x, y and optionally train_mask, val_mask, test_mask)"
                )
            return None
        return _to_numpy(value)

    edge_index = attr("edge_index", True)
    x = attr("x", True)
    y = attr("y", False)
    masks = {}
    for part in ("train", "val", "test"):
        mask = attr(f"{part}_mask", False)
        if mask is not None and mask.ndim == 2 and split is not None:
            mask = mask[:, split]
        masks[part] = mask
    return Data(
        x,
        edge_index,
        y,
        train=masks["train"],
        val=masks["val"],
        test=masks["test"],
        num_classes=num_classes,
        undirected=undirected,
        row_normalize=row_normalize,
        split_seed=split_seed,
        name=name,
    )
