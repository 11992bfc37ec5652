//! The output layer on a subset of the nodes.
//!
//! Full-batch training reads the logits of the labelled nodes only: the loss those of the
//! train split, the metrics those of the three splits. Where they are few (1.4 % of
//! ogbn-papers100M's nodes), computing the output layer's product and bias for every node
//! wastes its GEMM and holds `[N, classes]` tensors for nothing; at papers100M's size on 4
//! ranks (27.8 M rows a rank, 172 classes) that tensor has 4.78 G elements, past what
//! candle 0.11's element-wise CUDA kernels can index (see [`MAX_TENSOR_ELEMENTS`]).
//!
//! [`OutputRows`] names the rows; [`crate::Forward::with_output_rows`] asks a pass for them,
//! and a layer that aggregates before its product (GCN and GraphSAGE-mean where `out >= in`,
//! or given their aggregation) selects the aggregation's rows and runs its products on those
//! alone. Other layers run whole and their output's rows are selected. The selection is a
//! sparse product with an `[M, N]` 0/1 matrix of one entry per row ([`gnn_kernels::spmm`]),
//! so its backward is that matrix's transpose product: each selected row's gradient lands in
//! its row, the others' are zero.
//!
//! On a partitioned graph the rows may carry their own aggregation
//! ([`OutputRows::with_aggregation`], a [`SelectedAggregation`]): a GCN output layer that
//! aggregates first, fed by a hidden layer fused with that aggregation (the lean forms of
//! `conv::lean`), or a GraphSAGE-mean output layer that aggregates first (its mean as a sum
//! with `1/deg` values), then gets `(Â h)` of these rows alone, made from the rank's rows of `h`
//! with one reduce-scatter of the selected rows (and one all-gather of their gradient back),
//! instead of aggregating and exchanging every row and selecting afterwards.

use crate::error::{Error, Result};
use candle_core::{Device, Tensor};
use gnn_comm::SelectedAggregation;
use gnn_graph::Csr;
use gnn_kernels::{DeviceGraph, Reduce};

/// The most elements one tensor may hold where candle's CUDA kernels touch it:
/// `u32::MAX`. candle 0.11's element-wise, cast, fill and indexing kernels count elements
/// in 32-bit unsigned ints against a 64-bit total (huggingface/candle#3604): at `2^32`
/// elements or more their loops never end (seen on 2026-11-27: the bias add of a
/// `[27790361, 172]` bf16 tensor ran for minutes on four H100s until killed).
pub const MAX_TENSOR_ELEMENTS: u64 = u32::MAX as u64;

/// Rows of the output layer to compute: sorted, distinct node ids of a graph of `n` nodes.
#[derive(Clone)]
pub struct OutputRows {
    select: DeviceGraph,
    rows: usize,
    /// The aggregation of these rows alone, on a partitioned graph
    /// ([`Self::with_aggregation`]).
    aggregation: Option<SelectedAggregation>,
}

impl OutputRows {
    /// The rows `rows` (ascending, distinct, each `< n`) of `n`, as a selection matrix on
    /// `device`.
    pub fn new(rows: &[u32], n: usize, device: &Device) -> Result<Self> {
        check_ascending(rows, "output rows")?;
        let indptr: Vec<u32> = (0..=rows.len() as u32).collect();
        let csr = Csr::new_checked(rows.len(), n, indptr, rows.to_vec())
            .map_err(|e| Error::Config(format!("output rows: {e}")))?;
        Ok(Self {
            select: DeviceGraph::upload(&csr, device)?,
            rows: rows.len(),
            aggregation: None,
        })
    }

    /// The same rows with `agg`, the sum aggregation of exactly these rows of a partitioned
    /// graph ([`SelectedAggregation`], built for this rank's rows): a pass whose last hidden
    /// GCN layer runs fused with the output layer's aggregation then aggregates these rows
    /// alone instead of every row and selecting them (see the module). Every rank of the run
    /// must pass one (the aggregation is collective). An error where `agg`'s rows are not
    /// these.
    pub fn with_aggregation(mut self, agg: SelectedAggregation) -> Result<Self> {
        if agg.rows() != self.select.csr().indices() {
            return Err(Error::Config(format!(
                "a selected aggregation of {} rows for {} output rows that are not its own",
                agg.rows().len(),
                self.rows
            )));
        }
        self.aggregation = Some(agg);
        Ok(self)
    }

    /// [`Self::with_aggregation`]'s aggregation, if any.
    pub fn aggregation(&self) -> Option<&SelectedAggregation> {
        self.aggregation.as_ref()
    }

    /// How many rows are selected.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Nodes of the graph the rows are taken from.
    pub fn of(&self) -> usize {
        self.select.n_cols()
    }

    /// The selected rows of `x` (`[N, K]` -> `[M, K]`), differentiable.
    pub fn select(&self, x: &Tensor) -> Result<Tensor> {
        Ok(gnn_kernels::spmm(&self.select, x, Reduce::Sum)?)
    }

    /// [`Self::select`]'s backward: `dy [M, K]` back on the rows it came from (`[N, K]`, zero
    /// on the rows not selected), untracked.
    pub(crate) fn scatter(&self, dy: &Tensor) -> Result<Tensor> {
        Ok(gnn_kernels::spmm_transposed(
            &self.select,
            dy,
            None,
            Reduce::Sum,
        )?)
    }
}

/// Errors, naming them `what`, where `rows` are not ascending and distinct.
pub(crate) fn check_ascending(rows: &[u32], what: &str) -> Result<()> {
    match rows.windows(2).position(|w| w[0] >= w[1]) {
        Some(w) => Err(Error::Config(format!(
            "{what} must be ascending and distinct: row {} is {} after {}",
            w + 1,
            rows[w + 1],
            rows[w]
        ))),
        None => Ok(()),
    }
}

/// Whether a GraphSAGE layer's two products over `rows` rows (`[rows, 2 out]`, its
/// multiply-first form) would pass [`MAX_TENSOR_ELEMENTS`]: its output layer on selected rows
/// then aggregates first instead ([`crate::Forward::with_output_rows`]).
pub fn products_pass_limit(rows: usize, out: usize) -> bool {
    rows as u64 * 2 * out as u64 > MAX_TENSOR_ELEMENTS
}

/// Errors when a `[rows, width]` tensor named `what` would hold more than
/// [`MAX_TENSOR_ELEMENTS`]; `fix` says what to change.
pub fn check_elements(what: &str, rows: usize, width: usize, fix: &str) -> Result<()> {
    let n = rows as u64 * width as u64;
    if n > MAX_TENSOR_ELEMENTS {
        return Err(Error::Config(format!(
            "{what} [{rows} x {width}] would hold {n} elements, more than the {} candle 0.11's \
             CUDA kernels can index (huggingface/candle#3604: past it their loops never \
             end); {fix}",
            MAX_TENSOR_ELEMENTS
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_rows_and_scatters_their_gradient_back() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::arange(0f32, 15.0, &dev)?.reshape((5, 3))?;
        let rows = OutputRows::new(&[1, 4], 5, &dev)?;
        assert_eq!((rows.len(), rows.of()), (2, 5));
        let v = candle_core::Var::from_tensor(&x)?;
        let y = rows.select(v.as_tensor())?;
        assert_eq!(
            y.to_vec2::<f32>()?,
            vec![vec![3.0, 4.0, 5.0], vec![12.0, 13.0, 14.0]]
        );
        let g = (y * 2.0)?.sum_all()?.backward()?;
        let dx = g.get(v.as_tensor()).expect("x has a gradient");
        let want: Vec<Vec<f32>> = (0..5)
            .map(|r| vec![if r == 1 || r == 4 { 2.0 } else { 0.0 }; 3])
            .collect();
        assert_eq!(dx.to_vec2::<f32>()?, want);
        Ok(())
    }

    #[test]
    fn refuses_unsorted_or_out_of_range_rows() {
        let dev = Device::Cpu;
        let e = OutputRows::new(&[2, 2], 5, &dev)
            .err()
            .expect("repeated row");
        assert!(e.to_string().contains("ascending and distinct"), "{e}");
        let e = OutputRows::new(&[1, 5], 5, &dev).err().expect("row 5 of 5");
        assert!(e.to_string().contains("out of range"), "{e}");
        assert!(OutputRows::new(&[], 5, &dev).is_ok_and(|r| r.is_empty()));
    }

    /// Rows carry the aggregation of exactly themselves, and refuse another's.
    #[test]
    fn rows_carry_their_own_aggregation_only() -> Result<()> {
        let dev = Device::Cpu;
        let g = gnn_graph::Coo::new(4, vec![0, 1, 2], vec![1, 2, 3])
            .and_then(|c| c.to_csr(gnn_graph::BuildOptions::undirected_self_loops()))
            .map_err(|e| Error::Config(e.to_string()))?;
        let part = gnn_graph::RowPartition::balanced_by_nnz(&g, 1)
            .map_err(|e| Error::Config(e.to_string()))?;
        let local =
            gnn_graph::LocalGraph::build(&g, &part, 0).map_err(|e| Error::Config(e.to_string()))?;
        let values = vec![0.5f32; g.nnz()];
        let built = gnn_comm::LocalComm::run_group(1, |c| {
            let comm: std::sync::Arc<dyn gnn_comm::Communicator> = std::sync::Arc::new(c);
            SelectedAggregation::new(&local, &values, &part, &[vec![1, 3]], comm, &dev)
        });
        let agg = built
            .into_iter()
            .next()
            .ok_or_else(|| Error::Config("no rank".into()))??;
        let rows = OutputRows::new(&[1, 3], 4, &dev)?.with_aggregation(agg.clone())?;
        assert_eq!(rows.aggregation().map(|a| a.rows()), Some(&[1u32, 3][..]));
        assert!(OutputRows::new(&[1, 2], 4, &dev)?
            .with_aggregation(agg)
            .is_err());
        assert!(OutputRows::new(&[1, 3], 4, &dev)?.aggregation().is_none());
        Ok(())
    }

    #[test]
    fn element_limit_names_the_tensor_and_the_fix() {
        assert!(check_elements("logits", 1 << 16, (1 << 16) - 1, "x").is_ok());
        assert!(check_elements("logits", 1 << 16, 1 << 16, "x").is_err());
        let e = check_elements("logits", 27_790_361, 172, "use more ranks")
            .expect_err("4.78 G elements");
        let s = e.to_string();
        assert!(
            s.contains("logits [27790361 x 172]") && s.contains("4779942092"),
            "{s}"
        );
        assert!(s.contains("use more ranks"), "{s}");
    }
}
