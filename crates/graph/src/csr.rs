//! Compressed sparse row structure (symbolic: no values).
//!
//! ```text
//!  row i's neighbours are indices[indptr[i] .. indptr[i+1]]
//!
//!  indptr : [0, 2, 2, 5]            (n_rows + 1 entries, non-decreasing)
//!  indices: [3, 7 | | 0, 1, 9]      (nnz entries, each < n_cols)
//! ```
//!
//! For graphs the convention is the one PyG calls `adj_t`: **row = target node, column = source
//! node**, so aggregation reads `out[i] = reduce_{j in row i} x[j]`. Edge values (normalisation
//! weights) live apart from the structure in a `Vec<f32>` aligned with `indices`.
//!
//! Column indices are `u32` (node ids below `u32::MAX`). Row offsets ([`RowPtr`]) are `u32`
//! while every offset fits (`nnz <= u32::MAX`, about 4.29 G non-zeros) and `u64` beyond: a
//! graph pays for 64-bit offsets only when it needs them. Builders pick the narrowest width
//! ([`OffsetWidth::for_nnz`]); [`Csr::with_offset_width`] forces one. The kernels take 32-bit
//! offsets: [`Csr::kernel_indptr`] narrows at that boundary, and refuses a graph above
//! [`MAX_KERNEL_NNZ`] with [`Error::TooManyNonZeros`] naming it (in a multi-device run, each
//! rank's share is what must fit).

use crate::coo::{running_sums, split_sizes_mut};
use crate::error::{Error, Result};
use rayon::prelude::*;
use serde::Serialize;
use std::borrow::Cow;
use std::ops::Range;

/// Most non-zeros of a graph handed to the kernels (one device's graph, or one rank's share):
/// their row offsets and edge positions are `u32`, and a position plus one step of a kernel
/// (a warp's 32 edges, a 1,024-edge row group, a 512-edge HP group) must not wrap, hence
/// `2^20` below `u32::MAX`.
pub const MAX_KERNEL_NNZ: usize = u32::MAX as usize - (1 << 20);

/// Width of a [`Csr`]'s row offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OffsetWidth {
    /// `u32` offsets: up to `u32::MAX` non-zeros.
    #[default]
    U32,
    /// `u64` offsets.
    U64,
}

impl OffsetWidth {
    /// The narrowest width that holds offsets up to `nnz`.
    pub const fn for_nnz(nnz: usize) -> Self {
        if nnz as u64 <= u32::MAX as u64 {
            Self::U32
        } else {
            Self::U64
        }
    }

    /// Bytes per offset.
    pub const fn bytes(self) -> usize {
        match self {
            Self::U32 => 4,
            Self::U64 => 8,
        }
    }
}

impl std::fmt::Display for OffsetWidth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::U32 => "u32",
            Self::U64 => "u64",
        })
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// An integer type row offsets are stored as (`u32` or `u64`): what generic code over a
/// [`RowPtr`]'s slice is written against, monomorphised per width.
pub trait Offset: sealed::Sealed + Copy + Ord + Default + Send + Sync + std::fmt::Debug {
    /// The width this type stores.
    const WIDTH: OffsetWidth;
    /// The largest offset it holds.
    const MAX: u64;
    /// `v` as an offset. The caller picked the width for the largest offset (`v <= MAX`).
    fn from_usize(v: usize) -> Self;
    /// The offset as an index.
    fn to_usize(self) -> usize;
    /// The owned row pointer of these offsets.
    fn into_row_ptr(v: Vec<Self>) -> RowPtr;
}

impl Offset for u32 {
    const WIDTH: OffsetWidth = OffsetWidth::U32;
    const MAX: u64 = u32::MAX as u64;
    #[inline(always)]
    fn from_usize(v: usize) -> Self {
        debug_assert!(
            v as u64 <= <Self as Offset>::MAX,
            "offset {v} does not fit u32"
        );
        v as u32
    }
    #[inline(always)]
    fn to_usize(self) -> usize {
        self as usize
    }
    fn into_row_ptr(v: Vec<Self>) -> RowPtr {
        RowPtr::U32(v)
    }
}

impl Offset for u64 {
    const WIDTH: OffsetWidth = OffsetWidth::U64;
    const MAX: u64 = u64::MAX;
    #[inline(always)]
    fn from_usize(v: usize) -> Self {
        v as u64
    }
    #[inline(always)]
    fn to_usize(self) -> usize {
        self as usize
    }
    fn into_row_ptr(v: Vec<Self>) -> RowPtr {
        RowPtr::U64(v)
    }
}

/// Row offsets (`indptr`) at the width the entries need: `u32` up to `u32::MAX` non-zeros,
/// `u64` beyond (half a GB more for papers100M's 111 M rows, next to its 13.4 GB of column
/// indices; nothing more for any graph that fits 32 bits).
///
/// Equality compares offsets, not widths: the same offsets stored at either width are equal.
#[derive(Debug, Clone)]
pub enum RowPtr {
    /// 32-bit offsets.
    U32(Vec<u32>),
    /// 64-bit offsets.
    U64(Vec<u64>),
}

impl PartialEq for RowPtr {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::U32(a), Self::U32(b)) => a == b,
            (Self::U64(a), Self::U64(b)) => a == b,
            (Self::U32(a), Self::U64(b)) | (Self::U64(b), Self::U32(a)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| x as u64 == y)
            }
        }
    }
}

impl Eq for RowPtr {}

impl From<Vec<u32>> for RowPtr {
    fn from(v: Vec<u32>) -> Self {
        Self::U32(v)
    }
}

impl From<Vec<u64>> for RowPtr {
    fn from(v: Vec<u64>) -> Self {
        Self::U64(v)
    }
}

impl Default for RowPtr {
    /// No offsets, 32-bit.
    fn default() -> Self {
        Self::U32(Vec::new())
    }
}

impl RowPtr {
    /// An empty row pointer of `width` with room for `capacity` offsets (push them with
    /// [`Self::push`]).
    pub fn with_capacity(width: OffsetWidth, capacity: usize) -> Self {
        match width {
            OffsetWidth::U32 => Self::U32(Vec::with_capacity(capacity)),
            OffsetWidth::U64 => Self::U64(Vec::with_capacity(capacity)),
        }
    }

    /// Appends an offset, widening the whole pointer to `u64` the first time one exceeds
    /// `u32::MAX` (so a builder that cannot know its total up front starts narrow).
    #[inline]
    pub fn push(&mut self, offset: usize) {
        match self {
            Self::U32(v) => match u32::try_from(offset) {
                Ok(o) => v.push(o),
                Err(_) => {
                    let mut wide: Vec<u64> = Vec::with_capacity(v.capacity().max(v.len() + 1));
                    wide.extend(v.iter().map(|&o| o as u64));
                    wide.push(offset as u64);
                    *self = Self::U64(wide);
                }
            },
            Self::U64(v) => v.push(offset as u64),
        }
    }

    /// The offsets of rows of the given lengths (`0`, then running sums), at the narrowest
    /// width for their sum.
    pub fn from_lens(lens: impl IntoIterator<Item = usize>) -> Self {
        let lens = lens.into_iter();
        let mut p = Self::with_capacity(OffsetWidth::U32, lens.size_hint().0 + 1);
        p.push(0);
        let mut acc = 0usize;
        for l in lens {
            acc += l;
            p.push(acc);
        }
        p
    }

    /// Number of offsets (`n_rows + 1` in a [`Csr`]).
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Self::U32(v) => v.len(),
            Self::U64(v) => v.len(),
        }
    }

    /// True when there is no offset.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The width the offsets are stored at.
    pub fn width(&self) -> OffsetWidth {
        match self {
            Self::U32(_) => OffsetWidth::U32,
            Self::U64(_) => OffsetWidth::U64,
        }
    }

    /// Offset `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> usize {
        match self {
            Self::U32(v) => v[i] as usize,
            Self::U64(v) => v[i] as usize,
        }
    }

    /// `get(i)..get(i + 1)`: the positions of row `i`.
    #[inline(always)]
    pub fn range(&self, i: usize) -> Range<usize> {
        match self {
            Self::U32(v) => v[i] as usize..v[i + 1] as usize,
            Self::U64(v) => v[i] as usize..v[i + 1] as usize,
        }
    }

    /// The last offset (a [`Csr`]'s `nnz`), 0 when empty.
    pub fn last(&self) -> usize {
        match self {
            Self::U32(v) => v.last().map_or(0, |&o| o as usize),
            Self::U64(v) => v.last().map_or(0, |&o| o as usize),
        }
    }

    /// The offsets when stored as `u32`.
    pub fn as_u32(&self) -> Option<&[u32]> {
        match self {
            Self::U32(v) => Some(v),
            Self::U64(_) => None,
        }
    }

    /// The offsets when stored as `u64`.
    pub fn as_u64(&self) -> Option<&[u64]> {
        match self {
            Self::U64(v) => Some(v),
            Self::U32(_) => None,
        }
    }

    /// The offsets as `u32`: borrowed when stored so, narrowed (a copy) when stored as `u64`
    /// and the last fits; `None` when it does not.
    pub fn to_u32(&self) -> Option<Cow<'_, [u32]>> {
        match self {
            Self::U32(v) => Some(Cow::Borrowed(v)),
            Self::U64(v) if self.last() as u64 <= u32::MAX as u64 => {
                Some(Cow::Owned(v.par_iter().map(|&o| o as u32).collect()))
            }
            Self::U64(_) => None,
        }
    }

    /// The offsets as `u64`: borrowed when stored so, widened (a copy) otherwise.
    pub fn to_u64(&self) -> Cow<'_, [u64]> {
        match self {
            Self::U64(v) => Cow::Borrowed(v),
            Self::U32(v) => Cow::Owned(v.par_iter().map(|&o| o as u64).collect()),
        }
    }

    /// The same offsets at `width`; `None` when `width` is `U32` and the last offset exceeds
    /// `u32::MAX`.
    pub fn to_width(&self, width: OffsetWidth) -> Option<RowPtr> {
        match width {
            OffsetWidth::U32 => self.to_u32().map(|v| RowPtr::U32(v.into_owned())),
            OffsetWidth::U64 => Some(RowPtr::U64(self.to_u64().into_owned())),
        }
    }

    /// The same offsets at the narrowest width that holds them.
    pub fn into_narrowest(self) -> RowPtr {
        match self {
            Self::U64(_) if OffsetWidth::for_nnz(self.last()) == OffsetWidth::U32 => {
                self.to_width(OffsetWidth::U32).unwrap_or(self)
            }
            p => p,
        }
    }

    /// Row lengths (`get(i + 1) - get(i)`).
    pub fn lens(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        (0..self.len().saturating_sub(1)).map(move |i| self.range(i).len())
    }

    /// The first `i` for which `pred(get(i))` is false, `pred` being true then false along the
    /// (non-decreasing) offsets, as [`slice::partition_point`].
    pub fn partition_point(&self, mut pred: impl FnMut(usize) -> bool) -> usize {
        match self {
            Self::U32(v) => v.partition_point(|&o| pred(o as usize)),
            Self::U64(v) => v.partition_point(|&o| pred(o as usize)),
        }
    }

    /// Bytes the offsets take.
    pub fn bytes(&self) -> usize {
        self.len() * self.width().bytes()
    }
}

/// A validated CSR sparsity pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    n_rows: usize,
    n_cols: usize,
    indptr: RowPtr,
    indices: Vec<u32>,
}

/// The checks of [`Csr::from_row_ptr`] on offsets of one width.
fn check_offsets<O: Offset>(p: &[O], n_rows: usize, nnz: usize) -> Result<()> {
    if p.len() != n_rows + 1 {
        return Err(Error::InvalidStructure(format!(
            "indptr has {} entries, expected n_rows + 1 = {}",
            p.len(),
            n_rows + 1
        )));
    }
    if p[0].to_usize() != 0 {
        return Err(Error::InvalidStructure(format!(
            "indptr[0] = {:?}, expected 0",
            p[0]
        )));
    }
    if let Some(i) = p.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::InvalidStructure(format!(
            "indptr decreases at row {i}: {:?} > {:?}",
            p[i],
            p[i + 1]
        )));
    }
    if p[n_rows].to_usize() != nnz {
        return Err(Error::InvalidStructure(format!(
            "indptr[n_rows] = {:?} but there are {nnz} indices",
            p[n_rows]
        )));
    }
    if O::WIDTH != OffsetWidth::U32 {
        // Row lengths are u32 (degrees); only rows of repeated entries could exceed it.
        let long = |w: &[O]| w[1].to_usize() - w[0].to_usize() > u32::MAX as usize;
        if let Some(i) = p.windows(2).position(long) {
            return Err(Error::InvalidStructure(format!(
                "row {i} holds {} entries, more than a row's 32-bit length counts",
                p[i + 1].to_usize() - p[i].to_usize()
            )));
        }
    }
    Ok(())
}

impl Csr {
    /// The `n_keys x keys.len()` grouping of positions by key (a counting sort): row `k`
    /// lists, ascending, the positions `q` with `keys[q] == k`. An error when a key is
    /// `>= n_keys` or the sizes exceed the 32-bit index range.
    pub fn group_by_key(n_keys: usize, keys: &[u32]) -> Result<Self> {
        if keys.len() >= u32::MAX as usize {
            return Err(Error::InvalidStructure(format!(
                "{} keys: their positions exceed the 32-bit index range",
                keys.len()
            )));
        }
        if let Some(q) = keys.iter().position(|&k| k as usize >= n_keys) {
            return Err(Error::InvalidStructure(format!(
                "key {} at position {q} is outside 0..{n_keys}",
                keys[q]
            )));
        }
        let mut indptr = vec![0u32; n_keys + 1];
        for &k in keys {
            indptr[k as usize + 1] += 1;
        }
        for k in 0..n_keys {
            indptr[k + 1] += indptr[k];
        }
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; keys.len()];
        for (q, &k) in keys.iter().enumerate() {
            indices[fill[k as usize] as usize] = q as u32;
            fill[k as usize] += 1;
        }
        Self::new_checked(n_keys, keys.len(), indptr, indices)
    }

    /// Builds a CSR with 32-bit offsets after checking every invariant of
    /// [`Csr::from_row_ptr`].
    pub fn new_checked(
        n_rows: usize,
        n_cols: usize,
        indptr: Vec<u32>,
        indices: Vec<u32>,
    ) -> Result<Self> {
        Self::from_row_ptr(n_rows, n_cols, RowPtr::U32(indptr), indices)
    }

    /// Builds a CSR with offsets of either width after checking every invariant:
    /// `indptr.len() == n_rows + 1`, `indptr[0] == 0`, non-decreasing, `indptr[n_rows] ==
    /// indices.len()`, every index `< n_cols`, `n_rows, n_cols < u32::MAX`, and no row longer
    /// than `u32::MAX` entries. The width is kept as given (a small graph may hold `u64`
    /// offsets: what tests of the 64-bit path build).
    pub fn from_row_ptr(
        n_rows: usize,
        n_cols: usize,
        indptr: RowPtr,
        indices: Vec<u32>,
    ) -> Result<Self> {
        if n_rows >= u32::MAX as usize || n_cols >= u32::MAX as usize {
            return Err(Error::InvalidStructure(format!(
                "shape {n_rows}x{n_cols} exceeds the 32-bit index range"
            )));
        }
        match &indptr {
            RowPtr::U32(p) => check_offsets(p, n_rows, indices.len())?,
            RowPtr::U64(p) => check_offsets(p, n_rows, indices.len())?,
        }
        if let Some(p) = indices.par_iter().position_any(|&c| c as usize >= n_cols) {
            return Err(Error::InvalidStructure(format!(
                "column index {} at position {p} is out of range (n_cols = {n_cols})",
                indices[p]
            )));
        }
        Ok(Self {
            n_rows,
            n_cols,
            indptr,
            indices,
        })
    }

    /// Builds a CSR without checks. The caller guarantees the invariants of
    /// [`Csr::from_row_ptr`]; kernels index with these arrays, so a broken invariant is a
    /// memory-safety bug on the GPU, hence `unsafe`.
    ///
    /// # Safety
    /// The invariants listed in [`Csr::from_row_ptr`] must hold.
    pub unsafe fn new_unchecked(
        n_rows: usize,
        n_cols: usize,
        indptr: RowPtr,
        indices: Vec<u32>,
    ) -> Self {
        debug_assert_eq!(indptr.len(), n_rows + 1);
        debug_assert_eq!(indptr.last(), indices.len());
        Self {
            n_rows,
            n_cols,
            indptr,
            indices,
        }
    }

    /// An `n_rows x n_cols` pattern with no non-zeros (the shape must fit in `u32`, as for
    /// [`Csr::new_checked`]).
    pub fn empty(n_rows: usize, n_cols: usize) -> Result<Self> {
        Self::new_checked(
            n_rows,
            n_cols,
            vec![0; n_rows.min(u32::MAX as usize) + 1],
            Vec::new(),
        )
    }

    /// Number of rows (target nodes).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of columns (source nodes).
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    /// Number of stored entries (directed edges).
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Row pointers, `n_rows + 1` entries, at the width they are stored.
    pub fn indptr(&self) -> &RowPtr {
        &self.indptr
    }
    /// The width the row pointers are stored at.
    pub fn offset_width(&self) -> OffsetWidth {
        self.indptr.width()
    }
    /// The same pattern with its offsets stored at `width` (no copy when they already are).
    /// An error when `width` is `U32` and the entries do not fit it.
    pub fn with_offset_width(self, width: OffsetWidth) -> Result<Self> {
        if self.offset_width() == width {
            return Ok(self);
        }
        let indptr = self.indptr.to_width(width).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} entries do not fit {width} row offsets",
                self.nnz()
            ))
        })?;
        Ok(Self { indptr, ..self })
    }
    /// The row pointers as the kernels take them: `u32` (borrowed, or narrowed from `u64`).
    /// Fails with [`Error::TooManyNonZeros`], naming `graph` (`"the graph"`, `"rank 2's
    /// share"`), when the pattern holds more than [`MAX_KERNEL_NNZ`] entries.
    pub fn kernel_indptr(&self, graph: &str) -> Result<Cow<'_, [u32]>> {
        check_kernel_nnz(graph, self.nnz())?;
        self.indptr
            .to_u32()
            .ok_or_else(|| Error::too_many_non_zeros(graph, self.nnz()))
    }
    /// Column indices, `nnz` entries.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// Column indices of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> &[u32] {
        &self.indices[self.indptr.range(i)]
    }
    /// Position range of row `i` in `indices` (and in any aligned value array).
    #[inline]
    pub fn row_range(&self, i: usize) -> Range<usize> {
        self.indptr.range(i)
    }
    /// Number of entries of row `i`.
    #[inline]
    pub fn row_len(&self, i: usize) -> usize {
        self.indptr.range(i).len()
    }
    /// Per-row entry counts (in-degrees of targets).
    pub fn row_degrees(&self) -> Vec<u32> {
        // Row lengths fit u32 (an invariant).
        match &self.indptr {
            RowPtr::U32(p) => p.par_windows(2).map(|w| w[1] - w[0]).collect(),
            RowPtr::U64(p) => p.par_windows(2).map(|w| (w[1] - w[0]) as u32).collect(),
        }
    }

    /// `1 / row length` per row (0 for an empty row): the scale of a mean aggregation.
    pub fn inverse_row_degrees(&self) -> Vec<f32> {
        self.row_degrees()
            .into_par_iter()
            .map(|d| match d {
                0 => 0.0,
                d => 1.0 / d as f32,
            })
            .collect()
    }
    /// Consumes the CSR, returning `(indptr, indices)`.
    pub fn into_parts(self) -> (RowPtr, Vec<u32>) {
        (self.indptr, self.indices)
    }

    /// True when every row's column indices are strictly increasing (sorted, no duplicates).
    pub fn is_sorted_unique(&self) -> bool {
        (0..self.n_rows)
            .into_par_iter()
            .all(|i| self.row(i).windows(2).all(|w| w[0] < w[1]))
    }

    /// True when the pattern is square and `(i, j)` present implies `(j, i)` present.
    pub fn is_symmetric(&self) -> bool {
        if self.n_rows != self.n_cols {
            return false;
        }
        if self.is_sorted_unique() {
            // No copies: every (i, j) above the diagonal looks up (j, i) in row j (sorted),
            // and the entries below it are counted. Unique entries make presence both ways
            // the same as equal multisets; mirroring maps the entries above the diagonal one
            // to one into those below, onto them when they are as many: half the lookups of
            // checking every entry.
            let (blocks, _) = row_blocks(self);
            let counts = blocks.into_par_iter().try_fold(
                || (0usize, 0usize),
                |(above, below), rows| {
                    let (mut a, mut b) = (above, below);
                    let mut mirrors = Vec::new();
                    for i in rows {
                        let row = self.row(i);
                        let lower = row.partition_point(|&j| (j as usize) < i);
                        b += lower;
                        let upper = &row[lower..];
                        let upper = &upper[usize::from(upper.first() == Some(&(i as u32)))..];
                        mirrors.extend(upper.iter().map(|&j| (j, i as u32)));
                        a += upper.len();
                    }
                    self.rows_hold(&mirrors).then_some((a, b))
                },
            );
            return counts
                .try_reduce(|| (0, 0), |x, y| Some((x.0 + y.0, x.1 + y.1)))
                .is_some_and(|(above, below)| above == below);
        }
        // A transpose that cannot be built has a column longer than any row: not symmetric.
        let Ok(mut b) = self.transpose_pattern() else {
            return false;
        };
        let mut a = self.clone();
        a.sort_rows();
        b.sort_rows();
        a == b
    }

    /// Whether row `r` holds `v` for every `(r, v)` of `pairs` (rows sorted): binary searches
    /// run in lockstep, [`LOOKUP_LANES`] at a time, so that their cache misses (a random row
    /// each, on a graph far larger than the caches) overlap instead of following one another.
    fn rows_hold(&self, pairs: &[(u32, u32)]) -> bool {
        let idx = &self.indices[..];
        pairs.chunks(LOOKUP_LANES).all(|batch| {
            // Lane k searches `idx[base[k]..base[k] + size[k]]`, which holds its value if the
            // row does (lower bound by halving, without branches on the data).
            let mut base = [0usize; LOOKUP_LANES];
            let mut size = [0usize; LOOKUP_LANES];
            for (k, &(r, _)) in batch.iter().enumerate() {
                let range = self.row_range(r as usize);
                (base[k], size[k]) = (range.start, range.len());
            }
            loop {
                let mut more = false;
                for (k, &(_, v)) in batch.iter().enumerate() {
                    if size[k] > 1 {
                        let half = size[k] / 2;
                        let mid = base[k] + half;
                        base[k] = if idx[mid] <= v { mid } else { base[k] };
                        size[k] -= half;
                        more = true;
                    }
                }
                if !more {
                    break;
                }
            }
            batch
                .iter()
                .enumerate()
                .all(|(k, &(_, v))| size[k] == 1 && idx[base[k]] == v)
        })
    }

    /// Number of diagonal entries `(i, i)`.
    pub fn self_loop_count(&self) -> usize {
        (0..self.n_rows.min(self.n_cols))
            .into_par_iter()
            .map(|i| self.row(i).iter().filter(|&&c| c as usize == i).count())
            .sum()
    }

    /// Sorts the column indices of each row in place (duplicates kept).
    pub fn sort_rows(&mut self) {
        let indptr = &self.indptr;
        split_rows_mut(&mut self.indices, indptr)
            .into_par_iter()
            .for_each(|r| r.sort_unstable());
    }

    /// The head-expanded graph of multi-head attention: row `i * heads + h` holds the edges of
    /// row `i` with columns `j * heads + h`, so features laid out `[nodes, heads, F]` (that is
    /// `[nodes * heads, F]`) are aggregated, scored and softmax-normalised per head by the
    /// single-head operators. Edge `p` of row `i` becomes edge `heads * indptr[i] + h *
    /// deg(i) + (p - indptr[i])`. Fails when the expanded node ids do not fit `u32`.
    pub fn expand_heads(&self, heads: usize) -> Result<Csr> {
        let too_big = || {
            Error::InvalidArgument(format!(
                "{heads} heads of a graph with {} rows and {} edges exceed u32 indices",
                self.n_rows,
                self.nnz()
            ))
        };
        if heads == 0 {
            return Err(Error::InvalidArgument("heads must be at least 1".into()));
        }
        let n_rows = self.n_rows.checked_mul(heads).ok_or_else(too_big)?;
        let n_cols = self.n_cols.checked_mul(heads).ok_or_else(too_big)?;
        let nnz = self.nnz().checked_mul(heads).ok_or_else(too_big)?;
        if n_rows.max(n_cols) >= u32::MAX as usize {
            return Err(too_big());
        }
        let mut indptr = RowPtr::with_capacity(OffsetWidth::for_nnz(nnz), n_rows + 1);
        let mut indices = Vec::with_capacity(nnz);
        indptr.push(0);
        for i in 0..self.n_rows {
            let row = &self.indices[self.row_range(i)];
            for h in 0..heads as u32 {
                indices.extend(row.iter().map(|&j| j * heads as u32 + h));
                indptr.push(indices.len());
            }
        }
        Csr::from_row_ptr(n_rows, n_cols, indptr, indices)
    }

    /// The matrix cut into column blocks: block `b` holds, for every row, the entries whose
    /// column lies in `bounds[b]..bounds[b + 1]`, columns shifted to start at 0 (an
    /// `n_rows x (bounds[b + 1] - bounds[b])` CSR), in their order within the row, with their
    /// `values` when given (aligned with `self`'s entries). `bounds` must start at 0, end at
    /// `n_cols` and not decrease. The blocks' products summed are the whole product
    /// (`A x = Σ_b A_b x[bounds[b]..bounds[b + 1]]`), each reading a smaller slice of `x`: a
    /// partitioned aggregation runs its own rows' block before the other ranks' rows arrive.
    pub fn column_blocks(
        &self,
        bounds: &[usize],
        values: Option<&[f32]>,
    ) -> Result<Vec<(Csr, Option<Vec<f32>>)>> {
        if bounds.len() < 2
            || bounds[0] != 0
            || bounds[bounds.len() - 1] != self.n_cols
            || bounds.windows(2).any(|w| w[0] > w[1])
        {
            return Err(Error::InvalidArgument(format!(
                "column block bounds {bounds:?} of a matrix with {} columns: they must start \
                 at 0, end at the column count and not decrease",
                self.n_cols
            )));
        }
        if let Some(v) = values {
            if v.len() != self.nnz() {
                return Err(Error::InvalidArgument(format!(
                    "{} edge values for {} entries",
                    v.len(),
                    self.nnz()
                )));
            }
        }
        // In parallel over blocks of rows: each row's entries counted per column block, then
        // written into place (the same blocks as one pass per column block, row by row).
        let nb = bounds.len() - 1;
        let n = self.n_rows;
        // The block of column `c`: the last whose start is <= c (an empty block holds none).
        let block_of = |c: u32| bounds.partition_point(|&x| x <= c as usize) - 1;
        let (rows, _) = row_blocks(self);
        // 1. lens[b][r]: row r's entries in column block b.
        let mut lens = vec![vec![0u32; n]; nb];
        {
            let mut tasks: Vec<Vec<&mut [u32]>> = rows.iter().map(|_| Vec::new()).collect();
            for l in lens.iter_mut() {
                for (t, chunk) in tasks.iter_mut().zip(l.chunks_mut(ROW_BLOCK)) {
                    t.push(chunk);
                }
            }
            tasks
                .into_par_iter()
                .zip(rows.par_iter())
                .for_each(|(mut out, rows)| {
                    for (k, r) in rows.clone().enumerate() {
                        for &c in self.row(r) {
                            out[block_of(c)][k] += 1;
                        }
                    }
                });
        }
        // Each block's entries per row block, and where each row block starts in it.
        let sizes: Vec<Vec<usize>> = lens
            .par_iter()
            .map(|l| {
                l.chunks(ROW_BLOCK)
                    .map(|c| c.iter().map(|&k| k as usize).sum())
                    .collect()
            })
            .collect();
        let starts: Vec<Vec<usize>> = sizes
            .iter()
            .map(|s| {
                let mut acc = 0;
                s.iter()
                    .map(|&k| {
                        let at = acc;
                        acc += k;
                        at
                    })
                    .collect()
            })
            .collect();
        let totals: Vec<usize> = sizes.iter().map(|s| s.iter().sum()).collect();
        // 2. The entries (and values), row block by row block into place.
        let mut indices: Vec<Vec<u32>> = totals.iter().map(|&t| vec![0u32; t]).collect();
        let mut vals: Vec<Option<Vec<f32>>> = totals
            .iter()
            .map(|&t| values.map(|_| vec![0f32; t]))
            .collect();
        {
            type Out<'a> = (Vec<&'a mut [u32]>, Vec<Option<&'a mut [f32]>>);
            let mut tasks: Vec<Out<'_>> = rows.iter().map(|_| (Vec::new(), Vec::new())).collect();
            for ((idx, val), size) in indices.iter_mut().zip(vals.iter_mut()).zip(&sizes) {
                let mut v = val
                    .as_deref_mut()
                    .map(|v| split_sizes_mut(v, size).into_iter());
                for (t, chunk) in tasks.iter_mut().zip(split_sizes_mut(idx, size)) {
                    t.0.push(chunk);
                    t.1.push(v.as_mut().and_then(Iterator::next));
                }
            }
            tasks
                .into_par_iter()
                .zip(rows.par_iter())
                .for_each(|((mut idx, mut val), rows)| {
                    let mut fill = vec![0usize; nb];
                    for r in rows.clone() {
                        for p in self.row_range(r) {
                            let c = self.indices[p];
                            let b = block_of(c);
                            idx[b][fill[b]] = c - bounds[b] as u32;
                            if let (Some(out), Some(v)) = (val[b].as_deref_mut(), values) {
                                out[fill[b]] = v[p];
                            }
                            fill[b] += 1;
                        }
                    }
                });
        }
        // 3. Each block's offsets, at the narrowest width for its entries.
        let out = lens
            .into_par_iter()
            .zip(indices)
            .zip(vals)
            .enumerate()
            .map(|(b, ((lens, indices), vals))| {
                let indptr = match OffsetWidth::for_nnz(totals[b]) {
                    OffsetWidth::U32 => running_sums::<u32>(&lens, ROW_BLOCK, &starts[b]),
                    OffsetWidth::U64 => running_sums::<u64>(&lens, ROW_BLOCK, &starts[b]),
                };
                let csr = Csr {
                    n_rows: n,
                    n_cols: bounds[b + 1] - bounds[b],
                    indptr,
                    indices,
                };
                (csr, vals)
            })
            .collect();
        Ok(out)
    }

    /// The transpose (CSR of `A^T`, i.e. the CSC of `A`) and the permutation `perm` such that
    /// entry `p` of the transpose is entry `perm[p]` of `self`: transposed edge values are
    /// `values[perm[p]]`. Rows of the transpose come out sorted when `self`'s row order is the
    /// natural one (a counting sort, stable in source row).
    ///
    /// The permutation holds 32-bit edge positions (what the kernels take): an error above
    /// `u32::MAX` entries, where [`Self::transpose_pattern`] still works.
    ///
    /// Parallel over blocks of transposed rows with about equal non-zeros, one per rayon
    /// thread: each block scans the whole matrix and writes only its own contiguous slice of
    /// the output, so the result is the same as one sequential pass whatever the thread
    /// count. (Sequentially the scattered writes cost ~1 s per 40 M non-zeros, and the GPU
    /// trainer builds this transpose in its first backward.)
    pub fn transpose(&self) -> Result<(Csr, Vec<u32>)> {
        let nnz = self.nnz();
        if nnz as u64 > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "a transpose's edge permutation is 32-bit: {nnz} entries exceed it \
                 (transpose_pattern needs none)"
            )));
        }
        let mut perm = vec![0u32; nnz];
        let t = self.transpose_with::<u32>(Some(&mut perm))?;
        Ok((t, perm))
    }

    /// The transpose's pattern alone (no edge permutation), at any size, as
    /// [`Self::transpose`] builds it. An error only when a column holds more than `u32::MAX`
    /// entries (a transposed row longer than a row may be).
    pub fn transpose_pattern(&self) -> Result<Csr> {
        match OffsetWidth::for_nnz(self.nnz()) {
            OffsetWidth::U32 => self.transpose_with::<u32>(None),
            OffsetWidth::U64 => self.transpose_with::<u64>(None),
        }
    }

    /// [`Self::transpose`] with offsets of type `O` (wide enough for `nnz`), writing the edge
    /// permutation into `perm` when given (`nnz` entries).
    fn transpose_with<O: Offset>(&self, perm: Option<&mut [u32]>) -> Result<Csr> {
        let nnz = self.nnz();
        let mut indptr = vec![O::default(); self.n_cols + 1];
        for &c in &self.indices {
            let e = &mut indptr[c as usize + 1];
            *e = O::from_usize(e.to_usize() + 1);
        }
        if O::WIDTH != OffsetWidth::U32 {
            if let Some(c) = indptr
                .iter()
                .position(|&l| l.to_usize() > u32::MAX as usize)
            {
                return Err(Error::InvalidStructure(format!(
                    "column {} holds {:?} entries, more than a row's 32-bit length counts",
                    c - 1,
                    indptr[c]
                )));
            }
        }
        for i in 0..self.n_cols {
            indptr[i + 1] = O::from_usize(indptr[i + 1].to_usize() + indptr[i].to_usize());
        }
        let at = |c: usize| indptr[c].to_usize();
        let mut indices = vec![0u32; nnz];
        let threads = if nnz < 1 << 16 {
            1
        } else {
            rayon::current_num_threads().max(1)
        };
        // Column blocks [c0, c1) of about nnz / threads entries each, and their output slices.
        let mut jobs = Vec::with_capacity(threads);
        let (mut out_i, mut out_p) = (&mut indices[..], perm);
        let target = nnz.div_ceil(threads).max(1);
        let mut c0 = 0;
        while c0 < self.n_cols {
            let mut c1 = c0 + 1;
            while c1 < self.n_cols && at(c1) - at(c0) < target {
                c1 += 1;
            }
            let len = at(c1) - at(c0);
            let (bi, ri) = std::mem::take(&mut out_i).split_at_mut(len);
            let (bp, rp) = match out_p.take() {
                Some(p) => {
                    let (b, r) = p.split_at_mut(len);
                    (Some(b), Some(r))
                }
                None => (None, None),
            };
            (out_i, out_p) = (ri, rp);
            jobs.push((c0, c1, bi, bp));
            c0 = c1;
        }
        jobs.into_par_iter().for_each(|(c0, c1, bi, mut bp)| {
            let base = at(c0);
            let mut next: Vec<O> = indptr[c0..c1]
                .iter()
                .map(|&v| O::from_usize(v.to_usize() - base))
                .collect();
            for r in 0..self.n_rows {
                for p in self.row_range(r) {
                    let c = self.indices[p] as usize;
                    if (c0..c1).contains(&c) {
                        let q = next[c - c0].to_usize();
                        next[c - c0] = O::from_usize(q + 1);
                        bi[q] = r as u32;
                        if let Some(bp) = bp.as_deref_mut() {
                            bp[q] = p as u32;
                        }
                    }
                }
            }
        });
        Ok(Csr {
            n_rows: self.n_cols,
            n_cols: self.n_rows,
            indptr: O::into_row_ptr(indptr),
            indices,
        })
    }

    /// Degree statistics of the rows.
    pub fn degree_stats(&self) -> DegreeStats {
        DegreeStats::from_degrees(&self.row_degrees())
    }

    /// Applies a node permutation to a square pattern: node `old` becomes `new_of_old[old]`.
    /// Rows are re-sorted; the offsets keep their width. Used by reordering, METIS
    /// renumbering and the synthetic generator's id shuffle.
    pub fn permute(&self, new_of_old: &[u32]) -> Result<Csr> {
        if self.n_rows != self.n_cols || new_of_old.len() != self.n_rows {
            return Err(Error::InvalidArgument(format!(
                "permute needs a square pattern and a permutation of its {} nodes (got {}x{}, {})",
                self.n_rows,
                self.n_rows,
                self.n_cols,
                new_of_old.len()
            )));
        }
        let n = self.n_rows;
        let mut old_of_new = vec![u32::MAX; n];
        for (old, &new) in new_of_old.iter().enumerate() {
            if new as usize >= n || old_of_new[new as usize] != u32::MAX {
                return Err(Error::InvalidArgument(format!(
                    "not a permutation: entry {old} maps to {new}"
                )));
            }
            old_of_new[new as usize] = old as u32;
        }
        let indptr = match &self.indptr {
            RowPtr::U32(_) => self.permuted_offsets::<u32>(&old_of_new),
            RowPtr::U64(_) => self.permuted_offsets::<u64>(&old_of_new),
        };
        let mut indices = vec![0u32; self.nnz()];
        split_rows_mut(&mut indices, &indptr)
            .into_par_iter()
            .enumerate()
            .for_each(|(new, out)| {
                let old = old_of_new[new] as usize;
                for (o, &c) in out.iter_mut().zip(self.row(old)) {
                    *o = new_of_old[c as usize];
                }
                out.sort_unstable();
            });
        Ok(Csr {
            n_rows: n,
            n_cols: n,
            indptr,
            indices,
        })
    }

    /// The rows `rows` of this pattern (any order, repeats allowed), every column kept: an
    /// `rows.len() x n_cols` pattern whose row `i` is row `rows[i]` here, its entries in
    /// their order. What an aggregation computed for some rows alone runs on (a training
    /// pass whose loss reads only the train nodes' outputs). The offsets keep their width,
    /// or widen to 64 bits where repeated rows hold more entries than 32-bit offsets count.
    pub fn select_rows(&self, rows: &[u32]) -> Result<Csr> {
        if let Some(i) = rows.iter().position(|&r| r as usize >= self.n_rows) {
            return Err(Error::InvalidArgument(format!(
                "row {} at position {i} is out of range (n_rows = {})",
                rows[i], self.n_rows
            )));
        }
        let total: usize = rows.iter().map(|&r| self.row_len(r as usize)).sum();
        let indptr = match &self.indptr {
            RowPtr::U32(_) if total <= u32::MAX as usize => self.permuted_offsets::<u32>(rows),
            _ => self.permuted_offsets::<u64>(rows),
        };
        let mut indices = vec![0u32; total];
        split_rows_mut(&mut indices, &indptr)
            .into_par_iter()
            .zip(rows.par_iter())
            .for_each(|(out, &r)| out.copy_from_slice(self.row(r as usize)));
        Self::from_row_ptr(rows.len(), self.n_cols, indptr, indices)
    }

    /// The offsets of the rows `old_of_new` in that order, as `O`.
    fn permuted_offsets<O: Offset>(&self, old_of_new: &[u32]) -> RowPtr {
        let mut indptr: Vec<O> = Vec::with_capacity(old_of_new.len() + 1);
        let mut acc = 0usize;
        indptr.push(O::from_usize(0));
        for &old in old_of_new {
            acc += self.row_len(old as usize);
            indptr.push(O::from_usize(acc));
        }
        O::into_row_ptr(indptr)
    }
}

/// Checks that a graph of `nnz` entries, called `graph` in the error (`"the graph"`, `"rank
/// 2's share"`), fits the kernels ([`MAX_KERNEL_NNZ`]); [`Error::TooManyNonZeros`] otherwise.
pub fn check_kernel_nnz(graph: &str, nnz: usize) -> Result<()> {
    if nnz > MAX_KERNEL_NNZ {
        return Err(Error::too_many_non_zeros(graph, nnz));
    }
    Ok(())
}

/// Splits `data` (an array aligned with a CSR's entries, e.g. edge values) into the disjoint
/// mutable row slices given by `indptr`, for row-parallel writes.
pub fn split_rows_mut<'a, T>(data: &'a mut [T], indptr: &RowPtr) -> Vec<&'a mut [T]> {
    fn split<'a, T, O: Offset>(mut data: &'a mut [T], indptr: &[O]) -> Vec<&'a mut [T]> {
        let mut rows = Vec::with_capacity(indptr.len().saturating_sub(1));
        for w in indptr.windows(2) {
            let (head, tail) =
                std::mem::take(&mut data).split_at_mut(w[1].to_usize() - w[0].to_usize());
            rows.push(head);
            data = tail;
        }
        rows
    }
    match indptr {
        RowPtr::U32(p) => split(data, p),
        RowPtr::U64(p) => split(data, p),
    }
}

/// Binary searches [`Csr::is_symmetric`] runs at once.
const LOOKUP_LANES: usize = 16;

/// Rows per block of [`row_blocks`].
const ROW_BLOCK: usize = 1 << 12;

/// `csr`'s rows in consecutive blocks of [`ROW_BLOCK`] rows, with each block's entry count:
/// the tasks of a parallel pass over the rows that writes an output aligned with the entries
/// (cut with [`crate::coo::split_sizes_mut`]).
pub(crate) fn row_blocks(csr: &Csr) -> (Vec<Range<usize>>, Vec<usize>) {
    let (n, ptr) = (csr.n_rows(), csr.indptr());
    let blocks: Vec<Range<usize>> = (0..n.div_ceil(ROW_BLOCK))
        .map(|b| b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(n))
        .collect();
    let sizes = blocks
        .iter()
        .map(|r| ptr.get(r.end) - ptr.get(r.start))
        .collect();
    (blocks, sizes)
}

/// Summary of a degree sequence, as printed by loaders and the generator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegreeStats {
    /// Number of rows.
    pub count: usize,
    /// Rows with no entry.
    pub empty: usize,
    /// Smallest degree.
    pub min: u32,
    /// Largest degree.
    pub max: u32,
    /// Mean degree.
    pub mean: f64,
    /// Median degree.
    pub median: u32,
    /// 99th percentile.
    pub p99: u32,
    /// Standard deviation.
    pub std: f64,
    /// Rows come in descending degree order, as `--reorder degree` leaves them: no row is more
    /// than one entry longer than the row before it (so adding self loops after the order
    /// keeps it, and a near-uniform sequence counts too). Neighbouring rows then have about
    /// the same length, which kernels that give one warp several rows rely on. False for an
    /// empty sequence.
    pub descending: bool,
}

impl DegreeStats {
    /// Statistics of an arbitrary degree sequence.
    pub fn from_degrees(deg: &[u32]) -> Self {
        if deg.is_empty() {
            return Self {
                count: 0,
                empty: 0,
                min: 0,
                max: 0,
                mean: 0.0,
                median: 0,
                p99: 0,
                std: 0.0,
                descending: false,
            };
        }
        let mut sorted = deg.to_vec();
        sorted.par_sort_unstable();
        let n = deg.len() as f64;
        let mean = deg.iter().map(|&d| d as f64).sum::<f64>() / n;
        let var = deg.iter().map(|&d| (d as f64 - mean).powi(2)).sum::<f64>() / n;
        Self {
            count: deg.len(),
            empty: deg.iter().filter(|&&d| d == 0).count(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            median: sorted[sorted.len() / 2],
            p99: sorted[((sorted.len() - 1) as f64 * 0.99) as usize],
            std: var.sqrt(),
            descending: deg.windows(2).all(|w| w[1] <= w[0].saturating_add(1)),
        }
    }
}

impl std::fmt::Display for DegreeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "degree min {} / median {} / mean {:.1} / p99 {} / max {} (std {:.1}, {} empty rows)",
            self.min, self.median, self.mean, self.p99, self.max, self.std, self.empty
        )
    }
}

#[cfg(test)]
mod transpose_tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A rectangular matrix with empty rows and columns, a hub column and a hub row.
    fn awkward(rows: usize, cols: usize, nnz: usize, seed: u64) -> Csr {
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut per_row: Vec<Vec<u32>> = vec![Vec::new(); rows];
        for _ in 0..nnz {
            let i = r.random_range(0..rows / 2) * 2; // odd rows stay empty
            let j = if r.random_bool(0.2) {
                7 // a hub column
            } else {
                r.random_range(0..cols / 3) * 3 // two of three columns stay empty
            };
            per_row[i].push(j as u32);
        }
        per_row[0].extend((0..cols as u32).step_by(3)); // a hub row
        let mut indptr = vec![0u32];
        let mut indices = Vec::new();
        for mut row in per_row {
            row.sort_unstable();
            row.dedup();
            indices.extend(row);
            indptr.push(indices.len() as u32);
        }
        Csr::new_checked(rows, cols, indptr, indices).unwrap()
    }

    #[test]
    fn selected_rows_are_those_rows_at_either_offset_width() {
        let a = awkward(300, 500, 6_000, 9);
        // The hub row, empty (odd) rows, a repeat, and an order that is not ascending.
        let rows = [0u32, 1, 298, 4, 4, 299, 2];
        for width in [OffsetWidth::U32, OffsetWidth::U64] {
            let a = a.clone().with_offset_width(width).unwrap();
            let s = a.select_rows(&rows).unwrap();
            assert_eq!((s.n_rows(), s.n_cols(), s.offset_width()), (7, 500, width));
            for (i, &r) in rows.iter().enumerate() {
                assert_eq!(s.row(i), a.row(r as usize), "row {i} = row {r}");
            }
            assert!(s
                .select_rows(&[])
                .is_ok_and(|e| e.n_rows() == 0 && e.nnz() == 0));
        }
        let e = a.select_rows(&[3, 300]).unwrap_err().to_string();
        assert!(e.contains("row 300 at position 1 is out of range"), "{e}");
    }

    #[test]
    fn column_blocks_split_each_row_by_column_range() {
        let a = awkward(300, 500, 6_000, 5);
        let vals: Vec<f32> = (0..a.nnz()).map(|p| p as f32).collect();
        // Uneven blocks, an empty one, and one that holds the hub column 7 alone.
        let bounds = [0, 7, 8, 8, 250, 500];
        let blocks = a.column_blocks(&bounds, Some(&vals)).unwrap();
        assert_eq!(blocks.len(), 5);
        assert_eq!(blocks.iter().map(|(b, _)| b.nnz()).sum::<usize>(), a.nnz());
        assert_eq!(blocks[2].0.nnz(), 0);
        for r in 0..a.n_rows() {
            // Concatenating row r of every block, columns shifted back, gives row r.
            let mut got = Vec::new();
            for ((b, v), lo) in blocks.iter().zip(bounds) {
                assert_eq!((b.n_rows(), b.indptr().len()), (a.n_rows(), a.n_rows() + 1));
                let v = v.as_ref().unwrap();
                got.extend(b.row_range(r).map(|q| (b.indices()[q] + lo as u32, v[q])));
            }
            let want: Vec<_> = a.row_range(r).map(|p| (a.indices()[p], vals[p])).collect();
            assert_eq!(got, want, "row {r}");
        }
        for (b, w) in blocks.iter().zip(bounds.windows(2)) {
            assert_eq!(b.0.n_cols(), w[1] - w[0]);
            assert!(b.0.indices().iter().all(|&c| (c as usize) < b.0.n_cols()));
        }
        // One block is the matrix itself; no values, no values out.
        let whole = a.column_blocks(&[0, 500], None).unwrap();
        assert!(whole[0].0 == a && whole[0].1.is_none());
        for bad in [&[0, 400][..], &[1, 500], &[0, 300, 200, 500], &[0]] {
            let e = a.column_blocks(bad, None).unwrap_err().to_string();
            assert!(e.contains("500 columns"), "{bad:?}: {e}");
        }
        let e = a.column_blocks(&[0, 500], Some(&vals[1..])).unwrap_err();
        assert!(e.to_string().contains("edge values"), "{e}");
    }

    #[test]
    fn the_symmetry_check_is_the_definition() {
        // Every (i, j) has its (j, i): checked against the transposed pattern.
        let definition = |g: &Csr| {
            let (t, _) = g.transpose().unwrap();
            g.n_rows() == g.n_cols() && t == *g
        };
        let mut r = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(21);
        for n in [1usize, 2, 3, 10, 60, 9_000] {
            for trial in 0..12 {
                let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
                for _ in 0..4 * n {
                    let (i, j) = (r.random_range(0..n), r.random_range(0..n));
                    rows[i].push(j as u32);
                    rows[j].push(i as u32);
                }
                // Break it on some trials: drop one entry, or move one across the diagonal
                // (as many entries above as below, one without its mirror).
                let (i, j) = (r.random_range(0..n), r.random_range(0..n));
                match trial % 3 {
                    1 => rows[i].retain(|&c| c as usize != j),
                    2 if i != j => {
                        rows[i].retain(|&c| c as usize != j);
                        let k = r.random_range(0..n);
                        rows[k].push(i as u32);
                    }
                    _ => {}
                }
                let mut indptr = vec![0u32];
                let mut indices = Vec::new();
                for row in &mut rows {
                    row.sort_unstable();
                    row.dedup();
                    indices.extend(row.iter());
                    indptr.push(indices.len() as u32);
                }
                let g = Csr::new_checked(n, n, indptr, indices).unwrap();
                assert!(g.is_sorted_unique());
                assert_eq!(g.is_symmetric(), definition(&g), "n {n}, trial {trial}");
            }
        }
    }

    #[test]
    fn parallel_column_blocks_are_the_row_by_row_ones() {
        // The serial pass the parallel one replaced: one per block, row by row.
        fn reference(a: &Csr, bounds: &[usize], values: &[f32]) -> Vec<(Csr, Vec<f32>)> {
            bounds
                .windows(2)
                .map(|w| {
                    let (lo, hi) = (w[0] as u32, w[1] as u32);
                    let mut indptr = RowPtr::with_capacity(OffsetWidth::U32, a.n_rows() + 1);
                    indptr.push(0);
                    let (mut indices, mut vals) = (Vec::new(), Vec::new());
                    for r in 0..a.n_rows() {
                        for p in a.row_range(r) {
                            let c = a.indices()[p];
                            if (lo..hi).contains(&c) {
                                indices.push(c - lo);
                                vals.push(values[p]);
                            }
                        }
                        indptr.push(indices.len());
                    }
                    let csr = Csr::from_row_ptr(a.n_rows(), (hi - lo) as usize, indptr, indices);
                    (csr.unwrap(), vals)
                })
                .collect()
        }
        // Many row blocks, unsorted rows (a permuted transpose), 64-bit offsets in.
        let a = awkward(20_000, 9_000, 150_000, 8);
        let (t, _) = a.transpose().unwrap();
        let unsorted = {
            // Each row of the transpose reversed.
            let (ptr, mut idx) = t.into_parts();
            for r in 0..ptr.len() - 1 {
                idx[ptr.range(r)].reverse();
            }
            Csr::from_row_ptr(9_000, 20_000, ptr, idx).unwrap()
        };
        let wide = a.clone().with_offset_width(OffsetWidth::U64).unwrap();
        for g in [&a, &unsorted, &wide] {
            let vals: Vec<f32> = (0..g.nnz()).map(|p| p as f32 * 0.5).collect();
            let m = g.n_cols();
            for bounds in [
                vec![0, m],
                vec![0, 0, 7, 7, m / 2, m - 1, m, m],
                vec![0, m / 4, m / 2, 3 * m / 4, m],
            ] {
                let got = g.column_blocks(&bounds, Some(&vals)).unwrap();
                let want = reference(g, &bounds, &vals);
                assert_eq!(got.len(), want.len());
                for ((gc, gv), (wc, wv)) in got.iter().zip(&want) {
                    assert_eq!(gc, wc, "{bounds:?}");
                    assert_eq!(gc.offset_width(), wc.offset_width(), "{bounds:?}");
                    assert_eq!(gv.as_ref(), Some(wv), "{bounds:?}");
                }
                let bare = g.column_blocks(&bounds, None).unwrap();
                assert!(bare
                    .iter()
                    .zip(&got)
                    .all(|(b, g)| b.0 == g.0 && b.1.is_none()));
            }
        }
    }

    #[test]
    fn parallel_transpose_is_the_sequential_one_at_any_thread_count() {
        let a = awkward(3_000, 5_000, 200_000, 3);
        assert!(a.nnz() >= 1 << 16, "large enough to split: {}", a.nnz());
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| a.transpose().unwrap())
        };
        let (t1, p1) = run(1);
        // The sequential reference: entries of column j in source-row order.
        for j in 0..t1.n_rows() {
            let want: Vec<(u32, u32)> = (0..a.n_rows())
                .flat_map(|i| a.row_range(i).map(move |p| (i, p)))
                .filter(|&(_, p)| a.indices()[p] as usize == j)
                .map(|(i, p)| (i as u32, p as u32))
                .take(t1.row_len(j) + 1)
                .collect();
            let got: Vec<(u32, u32)> = t1.row_range(j).map(|q| (t1.indices()[q], p1[q])).collect();
            assert_eq!(got, want, "column {j}");
            if j > 40 {
                break; // the rest is covered by the thread-count comparison below
            }
        }
        for threads in [2, 3, 8, 64] {
            let (t, p) = run(threads);
            assert!(t == t1 && p == p1, "{threads} threads differ");
        }
        let (back, _) = t1.transpose().unwrap();
        assert_eq!(back, a);
    }
}
