"""Type stubs of the ``gnn`` package: the native classes and functions (``_native.pyi``) and
the Python-side ``train`` (progress display, callback) and ``from_pyg``."""

from typing import Any, Callable, Dict, Literal, Optional, Sequence, Tuple, Union

from ._native import CUDA as CUDA
from ._native import NCCL as NCCL
from ._native import Data as Data
from ._native import Model as Model
from ._native import __version__ as __version__
from ._native import from_pyg_state_dict as from_pyg_state_dict
from ._native import load as load
from ._native import load_model as load_model
from ._native import reddit_shaped as reddit_shaped

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
    """A ``Data`` from a PyG ``Data``-like object (``edge_index``, ``x``, ``y``, ``*_mask``)."""

def train(
    data: Data,
    model: Literal["gcn", "sage", "sage-pool", "gin", "gat", "transformer", "mlp"] = "gcn",
    *,
    on_epoch: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None,
    progress: Union[bool, Literal["tqdm", "line", "plain"]] = True,
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
) -> Tuple[Model, Dict[str, Any]]:
    """Trains a GNN on ``data``; returns ``(model, report)``. See the docstring at run time."""
