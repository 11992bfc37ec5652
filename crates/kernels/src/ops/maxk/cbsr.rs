//! The CBSR feature type (MaxK-GNN's Compressed Balanced Sparse Row) and its checked
//! constructor: the invariant every MaxK kernel relies on.

use super::*;

/// Features after MaxK in Compressed Balanced Sparse Row form: `k` entries per row.
///
/// ```text
///  dense row  [0.0, 3.1, 0.0, 0.0, 2.5, 0.9]     (D = 6, k = 2)
///  data  row  [3.1, 2.5]                         kept values, differentiable
///  index row  [  1,   4]                         their columns, strictly ascending, < D
/// ```
///
/// Invariant (private fields): `data` and `index` are `[N, k]`, `index` has the dtype
/// [`index_dtype`]`(dim)`, `k <= dim <= `[`MAX_WIDTH`], and every index row is strictly
/// increasing with entries `< dim`. The GPU kernels index `[N, dim]` buffers with these
/// columns, so a value outside `0..dim` would be an out-of-bounds access: [`maxk`] establishes
/// the invariant by construction and [`Cbsr::new`] checks it for a caller's own arrays.
#[derive(Debug, Clone)]
pub struct Cbsr {
    // Visible to the `maxk` module (its kernels and constructors), private to everything else:
    // the same boundary as when the type lived in `maxk/mod.rs`.
    pub(crate) data: Tensor,
    pub(crate) index: Tensor,
    pub(crate) dim: usize,
}

impl Cbsr {
    /// A CBSR from a caller's own values and columns, after checking the invariant above:
    /// shapes, dtypes, and every column in range and strictly ascending per row (the index is
    /// read back to the host once for this).
    pub fn new(data: Tensor, index: Tensor, dim: usize) -> Result<Cbsr> {
        const OP: &str = "cbsr";
        let bad = |what: String| Err(Error::shape(OP, what));
        check_float_or_half(OP, "CBSR data", &data)?;
        let Ok((n, k)) = data.dims2() else {
            return bad(format!("data has shape {:?}, expected [N, k]", data.dims()));
        };
        if k > dim || dim > MAX_WIDTH {
            return bad(format!(
                "need k <= D <= {MAX_WIDTH}, got k = {k}, D = {dim}"
            ));
        }
        if index.dims() != [n, k] || index.dtype() != index_dtype(dim) {
            return bad(format!(
                "index {:?} {:?} must be [{n}, {k}] {:?}",
                index.dims(),
                index.dtype(),
                index_dtype(dim)
            ));
        }
        if !index.device().same_device(data.device()) {
            return Err(Error::Device {
                op: OP,
                tensor: index.device().location(),
                graph: data.device().location(),
            });
        }
        let cols = index
            .to_dtype(DType::I64)?
            .flatten_all()?
            .to_vec1::<i64>()?;
        if k > 0 {
            for (r, row) in cols.chunks_exact(k).enumerate() {
                if let Some(t) = (0..k).find(|&t| {
                    row[t] < 0 || row[t] as usize >= dim || (t > 0 && row[t] <= row[t - 1])
                }) {
                    return bad(format!(
                        "index row {r} slot {t} holds column {} (columns must be strictly \
                         ascending and in 0..{dim})",
                        row[t]
                    ));
                }
            }
        }
        Ok(Cbsr { data, index, dim })
    }

    /// Kept values `[N, k]` (carries the gradient).
    pub fn data(&self) -> &Tensor {
        &self.data
    }

    /// Their columns `[N, k]`, strictly ascending per row ([`index_dtype`]`(dim)`).
    pub fn index(&self) -> &Tensor {
        &self.index
    }

    /// The dense width `D`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Entries per row.
    pub fn k(&self) -> usize {
        self.data.dims().get(1).copied().unwrap_or(0)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.data.dims().first().copied().unwrap_or(0)
    }

    /// The same pattern with other values (e.g. dropout applied to `data`).
    pub fn with_data(&self, data: Tensor) -> Result<Cbsr> {
        if data.dims() != self.data.dims() {
            return Err(Error::shape(
                "cbsr",
                format!(
                    "new data {:?} must match {:?}",
                    data.dims(),
                    self.data.dims()
                ),
            ));
        }
        check_float_or_half("cbsr", "CBSR data", &data)?;
        Ok(Cbsr {
            data,
            index: self.index.clone(),
            dim: self.dim,
        })
    }

    /// Rows gathered from valid CBSRs of the same width (a halo exchange): no check, since
    /// every row was built by [`maxk`](super::maxk) or checked by [`Cbsr::new`] on its rank.
    /// The caller vouches for that: `index` of `data`'s shape, every entry below `dim`.
    pub fn from_rows_unchecked(data: Tensor, index: Tensor, dim: usize) -> Cbsr {
        Cbsr { data, index, dim }
    }

    /// Dense `[N, D]` (zeros off the pattern), differentiable in `data`.
    pub fn to_dense(&self) -> Result<Tensor> {
        Ok(self.data.apply_op2(
            &self.index,
            CbsrMoveOp {
                k: self.k(),
                d: self.dim,
                scatter: true,
            },
        )?)
    }
}
