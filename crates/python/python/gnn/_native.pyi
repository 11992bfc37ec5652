"""Type stubs of the native module ``gnn._native`` (crates/python/src). The docstrings at run
time are the Rust doc comments; these stubs give the signatures to type checkers and IDEs."""

from os import PathLike
from typing import Any, Callable, Dict, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
CUDA: bool
"""Whether this build has CUDA support (``--features cuda``)."""
NCCL: bool
"""Whether this build trains on several GPUs (``--features nccl``, which implies ``cuda``)."""

ArrayLike = npt.ArrayLike
StrPath = Union[str, PathLike]

class Data:
    """A graph with node features, labels and a train/val/test split.

    ``x``: ``(nodes, features)`` float32 / float16 / float64 / bfloat16 bits as uint16.
    ``edge_index``: ``(2, E)`` int32/int64 (row 0 sources, row 1 targets), or ``indptr`` +
    ``indices``: CSR, row ``i`` the nodes node ``i`` aggregates from. ``y``: int class ids,
    ``-1`` unlabeled. ``train`` / ``val`` / ``test``: boolean masks or node-id arrays, all
    three or none (then 20 / 30 per class are drawn from ``split_seed``). Bad input raises
    ``TypeError`` / ``ValueError`` naming the array, index and value."""

    def __init__(
        self,
        x: ArrayLike,
        edge_index: Optional[ArrayLike] = None,
        y: Optional[ArrayLike] = None,
        *,
        indptr: Optional[ArrayLike] = None,
        indices: Optional[ArrayLike] = None,
        train: Optional[ArrayLike] = None,
        val: Optional[ArrayLike] = None,
        test: Optional[ArrayLike] = None,
        num_classes: Optional[int] = None,
        undirected: bool = False,
        row_normalize: bool = False,
        split_seed: int = 0,
        name: str = "data",
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_edges(self) -> int: ...
    @property
    def num_features(self) -> int: ...
    @property
    def num_classes(self) -> int: ...
    @property
    def row_normalize(self) -> bool: ...
    @property
    def edge_index(self) -> npt.NDArray[np.int64]: ...
    @property
    def csr(self) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
    @property
    def x(self) -> npt.NDArray[np.float32]: ...
    @property
    def y(self) -> npt.NDArray[np.int64]: ...
    @property
    def train_idx(self) -> npt.NDArray[np.int64]: ...
    @property
    def val_idx(self) -> npt.NDArray[np.int64]: ...
    @property
    def test_idx(self) -> npt.NDArray[np.int64]: ...
    def __len__(self) -> int: ...

Aggregation = str
"""``"exact"``, ``"fastrand:S"``, ``"bucket:S"`` or ``"aes:W"``."""

class Model:
    """A trained GNN bound to its device."""

    def predict(
        self,
        data: Data,
        *,
        aggregation: Aggregation = "exact",
        int8: bool = False,
        row_normalize: Optional[bool] = None,
    ) -> npt.NDArray[np.int64]:
        """The predicted class of every node."""
    def logits(
        self,
        data: Data,
        *,
        aggregation: Aggregation = "exact",
        int8: bool = False,
        row_normalize: Optional[bool] = None,
    ) -> npt.NDArray[np.float32]:
        """Logits ``(nodes, classes)``."""
    def evaluate(
        self,
        data: Data,
        *,
        aggregation: Aggregation = "exact",
        int8: bool = False,
        row_normalize: Optional[bool] = None,
    ) -> Dict[str, float]:
        """Accuracy on ``{"train", "val", "test"}``."""
    def save(self, path: StrPath) -> str:
        """Writes ``<path>.safetensors`` + ``<path>.json``; returns the first."""
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def num_params(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def row_normalize(self) -> Optional[bool]: ...
    def state_dict(self) -> Dict[str, npt.NDArray[np.float32]]:
        """Parameters under PyG's names."""

def load(path: StrPath, name: Optional[str] = None, split_seed: int = 0) -> Data:
    """Loads Planetoid, DGL Reddit, OGB, gnn-benchmark npz or edge-list data."""

def reddit_shaped(scale: float = 0.05, seed: int = 0) -> Data:
    """The seeded Reddit-shaped synthetic graph."""

def load_model(path: StrPath, device: str = "cpu") -> Model:
    """Loads a model saved by ``Model.save`` or the engine's examples."""

def from_pyg_state_dict(
    state_dict: Dict[str, ArrayLike],
    model: Literal["gcn", "sage", "gin", "gat", "transformer"],
    *,
    heads: Optional[int] = None,
    activation: Optional[Literal["relu", "elu"]] = None,
    device: str = "cpu",
) -> Model:
    """A model from a PyG state_dict of NumPy arrays."""

def train(
    data: Data,
    model: str = "gcn",
    *,
    layers: int = 2,
    hidden: int = 128,
    epochs: int = 200,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    dropout: float = 0.5,
    input_dropout: Optional[float] = None,
    precision: Literal["f32", "bf16", "f16"] = "f32",
    device: str = "auto",
    devices: Union[None, int, Sequence[int]] = None,
    maxk: Optional[int] = None,
    maxk_after_first: bool = False,
    seed: int = 0,
    eval_every: int = 1,
    patience: Optional[int] = None,
    optimizer: Literal["adam", "adamw"] = "adam",
    lr_schedule: Literal["constant", "cosine"] = "constant",
    heads: int = 8,
    att_dropout: Optional[float] = None,
    activation: Optional[Literal["relu", "elu"]] = None,
    layer_norm: bool = False,
    residual: bool = False,
    gin_norm: bool = False,
    row_normalize: Optional[bool] = None,
    tf32: bool = False,
    profile: bool = False,
    deterministic: bool = False,
    input_cache: bool = True,
    labelled_output: bool = True,
    train_rows: bool = True,
    on_epoch: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None,
) -> Tuple[Model, Dict[str, Any]]:
    """The engine's trainer; see ``gnn.train``. ``devices``: several ranks on a 1-D node
    partition (``device="cuda"``: one per listed GPU over NCCL; ``device="cpu"``: N threads
    over the in-process communicator)."""
