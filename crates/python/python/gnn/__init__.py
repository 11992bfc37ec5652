"""gnn: full-batch GNN training and inference from NumPy or PyG data, on a Rust engine."""

from ._native import CUDA, Data, Model, __version__, from_pyg_state_dict, load, load_model, reddit_shaped
from ._native import train

__all__ = ["CUDA", "Data", "Model", "__version__", "from_pyg_state_dict", "load", "load_model", "reddit_shaped", "train"]
