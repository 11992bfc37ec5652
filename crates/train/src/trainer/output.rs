//! Which rows the output layer computes ([`gnn_models::output`]): the labelled nodes
//! (train, validation and test) where they are at most half of the nodes
//! ([`crate::TrainConfig::labelled_output`]), or where the whole `[N, classes]` logits would
//! pass [`gnn_models::MAX_TENSOR_ELEMENTS`]; every node otherwise (Reddit labels all its
//! nodes: selecting them would only add a copy). And the check that no tensor of a run
//! passes that limit.

use crate::data::DeviceData;
use crate::error::{Error, Result};
use candle_core::Tensor;
use gnn_comm::SelectedAggregation;
use gnn_models::{
    check_elements, ConvKind, Gnn, ModelConfig, ModelGraph, OutputRows, MAX_TENSOR_ELEMENTS,
};

/// Whether a run over `nodes` nodes of which `labelled` carry a label (in any split)
/// computes its `classes`-wide output layer for the labelled rows only.
/// (`enabled`: [`crate::TrainConfig::labelled_output`]).
/// A rank (or run) with no node computes every row (none).
pub(crate) fn restricts(nodes: usize, labelled: usize, classes: usize, enabled: bool) -> bool {
    (enabled && 2 * labelled <= nodes && nodes > 0) || whole_passes_limit(nodes, classes)
}

/// The rows the output layer computes over `nodes` nodes of which `labelled` carry a label
/// ([`restricts`]): the labelled ones (row 0 alone where there are none, see
/// [`LabelledOutput`]) or all of them.
pub(crate) fn output_rows(nodes: usize, labelled: usize, classes: usize, enabled: bool) -> usize {
    if restricts(nodes, labelled, classes, enabled) {
        labelled.max(1)
    } else {
        nodes
    }
}

/// Whether the whole `[nodes, classes]` logits would pass [`MAX_TENSOR_ELEMENTS`].
fn whole_passes_limit(nodes: usize, classes: usize) -> bool {
    nodes as u64 * classes as u64 > MAX_TENSOR_ELEMENTS
}

/// The run header's line on the output rows where only the labelled ones are computed
/// (`labelled` of `nodes`; every rank's where several), `None` otherwise.
pub fn describe(nodes: usize, labelled: usize, classes: usize, enabled: bool) -> Option<String> {
    restricts(nodes, labelled, classes, enabled).then(|| {
        let why = if whole_passes_limit(nodes, classes) {
            "the whole logits would pass candle's element limit, whatever --all-output-rows says"
        } else {
            "--all-output-rows computes every node's"
        };
        format!(
            "output layer: the {labelled} labelled rows of {nodes} (the loss and the metrics \
             read no others; {why})"
        )
    })
}

/// Whether the output layer of `m` over `nodes` rows, computed for selected rows, runs its
/// products on those rows alone (a GCN or GraphSAGE-mean layer aggregating first, GraphSAGE
/// also where its whole rows' two products would pass the limit; see
/// [`gnn_models::output`]).
pub(crate) fn output_products_on_rows(m: &ModelConfig, nodes: usize) -> bool {
    let (i, o) = m.layer_dims(m.layers.saturating_sub(1));
    match m.kind {
        ConvKind::Gcn => o >= i,
        ConvKind::SageMean => o >= i || gnn_models::products_pass_limit(nodes, o),
        _ => false,
    }
}

/// The width at which layer `l` of `m` exchanges rows for its aggregation (`None`: it
/// exchanges none, reading the cached aggregation or no graph).
fn exchanged_width(m: &ModelConfig, l: usize, cached: bool) -> Option<usize> {
    let (i, o) = m.layer_dims(l);
    let first_cached = l == 0 && cached;
    match m.kind {
        ConvKind::Mlp => None,
        ConvKind::Gcn | ConvKind::Gin | ConvKind::SageMean if first_cached => None,
        ConvKind::Gcn | ConvKind::SageMean => Some(i.min(o)),
        ConvKind::Gin | ConvKind::SagePool => Some(i),
        ConvKind::Gat | ConvKind::Transformer => Some(o),
    }
}

/// Errors where a run of `m` over `nodes` nodes (`edges` stored edges, `out_rows` rows of
/// the output layer) would make a tensor past [`MAX_TENSOR_ELEMENTS`], naming it and `fix`
/// (what to change): candle's CUDA kernels would never end on it. Checked before anything
/// is allocated.
/// `cached`: the first layer reads the cached aggregation of the features (no products of
/// its own to aggregate). `exchanged`: the rows a rank's aggregation input holds with the
/// rows it receives, where they are a tensor of their own (point-to-point: its rows and its
/// halo; an all-gather that is not the fused symmetric op: every rank's block); `None` on
/// one device and under the fused all-gather.
pub(crate) fn check_tensor_sizes(
    m: &ModelConfig,
    nodes: usize,
    edges: usize,
    out_rows: usize,
    cached: bool,
    exchanged: Option<usize>,
    fix: &str,
) -> Result<()> {
    check_elements("the input features", nodes, m.in_dim, fix)?;
    let attention = matches!(m.kind, ConvKind::Gat | ConvKind::Transformer);
    for l in 0..m.layers {
        let (i, o) = m.layer_dims(l);
        let last = l + 1 == m.layers;
        let on_rows = last && out_rows < nodes && output_products_on_rows(m, nodes);
        let rows = if on_rows { out_rows } else { nodes };
        check_elements(&format!("layer {}'s output", l + 1), rows, o, fix)?;
        if m.kind == ConvKind::SageMean && o < i && !(l == 0 && cached) && !on_rows {
            check_elements(
                &format!("layer {}'s two products", l + 1),
                nodes,
                2 * o,
                fix,
            )?;
        }
        if m.kind == ConvKind::Gin {
            check_elements(&format!("layer {}'s MLP", l + 1), nodes, m.hidden, fix)?;
        }
        if let (Some(rows), Some(width)) = (exchanged, exchanged_width(m, l, cached)) {
            let what = format!("layer {}'s input with the rows it receives", l + 1);
            check_elements(&what, rows, width, fix)?;
        }
        if attention {
            let heads = if last { 1 } else { m.heads };
            let what = format!("layer {}'s attention coefficients", l + 1);
            check_elements(&what, edges, heads, fix)?;
        }
    }
    Ok(())
}

/// The output layer's rows and the run's labels, loss weights and splits re-indexed to them
/// (row `i` of the logits is node `rows[i]`).
pub struct LabelledOutput {
    /// The rows.
    pub rows: OutputRows,
    /// The run's data with labels, loss weights and splits as the rows are (the features
    /// are the whole run's).
    pub data: DeviceData,
}

impl LabelledOutput {
    /// The labelled rows of `data` when they pay or are needed (see the module; `enabled`:
    /// [`crate::TrainConfig::labelled_output`]); `None`: every node's.
    pub fn choose(model: &Gnn, data: &DeviceData, enabled: bool) -> Result<Option<Self>> {
        let rows = labelled_rows(data)?;
        if !restricts(data.x.dim(0)?, rows.len(), model.config().out_dim, enabled) {
            return Ok(None);
        }
        Ok(Some(Self::of_rows(data, rows)?))
    }

    /// [`Self::choose`] on a graph that may carry the aggregation of the output rows alone
    /// ([`ModelGraph::output_aggregation`], a multi-device run's: see
    /// [`crate::dist::DistPlan::selects_output_aggregation`]): the rows then carry it
    /// ([`OutputRows::with_aggregation`]). An error where the graph carries one and the
    /// output is not restricted, or to other rows: this rank's passes would not call the
    /// collective aggregation that the other ranks' call.
    pub fn choose_on(
        model: &Gnn,
        graph: &ModelGraph,
        data: &DeviceData,
        enabled: bool,
    ) -> Result<Option<Self>> {
        let out = Self::choose(model, data, enabled)?;
        match (out, graph.output_aggregation()) {
            (out, None) => Ok(out),
            (Some(o), Some(agg)) => o.with_aggregation(agg).map(Some),
            (None, Some(_)) => Err(Error::Invalid(
                "the graph carries the output rows' aggregation, but this rank's output layer \
                 computes every row"
                    .into(),
            )),
        }
    }

    /// The same rows carrying `agg`, their aggregation alone ([`OutputRows::with_aggregation`];
    /// an error where `agg` is of other rows).
    pub fn with_aggregation(self, agg: &SelectedAggregation) -> Result<Self> {
        Ok(Self {
            rows: self.rows.with_aggregation(agg.clone())?,
            data: self.data,
        })
    }

    /// The labelled rows of `data`, whatever their share.
    pub fn labelled(data: &DeviceData) -> Result<Self> {
        Self::of_rows(data, labelled_rows(data)?)
    }

    /// `rows` (ascending, distinct, holding every labelled row) of `data`. A rank with no
    /// labelled row keeps row 0 (loss weight 0, in no split): no empty selection, index or
    /// zero-size launch reaches the driver (see [`crate::data::select_rows`]).
    fn of_rows(data: &DeviceData, mut rows: Vec<u32>) -> Result<Self> {
        let n = data.x.dim(0)?;
        if rows.is_empty() && n > 0 {
            rows.push(0);
        }
        let device = data.x.device();
        let position = |ids: &Tensor| -> Result<Tensor> {
            let at: Vec<u32> = ids
                .to_vec1::<u32>()?
                .iter()
                .map(|id| rows.binary_search(id).unwrap_or_default() as u32)
                .collect();
            crate::data::id_tensor(at, device)
        };
        let ids = crate::data::id_tensor(rows.clone(), device)?;
        let select = |t: &Tensor| crate::data::select_rows(t, &ids);
        let sub = DeviceData {
            x: data.x.clone(),
            labels: select(&data.labels)?,
            train: position(&data.train)?,
            val: position(&data.val)?,
            test: position(&data.test)?,
            train_labels: data.train_labels.clone(),
            train_weight: select(&data.train_weight)?,
            num_classes: data.num_classes,
            padding: data.padding,
        };
        Ok(Self {
            rows: OutputRows::new(&rows, n, device)?,
            data: sub,
        })
    }
}

/// The most a training pass's output layer computes for the train rows alone
/// ([`TrainOutput`]) takes: their share of the nodes. Above it the saving (the other rows'
/// edges) no longer pays for a second copy of those rows' structure.
pub(crate) const TRAIN_ROWS_SHARE: f64 = 0.9;

/// Whether a training pass over a whole graph of `nodes` nodes, `train` of them in the
/// train split, computes its output layer for the train rows alone ([`TrainOutput`]): a
/// model that can ([`Gnn::computes_output_on_restricted_graph`], `can`), `enabled`
/// ([`crate::TrainConfig::trains_rows`]), and at most [`TRAIN_ROWS_SHARE`] of the nodes
/// in the train split (and one at least).
pub(crate) fn trains_on_train_rows(can: bool, nodes: usize, train: usize, enabled: bool) -> bool {
    can && enabled && train > 0 && train as f64 <= TRAIN_ROWS_SHARE * nodes as f64
}

/// Whether `model` over `graph` can compute its output layer in training for some rows
/// alone ([`TrainOutput`]): a whole graph under exact aggregation and a model that
/// computes its output layer on a restricted graph.
pub(crate) fn can_train_rows(model: &Gnn, graph: &ModelGraph) -> bool {
    graph.halo().is_none()
        && graph.aggregation == gnn_models::Aggregation::Exact
        && model.computes_output_on_restricted_graph()
}

/// `ids` sorted, each once.
pub(crate) fn sorted_distinct(mut ids: Vec<u32>) -> Vec<u32> {
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The run header's line where a training pass computes its output layer for the train
/// rows alone ([`trains_on_train_rows`]; `can`: the model and graph allow it; `train`: the
/// distinct train nodes), `None` otherwise. `evaluated_labelled`: evaluation computes the
/// labelled rows alone ([`restricts`]), not every row.
pub fn describe_train_rows(
    can: bool,
    nodes: usize,
    train: usize,
    enabled: bool,
    evaluated_labelled: bool,
) -> Option<String> {
    trains_on_train_rows(can, nodes, train, enabled).then(|| {
        let eval = if evaluated_labelled {
            "the labelled rows"
        } else {
            "every row"
        };
        format!(
            "output layer in training: the {train} train rows of {nodes} (the loss reads no \
             others; their edges alone in its sparse products); evaluation computes {eval}; \
             --no-train-rows computes the evaluation's rows in training too"
        )
    })
}

/// A training pass's output layer for the train rows alone: the loss reads no other row, so
/// the output layer's sparse product and its transpose run over the train rows' edges alone
/// (on the same-graph Reddit files, 66 % of the nodes and about as many of the edges), over
/// the graph restricted to them ([`ModelGraph::restricted_to_rows`],
/// [`gnn_models::Forward::with_output_graph`]).
/// Exact: the train rows' logits are the whole output's. Evaluation keeps the labelled rows
/// (or every row).
pub(crate) struct TrainOutput {
    /// The graph restricted to the train rows.
    pub graph: ModelGraph,
    /// The train rows' labels.
    pub labels: Tensor,
    /// Their loss weights (`1 / n_train` each).
    pub weight: Tensor,
}

impl TrainOutput {
    /// Device bytes the train rows' graph holds beside the whole one: its structure and
    /// transpose (indices and row offsets), and its edge values where it has them.
    pub fn device_bytes(&self) -> u64 {
        let g = &self.graph.graph;
        let (nnz, rows, cols) = (g.nnz() as u64, g.n_rows() as u64, g.n_cols() as u64);
        let values = if self.graph.values.is_some() {
            4 * nnz
        } else {
            0
        };
        2 * 4 * nnz + 4 * (rows + cols + 2) + values
    }

    /// The train rows of `data` over `graph` where [`trains_on_train_rows`] says (a whole
    /// graph under exact aggregation); `None`: the training pass computes the output rows
    /// the evaluation does.
    pub fn choose(
        model: &Gnn,
        graph: &ModelGraph,
        data: &DeviceData,
        enabled: bool,
    ) -> Result<Option<Self>> {
        let can = can_train_rows(model, graph);
        let rows = sorted_distinct(data.train.to_vec1::<u32>()?);
        if !trains_on_train_rows(can, data.x.dim(0)?, rows.len(), enabled) {
            return Ok(None);
        }
        let device = data.x.device();
        let ids = crate::data::id_tensor(rows.clone(), device)?;
        let select = |t: &Tensor| crate::data::select_rows(t, &ids);
        Ok(Some(Self {
            graph: graph.restricted_to_rows(&rows)?,
            labels: select(&data.labels)?,
            weight: select(&data.train_weight)?,
        }))
    }
}

/// The train, validation and test rows of `data`, ascending and distinct.
fn labelled_rows(data: &DeviceData) -> Result<Vec<u32>> {
    let mut rows = Vec::new();
    for ids in [&data.train, &data.val, &data.test] {
        rows.extend(ids.to_vec1::<u32>()?);
    }
    Ok(sorted_distinct(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rank of the papers100M-sized graph on 4 GPUs: 27.79 M rows, 833.7 M non-zeros,
    /// 385 K labelled, 128 features, 172 classes.
    const ROWS: usize = 27_790_361;
    const NNZ: usize = 833_654_345;
    const LABELLED: usize = 385_000;

    #[test]
    fn papers_sized_ranks_fit_with_labelled_output_rows_only() {
        let gcn = ModelConfig::new(ConvKind::Gcn, 128, 128, 172, 3, 0.5);
        // Whole-output logits would pass the limit: the labelled rows are taken regardless.
        assert!(restricts(ROWS, LABELLED, 172, false));
        assert!(restricts(ROWS, LABELLED, 172, true));
        assert!(check_tensor_sizes(&gcn, ROWS, NNZ, LABELLED, true, None, "fix").is_ok());
        let e =
            check_tensor_sizes(&gcn, ROWS, NNZ, ROWS, true, None, "use more ranks").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("layer 3's output [27790361 x 172]"), "{s}");
        assert!(s.contains("use more ranks"), "{s}");
        // 256-wide hidden layers pass it at this share of rows whatever the output does.
        let wide = ModelConfig::new(ConvKind::Gcn, 128, 256, 172, 3, 0.5);
        let s = check_tensor_sizes(&wide, ROWS, NNZ, LABELLED, true, None, "fix")
            .unwrap_err()
            .to_string();
        assert!(s.contains("layer 1's output [27790361 x 256]"), "{s}");
        // On half the rows (8 ranks) it fits, its output layer (256 -> 172, multiplying
        // first: the whole rows' product) too.
        assert!(check_tensor_sizes(&wide, ROWS / 2, NNZ, LABELLED, true, None, "fix").is_ok());
        // Attention: per-edge coefficients of 8 heads over 834 M edges.
        let mut gat = ModelConfig::new(ConvKind::Gat, 128, 64, 172, 2, 0.5);
        gat.heads = 8;
        let s = check_tensor_sizes(&gat, ROWS, NNZ, LABELLED, false, None, "fix")
            .unwrap_err()
            .to_string();
        assert!(
            s.contains("layer 1's attention coefficients [833654345 x 8]"),
            "{s}"
        );
        // Reddit on one GPU: far below.
        let reddit = ModelConfig::new(ConvKind::Gcn, 602, 256, 41, 3, 0.5);
        assert!(
            check_tensor_sizes(&reddit, 232_965, 114_848_857, 232_965, true, None, "fix").is_ok()
        );
    }

    /// Exchanged rows that are a tensor of their own count (point-to-point: a rank's rows
    /// and its halo; an unfused all-gather: every block); a first GraphSAGE layer reading
    /// the cached aggregation makes no two-product tensor.
    #[test]
    fn exchanged_rows_count_and_a_cached_first_layer_makes_no_products() {
        let gcn = ModelConfig::new(ConvKind::Gcn, 128, 128, 172, 3, 0.5);
        let halo = 80_921_080;
        let s = check_tensor_sizes(&gcn, ROWS, NNZ, LABELLED, true, Some(ROWS + halo), "fix")
            .unwrap_err()
            .to_string();
        assert!(
            s.contains("layer 2's input with the rows it receives [108711441 x 128]"),
            "{s}"
        );
        let mut gat = ModelConfig::new(ConvKind::Gat, 128, 64, 172, 2, 0.5);
        gat.heads = 4;
        let s = check_tensor_sizes(
            &gat,
            ROWS / 4,
            NNZ / 8,
            LABELLED,
            false,
            Some(4 * ROWS),
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(
            s.contains("layer 1's input with the rows it receives [111161444 x 64]"),
            "{s}"
        );
        // 128 -> 96: the cached first layer multiplies the aggregation and the features
        // apart; without the cache it would hold [N, 192].
        let sage = ModelConfig::new(ConvKind::SageMean, 128, 96, 172, 3, 0.5);
        assert!(check_tensor_sizes(&sage, ROWS, NNZ, LABELLED, true, None, "fix").is_ok());
        let s = check_tensor_sizes(&sage, ROWS, NNZ, LABELLED, false, None, "fix")
            .unwrap_err()
            .to_string();
        assert!(s.contains("layer 1's two products [27790361 x 192]"), "{s}");
    }

    #[test]
    fn labelled_rows_are_taken_where_they_are_at_most_half() {
        assert!(restricts(100, 50, 7, true));
        assert!(!restricts(100, 51, 7, true));
        assert!(!restricts(100, 10, 7, false));
        // A rank with no row has nothing to select; one with no labelled row keeps row 0.
        assert!(!restricts(0, 0, 7, true));
        assert_eq!(output_rows(100, 0, 7, true), 1);
        assert_eq!(
            (output_rows(100, 50, 7, true), output_rows(100, 60, 7, true)),
            (50, 100)
        );
        // Past the limit the labelled rows are taken whatever the option says.
        assert!(restricts(30_000_000, 20_000_000, 172, false));
        assert!(describe(30_000_000, 20_000_000, 172, false)
            .is_some_and(|s| s.contains("element limit")));
        assert!(describe(100, 50, 7, true).is_some_and(|s| s.contains("50 labelled rows of 100")));
        assert!(describe(100, 60, 7, true).is_none());
    }
}
