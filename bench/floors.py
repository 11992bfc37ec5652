"""Floor arithmetic of the benchmark harness: the bytes a perfect kernel must move, and how far
a measured time is from moving them at the machine's rates.

Two floors per measurement (the formulas of the guide's performance page,
docs/src/performance.md):

- compulsory HBM bytes: every byte the operation must read or write once, at the machine's
  memory bandwidth;
- gather: every non-zero reads a K-wide feature row (the row re-reads a real kernel serves
  from cache), at the L1 rate (the floor) and at the L2 rate (what a kernel that misses L1
  gets).

SpMM Y = A X (CSR, N rows, nnz non-zeros, K columns, s bytes per feature element):
    compulsory = 4 nnz (column indices) [+ 4 nnz edge values] + 2 N K s (X in, Y out)
                 + 4 (N + 1) (row pointers)
    gather     = nnz K s
SDDMM s_e = <A_i, B_j> for every non-zero e = (i, j), scores out in f32:
    compulsory = 4 nnz + 4 (N + 1) + 2 N K s + 4 nnz (scores)
    gather     = nnz K s (B_j per non-zero; A_i read once per row, as a kernel that keeps it
                 resident while it walks the row does)
Training epoch: the sum over the SpMMs the model runs in one epoch, forward and backward
(epoch_spmm_widths says which for each formulation); the dense work is not counted, so the
distance of an epoch to its floor includes it.

Indices are counted as int32 and edge values as f32 for every measurement, ours and the
peers' (PyTorch's CSR tensors hold int64 indices): the floor is the work's, not one
implementation's storage. The kernel benchmarks compute the same numbers in Rust
(gnn_kernels::verify::floor) and print them beside their timings.
"""

from dataclasses import dataclass

# Bytes per stored feature element.
ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def element_bytes(precision):
    """Bytes per feature element of `precision` (f32, bf16, f16)."""
    try:
        return ELEMENT_BYTES[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}: expected one of {sorted(ELEMENT_BYTES)}")


def spmm_compulsory_bytes(n, nnz, k, s, values=True):
    """Compulsory HBM bytes of one CSR SpMM: indices, optional f32 edge values, X and Y once,
    row pointers."""
    return 4 * nnz + (4 * nnz if values else 0) + 2 * n * k * s + 4 * (n + 1)


def spmm_gather_bytes(nnz, k, s):
    """Logical bytes one SpMM gathers: a K-wide row of X per non-zero."""
    return nnz * k * s


def sddmm_compulsory_bytes(n, nnz, k, s):
    """Compulsory HBM bytes of one CSR SDDMM: indices, both operands once, f32 scores out."""
    return 4 * nnz + 4 * (n + 1) + 2 * n * k * s + 4 * nnz


def sddmm_gather_bytes(nnz, k, s):
    """Logical bytes one SDDMM gathers: a K-wide row of B per non-zero (A's row stays
    resident over its row's non-zeros)."""
    return nnz * k * s


# The models the epoch floor knows (the report's `kind` spellings and the suites' names).
GCN_KINDS = ("gcn",)
MEAN_KINDS = ("sage", "sage_mean")


def layer_dims(in_dim, hidden, out_dim, layers):
    """The (in, out) widths of every layer of an in -> hidden x (layers - 1) -> out model."""
    dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
    return list(zip(dims[:-1], dims[1:]))


def epoch_spmm_widths(formulation, kind, layers, in_dim, hidden, out_dim, input_cache):
    """The feature width K of every SpMM one training epoch runs, forward and backward.

    formulation "ours" (crates/models/src/conv/gcn.rs, sage.rs): GCN and GraphSAGE-mean
      aggregate at the narrower side of each layer, K = min(in, out):
      - out < in (transform first, A (X W)): forward 1 at K; backward 1 at K (the gradient of
        X W, which W's gradient needs);
      - out >= in (aggregate first, (A X) W): forward 1 at K; backward 1 at K only when X
        needs a gradient, i.e. not in the first layer (its X is the input);
      - with the input-aggregation cache (applies to GCN and GraphSAGE-mean without input
        dropout), the first layer reads A X computed once before training: no SpMM per epoch.
      GCN 2x128 (602 -> 128 -> 41): [128, 128, 41, 41]; cached: [41, 41].
      GCN 4x256: cached [256, 256, 256, 256, 41, 41]; uncached adds [256, 256].
    formulation "pyg": PyG 2.8's GCNConv transforms first in every layer (K = out, forward
      and backward: the product X W needs its gradient); its SAGEConv aggregates first in
      every layer (K = in, forward; backward except the first layer). No input cache.
      GCN 2x128: [128, 128, 41, 41]; GraphSAGE 2x128: [602, 128, 128].
    formulation "tgcn" (same_graph.py's plain-torch GCN): transforms first, as PyG's GCN.

    Returns None for a kind this function has no count for (the floors are then omitted).
    """
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    is_gcn = kind in GCN_KINDS
    is_mean = kind in MEAN_KINDS
    if not (is_gcn or is_mean):
        return None
    widths = []
    for l, (i, o) in enumerate(layer_dims(in_dim, hidden, out_dim, layers)):
        if formulation == "ours":
            if l == 0 and input_cache:
                continue
            k = min(i, o)
            transform_first = o < i
        elif formulation in ("pyg", "tgcn"):
            if formulation == "tgcn" and not is_gcn:
                return None
            transform_first = is_gcn
            k = o if transform_first else i
        else:
            raise ValueError(f"unknown formulation {formulation!r}")
        widths.append(k)  # forward
        if transform_first or l > 0:
            widths.append(k)  # backward
    return widths


@dataclass(frozen=True)
class Work:
    """What one measurement moves: compulsory bytes and gathered bytes."""

    compulsory: int
    gather: int


def spmm_work(n, nnz, k, s, values=True):
    """One SpMM's work."""
    return Work(spmm_compulsory_bytes(n, nnz, k, s, values), spmm_gather_bytes(nnz, k, s))


def sddmm_work(n, nnz, k, s):
    """One SDDMM's work."""
    return Work(sddmm_compulsory_bytes(n, nnz, k, s), sddmm_gather_bytes(nnz, k, s))


def epoch_work(n, nnz, widths, s, values):
    """One epoch's SpMM work: the sum over the SpMMs at `widths` on the same operand."""
    return Work(
        sum(spmm_compulsory_bytes(n, nnz, k, s, values) for k in widths),
        sum(spmm_gather_bytes(nnz, k, s) for k in widths),
    )


@dataclass(frozen=True)
class Rates:
    """A machine's rates in bytes per second; None where the harness does not know one."""

    hbm: float = None
    l1: float = None
    l2: float = None


def floors(work, rates, measured_ms):
    """The floor times (ms) of `work` at `rates`, the achieved bytes/s (compulsory bytes over
    the measured time) and the distance to each floor (measured / floor; 1.0 = at the floor).
    A rate the machine lacks gives None for its floor and distance."""

    def at(nbytes, rate):
        return None if rate is None or rate <= 0 else nbytes / rate * 1e3

    out = {
        "bytes_moved": work.compulsory,
        "gather_bytes": work.gather,
        "achieved_bytes_per_s": work.compulsory / (measured_ms / 1e3) if measured_ms and measured_ms > 0 else None,
        "floor_ms": {"hbm": at(work.compulsory, rates.hbm), "gather_l1": at(work.gather, rates.l1),
                     "gather_l2": at(work.gather, rates.l2)},
    }
    out["distance"] = {
        key: (measured_ms / f if f and measured_ms is not None else None) for key, f in out["floor_ms"].items()
    }
    return out
