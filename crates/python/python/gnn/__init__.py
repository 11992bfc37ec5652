"""gnn: full-batch GNN training and inference from NumPy or PyG data, on a Rust engine.

    import gnn
    data = gnn.from_pyg(dataset[0])            # or gnn.Data(x, edge_index, y, ...), gnn.load(path)
    model, report = gnn.train(data, model="gcn", hidden=16)
    print(report["test_acc"], report["time_to_accuracy"])
    pred = model.predict(data)                  # class per node, NumPy int64

The engine (``crates/`` of the repository) does the work: the same data, recipe and seed give
the same losses as its ``train_cora`` example, bit for bit on the CPU.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Tuple, Union

from . import _native
from ._native import (
    CUDA,
    NCCL,
    Data,
    Model,
    __version__,
    from_pyg_state_dict,
    load,
    load_model,
    reddit_shaped,
)
from ._progress import Progress
from ._pyg import from_pyg

__all__ = [
    "CUDA",
    "NCCL",
    "Data",
    "Model",
    "__version__",
    "from_pyg",
    "from_pyg_state_dict",
    "load",
    "load_model",
    "reddit_shaped",
    "train",
]


def train(
    data: Data,
    model: str = "gcn",
    *,
    on_epoch: Optional[Callable[[dict], Optional[bool]]] = None,
    progress: Union[bool, str] = True,
    **options: Any,
) -> Tuple[Model, dict]:
    """Trains a GNN on ``data``; returns ``(model, report)``.

    ``model``: ``"gcn"``, ``"sage"``, ``"sage-pool"``, ``"gin"``, ``"gat"``, ``"transformer"``
    or ``"mlp"``. Options (keywords; defaults are Kipf & Welling's GCN recipe at 2 x 128):
    ``layers=2``, ``hidden=128``, ``epochs=200``, ``lr=0.01``, ``weight_decay=5e-4``,
    ``dropout=0.5``, ``input_dropout=None`` (= dropout), ``precision="f32"`` (``"bf16"``,
    ``"f16"`` on a GPU), ``device="auto"`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``),
    ``devices=None`` (several ranks, below),
    ``maxk=None`` (MaxK-GNN's non-linearity keeping K entries per row), ``seed=0``,
    ``eval_every=1``, ``patience=None``, ``optimizer="adam"`` (``"adamw"``),
    ``lr_schedule="constant"`` (``"cosine"``), ``heads=8`` (GAT / transformer),
    ``activation=None`` (ELU for GAT, else ReLU), ``layer_norm``, ``residual``, ``gin_norm``,
    ``row_normalize=None`` (the data's setting), ``tf32``, ``profile`` (per-phase breakdown),
    ``deterministic`` (no float atomics on the GPU), ``input_cache=True``,
    ``labelled_output=True`` (the output layer on the labelled nodes alone where they are at
    most half of the nodes; ``False`` computes every node's logits, as PyG does),
    ``train_rows=True`` (on one device, a GCN's, GraphSAGE's or GIN's training pass computes
    its output layer for the train nodes alone where they are at most 90 % of the nodes, its
    sparse products over their edges alone; ``False``, or ``labelled_output=False``, computes
    the evaluation's rows).

    ``on_epoch(log)`` sees every epoch (``{"epoch", "epochs", "loss", "epoch_ms",
    "train_acc", "val_acc", "test_acc"}``); returning ``False`` stops the run. ``progress``:
    ``True`` shows a tqdm bar if tqdm is installed (a widget in notebooks), else a one-line
    bar on a terminal, else a plain line about every tenth of the run; ``"plain"``,
    ``"line"``, ``"tqdm"`` force one; ``False`` shows nothing.

    ``devices`` trains full-batch on several devices, one rank (thread) each, over a 1-D
    partition of the nodes (contiguous ranges balanced by non-zeros, the engine's
    ``train_dist``): ``device="cuda", devices=[0, 1]`` puts a rank on each listed GPU, talking
    through NCCL (a build with ``--features nccl``; ``devices=N`` = GPUs ``0..N``);
    ``device="cpu", devices=N`` runs N ranks on the CPU over the in-process communicator (the
    same partitioned computation, to check it). Losses and accuracies are the single-device
    run's up to the order of float sums. Every model partitions, GAT and the transformer
    included. The model returned is rank 0's (the parameters
    are replicated); the report is rank 0's plus ``"devices"``, ``"exchange"`` and a row per
    rank under ``"ranks"`` (rows, halo, epoch time, communication, memory). A GPU rank that
    fails aborts the other ranks' NCCL communicators and its error is raised
    (``MemoryError`` out of memory, else ``RuntimeError``); a failure while the ranks are
    still joining NCCL (nothing can abort its init), or a peer whose abort never returns,
    ends the process, as ``train_dist`` does.

    Ctrl-C stops training at the next epoch boundary: the model keeps the weights of its best
    validation epoch so far and ``report["stopped"]`` is ``"interrupt"`` (``"callback"`` when
    ``on_epoch`` returned ``False``, ``None`` after a full run). The report also holds the
    per-epoch ``history``, ``test_acc`` / ``best_val_acc`` / ``best_epoch``,
    ``time_to_accuracy``, epoch and inference times, the phase ``breakdown`` (measured with
    ``profile=True``) and, on a GPU, memory peaks.
    """
    display = Progress(model, progress)
    if on_epoch is None and display.mode is None:
        hook = None
    else:

        def hook(log: dict) -> Optional[bool]:
            display.update(log)
            return on_epoch(log) if on_epoch is not None else None

    try:
        trained, report = _native.train(data, model, on_epoch=hook, **options)
    finally:
        display.close()
    if report.get("stopped") == "interrupt":
        print(
            f"gnn.train: interrupted after epoch {report['epochs_run']}; the model keeps the "
            f"weights of epoch {report['best_epoch']} (validation accuracy "
            f"{report['best_val_acc']:.4f})",
            file=sys.stderr,
        )
    return trained, report
