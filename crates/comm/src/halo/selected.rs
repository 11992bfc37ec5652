//! The aggregation of a symmetric operand for a few selected rows only
//! ([`SelectedAggregation`]): `Y = (Â x)[S_r]` for each rank's selected rows `S_r`, from its
//! own rows of `x`, without gathering every row.
//!
//! Every rank's selected rows, in one global order of padded rank blocks (`block = max_r
//! |S_r|`, at least 1; selected row `k` of rank `r` at position `pos = r * block + k`):
//!
//! ```text
//!              own rows i (n_own)                      positions (P * block)
//!            +-------------------+                   +---------------------+
//!  pos(s) -> | B[pos(s), i]      |      own row i -> | Bt[i, pos(s)]       |
//!  (P*block) |  = Â[i, s]        |                   |  = Â[i, s]          |
//!            +-------------------+                   +---------------------+
//! ```
//!
//! `B` holds, for every entry `(i, s)` of this rank's local graph whose column `s` is a
//! selected node (of any rank), `Â[i, s]` at row `pos(s)`; `Bt` is the same entries by
//! local row: the local graph restricted to the selected columns, renumbered to positions.
//!
//! - forward: `t = B x` (`[P * block, K]`: this rank's share of every selected row's sum,
//!   since `(Â x)[s] = Σ_i Â[s, i] x[i] = Σ_i Â[i, s] x[i]` for a symmetric `Â`), one
//!   reduce-scatter (block `r`: rank `r`'s selected rows, summed over ranks), cut to `|S_r|`;
//! - backward: `dy` padded to `block` rows, one all-gather (every rank's `dy` at its
//!   positions), `dx = Bt g` (`Bt = Bᵀ`: the transpose of the forward's product).
//!
//! Each way moves `P * block * K` elements instead of every rank's rows.

use crate::error::{Error, Result};
use crate::Communicator;
use candle_core::{DType, Device, Tensor};
use gnn_graph::{Csr, LocalGraph, RowPartition};
use gnn_kernels::{spmm_weighted, DeviceGraph, Reduce};
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const OP: &str = "selected_aggregate";

/// `(Â x)[S_r]` for this rank's selected rows `S_r` of a symmetric operand `Â` partitioned
/// by rows, and its transpose product (see the module). Both are collective: every rank
/// calls them in the same order. Untracked: a fused op calls [`Self::forward`] on a
/// detached input and [`Self::backward`] in its own backward. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SelectedAggregation(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    comm: Arc<dyn Communicator>,
    /// This rank's selected rows (local ids, ascending).
    rows: Vec<u32>,
    /// Rows of every rank's block of positions.
    block: usize,
    /// Rows this rank owns (the columns of `B`, the rows of `Bt`).
    n_own: usize,
    /// `B` and `Bt` with their values, `None` when no local entry reaches a selected node.
    products: Option<Products>,
    /// Calls of [`SelectedAggregation::forward`] so far.
    forwards: AtomicUsize,
    /// The graph whose backward clock times [`SelectedAggregation::backward`] (its exchange
    /// deducted, as the communicator's): [`SelectedAggregation::with_policy_of`]'s.
    clock: Option<DeviceGraph>,
}

#[derive(Debug)]
struct Products {
    b: DeviceGraph,
    b_values: Tensor,
    bt: DeviceGraph,
    bt_values: Tensor,
}

impl SelectedAggregation {
    /// The selected aggregation of rank `comm.rank()`, from its local graph `local` (built
    /// under `part`) and the edge `values` of its entries (the whole operand's, sliced by
    /// `local.edges`), for every rank's selected rows `selected[q]` (local ids of rank `q`,
    /// ascending and distinct), uploaded to `device`. The whole operand must be symmetric in
    /// structure and values (GCN's normalised `A + I`): the forward reads a selected row's
    /// entries from the columns of the other rows. Every rank must pass the same `selected`.
    pub fn new(
        local: &LocalGraph,
        values: &[f32],
        part: &RowPartition,
        selected: &[Vec<u32>],
        comm: Arc<dyn Communicator>,
        device: &Device,
    ) -> Result<Self> {
        let (rank, world) = (comm.rank(), comm.world());
        check(local, values, part, selected, rank, world)?;
        let n_own = local.rows.len();
        let block = selected.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let sel = selected_columns(local, part, selected, block)?;
        let products = transpose_pair(local, values, &sel, world * block)?
            .map(|(bt_csr, bt_vals)| -> Result<Products> {
                let (b_csr, b_vals) = by_position(&bt_csr, &bt_vals)?;
                let upload = |c: Csr, v: Vec<f32>| -> Result<(DeviceGraph, Tensor)> {
                    let nnz = c.nnz();
                    let g = DeviceGraph::from_arc(Arc::new(c), device)?;
                    Ok((g, Tensor::from_vec(v, nnz, device)?))
                };
                let (b, b_values) = upload(b_csr, b_vals)?;
                let (bt, bt_values) = upload(bt_csr, bt_vals)?;
                Ok(Products {
                    b,
                    b_values,
                    bt,
                    bt_values,
                })
            })
            .transpose()?;
        Ok(Self(Arc::new(Inner {
            comm,
            rows: selected[rank].clone(),
            block,
            n_own,
            products,
            forwards: AtomicUsize::new(0),
            clock: None,
        })))
    }

    /// The same aggregation with its graphs under `g`'s kernel policy, recording into `g`'s
    /// record ([`DeviceGraph::with_policy_of`]), its backward timed on `g`'s backward clock
    /// ([`DeviceGraph::backward_timer`], the exchange deducted); its call count starts again
    /// from 0.
    pub fn with_policy_of(&self, g: &DeviceGraph) -> Self {
        let i = &self.0;
        Self(Arc::new(Inner {
            comm: i.comm.clone(),
            rows: i.rows.clone(),
            block: i.block,
            n_own: i.n_own,
            products: i.products.as_ref().map(|p| Products {
                b: p.b.with_policy_of(g),
                b_values: p.b_values.clone(),
                bt: p.bt.with_policy_of(g),
                bt_values: p.bt_values.clone(),
            }),
            forwards: AtomicUsize::new(0),
            clock: Some(g.clone()),
        }))
    }

    /// This rank's selected rows (local ids, ascending): the rows of [`Self::forward`]'s
    /// output, in order.
    pub fn rows(&self) -> &[u32] {
        &self.0.rows
    }

    /// Rows of every rank's block of positions: the longest selection (at least 1).
    pub fn block(&self) -> usize {
        self.0.block
    }

    /// Stored entries of `B` (this rank's entries whose column is a selected node).
    pub fn nnz(&self) -> usize {
        self.0.products.as_ref().map_or(0, |p| p.b.nnz())
    }

    /// How many times [`Self::forward`] has run (on this rank).
    pub fn forward_calls(&self) -> usize {
        self.0.forwards.load(Ordering::Relaxed)
    }

    /// `(Â x)[S_r]` (`[|S_r|, K]`) from this rank's rows `x` (`[n_own, K]`), untracked, in
    /// `x`'s dtype. Collective.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let inner = &self.0;
        let (n, k) = x.dims2()?;
        if n != inner.n_own {
            return Err(Error::Shape {
                op: OP,
                what: format!("x has {n} rows, this rank owns {}", inner.n_own),
            });
        }
        inner.forwards.fetch_add(1, Ordering::Relaxed);
        let x = x.detach().contiguous()?;
        let rows = inner.comm.world() * inner.block;
        let t = match &inner.products {
            Some(p) => spmm_weighted(&p.b, &x, &values_for(&p.b_values, &x)?, Reduce::Sum)?,
            None => Tensor::zeros((rows, k), x.dtype(), x.device())?,
        };
        let mine = inner.comm.reduce_scatter_sum(&t)?;
        drop(t);
        Ok(mine.narrow(0, 0, inner.rows.len())?.contiguous()?)
    }

    /// The gradient [`Self::forward`]'s input gets for the output gradient `dy`
    /// (`[|S_r|, K]`): `[n_own, K]`, untracked. Collective.
    pub fn backward(&self, dy: &Tensor) -> Result<Tensor> {
        let inner = &self.0;
        let (m, k) = dy.dims2()?;
        if m != inner.rows.len() {
            return Err(Error::Shape {
                op: OP,
                what: format!("dy has {m} rows, this rank selected {}", inner.rows.len()),
            });
        }
        // The exchange runs inside the timed span: its time is the communicator's, not the
        // aggregation's.
        let c0 = inner.comm.time_spent();
        let timer = inner.clock.as_ref().and_then(DeviceGraph::backward_timer);
        let dy = dy.detach().contiguous()?;
        let padded = super::pad_rows(&dy, inner.block)?;
        let g = inner.comm.all_gather(&padded)?;
        drop(padded);
        let dx = match &inner.products {
            Some(p) => spmm_weighted(&p.bt, &g, &values_for(&p.bt_values, &g)?, Reduce::Sum)?,
            None => Tensor::zeros((inner.n_own, k), dy.dtype(), dy.device())?,
        };
        drop(timer);
        if let Some(clock) = &inner.clock {
            clock.deduct_backward_time(inner.comm.time_spent().saturating_sub(c0));
        }
        Ok(dx)
    }
}

/// The edge values as the SpMM takes them for `x`: f32 for f32 and half-precision rows, the
/// rows' dtype otherwise.
fn values_for(v: &Tensor, x: &Tensor) -> Result<Tensor> {
    Ok(match x.dtype() {
        DType::F32 | DType::BF16 | DType::F16 => v.clone(),
        other => v.to_dtype(other)?,
    })
}

/// Errors where the arguments of [`SelectedAggregation::new`] do not fit together.
fn check(
    local: &LocalGraph,
    values: &[f32],
    part: &RowPartition,
    selected: &[Vec<u32>],
    rank: usize,
    world: usize,
) -> Result<()> {
    let bad = |what: String| Err(Error::InvalidArgument { op: OP, what });
    if local.rank != rank || part.parts() != world || selected.len() != world {
        return bad(format!(
            "rank {rank} of {world} with the local graph of rank {}, a partition into {} and \
             selections of {} ranks",
            local.rank,
            part.parts(),
            selected.len()
        ));
    }
    if part.range(rank) != local.rows {
        return bad(format!(
            "rank {rank} owns {:?}, the partition says {:?}",
            local.rows,
            part.range(rank)
        ));
    }
    if values.len() != local.csr.nnz() {
        return bad(format!(
            "{} edge values for a local graph of {} entries",
            values.len(),
            local.csr.nnz()
        ));
    }
    if local.csr.n_cols() != local.rows.len() + local.halo.len()
        || local.recv_counts.len() != world
        || local.recv_counts.iter().sum::<usize>() != local.halo.len()
    {
        return bad(format!(
            "a local graph of {} columns for {} rows and {} halo rows in groups {:?}",
            local.csr.n_cols(),
            local.rows.len(),
            local.halo.len(),
            local.recv_counts
        ));
    }
    for (q, s) in selected.iter().enumerate() {
        if let Some(w) = s.windows(2).position(|w| w[0] >= w[1]) {
            return bad(format!(
                "rank {q}'s selected rows must be ascending and distinct: {} after {}",
                s[w + 1],
                s[w]
            ));
        }
        let len = part.range(q).len();
        if let Some(&r) = s.last().filter(|&&r| r as usize >= len) {
            return bad(format!("rank {q}'s selected row {r} of its {len} rows"));
        }
    }
    Ok(())
}

/// Which columns of `local`'s graph are selected nodes: a bit per column, and each selected
/// column with its position, sorted by column.
struct SelectedColumns {
    bits: Vec<u64>,
    at: Vec<(u32, u32)>,
}

impl SelectedColumns {
    /// The position of column `c`, if it is a selected node.
    fn position(&self, c: u32) -> Option<u32> {
        let c_us = c as usize;
        if self.bits[c_us / 64] >> (c_us % 64) & 1 == 0 {
            return None;
        }
        self.at
            .binary_search_by_key(&c, |&(col, _)| col)
            .ok()
            .map(|i| self.at[i].1)
    }
}

/// The selected columns of `local` (own columns first, then each owner's halo group).
fn selected_columns(
    local: &LocalGraph,
    part: &RowPartition,
    selected: &[Vec<u32>],
    block: usize,
) -> Result<SelectedColumns> {
    let (rank, n_own) = (local.rank, local.rows.len());
    let position = |q: usize, k: usize| -> Result<u32> {
        u32::try_from(q * block + k).map_err(|_| Error::InvalidArgument {
            op: OP,
            what: format!("{} positions exceed 32-bit ids", selected.len() * block),
        })
    };
    let mut at = Vec::new();
    for (k, &s) in selected[rank].iter().enumerate() {
        at.push((s, position(rank, k)?));
    }
    let mut group = n_own;
    for (q, &count) in local.recv_counts.iter().enumerate() {
        let halo = &local.halo[group - n_own..group - n_own + count];
        if q != rank {
            let start = part.range(q).start;
            for (k, &s) in selected[q].iter().enumerate() {
                if let Ok(h) = halo.binary_search(&((start + s as usize) as u32)) {
                    at.push(((group + h) as u32, position(q, k)?));
                }
            }
        }
        group += count;
    }
    at.sort_unstable_by_key(|&(c, _)| c);
    let mut bits = vec![0u64; local.csr.n_cols().div_ceil(64)];
    for &(c, _) in &at {
        bits[c as usize / 64] |= 1 << (c % 64);
    }
    Ok(SelectedColumns { bits, at })
}

/// `Bt` (`[n_own, positions]`) and its values: `local`'s entries whose column is selected,
/// by local row, the columns renumbered to positions (ascending within a row). `None` when
/// there is no such entry.
///
/// One pass over every local entry (833 M per rank of the papers100M-sized graph on 4 ranks),
/// in row blocks side by side: serially it took 17-20 s of each rank's set-up.
fn transpose_pair(
    local: &LocalGraph,
    values: &[f32],
    sel: &SelectedColumns,
    positions: usize,
) -> Result<Option<(Csr, Vec<f32>)>> {
    /// Rows per task: a few thousand tasks at papers size. The unit tests' graphs (40-97
    /// rows) run in blocks of 7, so that joining blocks, empty rows at their edges included,
    /// is what they check against the references.
    const ROWS_PER_TASK: usize = if cfg!(test) { 7 } else { 1 << 13 };
    if sel.at.is_empty() {
        return Ok(None);
    }
    let csr = &local.csr;
    // Each block: its rows' lengths, then their (position, value) entries in row order.
    let blocks: Vec<(Vec<u32>, Vec<u32>, Vec<f32>)> = (0..csr.n_rows().div_ceil(ROWS_PER_TASK))
        .into_par_iter()
        .map(|b| {
            let rows = b * ROWS_PER_TASK..((b + 1) * ROWS_PER_TASK).min(csr.n_rows());
            let (mut lens, mut cols, mut vals) =
                (Vec::with_capacity(rows.len()), Vec::new(), Vec::new());
            let mut row: Vec<(u32, f32)> = Vec::new();
            for i in rows {
                row.clear();
                let r = csr.row_range(i);
                for (&c, &v) in csr.indices()[r.clone()].iter().zip(&values[r]) {
                    if let Some(p) = sel.position(c) {
                        row.push((p, v));
                    }
                }
                row.sort_unstable_by_key(|&(p, _)| p);
                cols.extend(row.iter().map(|&(p, _)| p));
                vals.extend(row.iter().map(|&(_, v)| v));
                lens.push(row.len() as u32);
            }
            (lens, cols, vals)
        })
        .collect();
    let total: usize = blocks.iter().map(|(_, c, _)| c.len()).sum();
    if total == 0 {
        return Ok(None);
    }
    if u32::try_from(total).is_err() {
        return Err(Error::InvalidArgument {
            op: OP,
            what: format!("{total} entries reach selected nodes, more than 2^32 - 1"),
        });
    }
    let mut indptr = Vec::with_capacity(csr.n_rows() + 1);
    indptr.push(0u32);
    let (mut cols, mut vals) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let mut end = 0u32;
    for (lens, c, v) in blocks {
        for len in lens {
            end += len;
            indptr.push(end);
        }
        cols.extend(c);
        vals.extend(v);
    }
    let bt = Csr::new_checked(csr.n_rows(), positions, indptr, cols)?;
    Ok(Some((bt, vals)))
}

/// `B = Btᵀ` and its values (`[positions, n_own]`, local rows ascending within a row).
fn by_position(bt: &Csr, values: &[f32]) -> Result<(Csr, Vec<f32>)> {
    let (n_own, positions) = (bt.n_rows(), bt.n_cols());
    let mut counts = vec![0u32; positions + 1];
    for &p in bt.indices() {
        counts[p as usize + 1] += 1;
    }
    for p in 0..positions {
        counts[p + 1] += counts[p];
    }
    let indptr = counts.clone();
    let mut fill = counts;
    let mut cols = vec![0u32; bt.nnz()];
    let mut vals = vec![0f32; bt.nnz()];
    for i in 0..n_own {
        let r = bt.row_range(i);
        for (&p, &v) in bt.indices()[r.clone()].iter().zip(&values[r]) {
            let at = fill[p as usize] as usize;
            cols[at] = i as u32;
            vals[at] = v;
            fill[p as usize] += 1;
        }
    }
    Ok((Csr::new_checked(positions, n_own, indptr, cols)?, vals))
}
