//! A dataset's tensors on a device: features, labels and split indices.

use crate::error::{Error, Result};
use candle_core::{Device, Tensor};
use gnn_graph::Dataset;

/// Device-resident inputs of full-batch training.
pub struct DeviceData {
    /// Features `[N, F]`, f32.
    pub x: Tensor,
    /// Labels `[N]`, u32 (unlabeled nodes hold 0 and are never in the split).
    pub labels: Tensor,
    /// Train node ids, u32.
    pub train: Tensor,
    /// Validation node ids.
    pub val: Tensor,
    /// Test node ids.
    pub test: Tensor,
    /// Labels of the train nodes.
    pub train_labels: Tensor,
    /// Number of classes.
    pub num_classes: usize,
}

impl DeviceData {
    /// Uploads `ds` (dense features; `row_normalize` divides each feature row by its sum
    /// first, the GCN preprocessing for bag-of-words features).
    pub fn new(ds: &Dataset, device: &Device, row_normalize: bool) -> Result<Self> {
        ds.validate()?;
        if ds.split.train.is_empty() {
            return Err(Error::Invalid(format!(
                "dataset `{}` has no training nodes",
                ds.name
            )));
        }
        let mut feats = ds.features.clone();
        if row_normalize {
            feats.row_normalize();
        }
        let d = feats.to_dense();
        let x = Tensor::from_vec(d.data, (d.rows, d.cols), device)?;
        let labels: Vec<u32> = ds.labels.iter().map(|&l| l.max(0) as u32).collect();
        let labels = Tensor::from_vec(labels, ds.num_nodes(), device)?;
        let ids = |v: &[u32]| Tensor::from_vec(v.to_vec(), v.len(), device);
        let train = ids(&ds.split.train)?;
        let train_labels = labels.index_select(&train, 0)?;
        Ok(Self {
            x,
            train_labels,
            labels,
            train,
            val: ids(&ds.split.val)?,
            test: ids(&ds.split.test)?,
            num_classes: ds.num_classes,
        })
    }
}

/// Fraction of `ids` whose argmax logit equals the label (0 for an empty set).
pub fn accuracy(logits: &Tensor, labels: &Tensor, ids: &Tensor) -> Result<f64> {
    let n = ids.dim(0)?;
    if n == 0 {
        return Ok(0.0);
    }
    let pred = logits.index_select(ids, 0)?.argmax(1)?;
    let truth = labels.index_select(ids, 0)?;
    let correct = pred
        .eq(&truth)?
        .to_dtype(candle_core::DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    Ok(correct as f64 / n as f64)
}
