//! A dataset's tensors on a device: features, labels and split indices.

use crate::error::{Error, Result};
use candle_core::{Device, Tensor};
use gnn_graph::Dataset;

/// Device-resident inputs of full-batch training.
pub struct DeviceData {
    /// Features `[N, F]`, f32 (bf16 / f16 after [`Self::with_precision`]).
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
    /// `[N]` f32: `1 / n_train` for train nodes, 0 elsewhere. The mean cross-entropy over
    /// train nodes is the fused [`gnn_kernels::masked_cross_entropy`] of the logits, `labels`
    /// and these weights: no `index_select` on the logits, whose backward (an `index_add`)
    /// runs serially over indices on candle's CUDA backend (90 ms per epoch on Reddit's 153 K
    /// train nodes).
    pub train_weight: Tensor,
    /// Number of classes.
    pub num_classes: usize,
}

impl DeviceData {
    /// Uploads `ds` (dense features; `row_normalize` divides each feature row by its sum
    /// first, the GCN preprocessing for bag-of-words features).
    pub fn new(ds: &Dataset, device: &Device, row_normalize: bool) -> Result<Self> {
        let n = ds.num_nodes() as u64;
        let bytes = 4 * n * (ds.features.cols() as u64 + 2);
        crate::device::on_oom(
            Self::upload(ds, 0..ds.num_nodes(), device, row_normalize),
            device,
            || {
                (
                    format!(
                        "uploading the features, labels and loss weights of {} nodes",
                        ds.num_nodes()
                    ),
                    Some(bytes),
                )
            },
        )
    }

    /// The same data with features stored as `precision` (bf16 / f16 on a CUDA device only;
    /// labels, splits and loss weights are unchanged).
    pub fn with_precision(mut self, precision: crate::Precision) -> Result<Self> {
        precision.check_device(self.x.device())?;
        self.x = self.x.to_dtype(precision.dtype())?;
        Ok(self)
    }

    /// One rank's share of `ds` in a multi-device run: the rows `rows` of the features and
    /// labels, the split nodes among them (renumbered from `rows.start`), and loss weights
    /// `1 / n_train` over the *whole* train set, so that the ranks' losses (and gradients)
    /// sum to the single-device ones.
    pub fn partitioned(
        ds: &Dataset,
        rows: std::ops::Range<usize>,
        device: &Device,
        row_normalize: bool,
    ) -> Result<Self> {
        Self::upload(ds, rows, device, row_normalize)
    }

    /// The rows `rows` of `ds` (all of them for [`Self::new`]); split ids renumbered from
    /// `rows.start`, loss weights over the whole train set.
    fn upload(
        ds: &Dataset,
        rows: std::ops::Range<usize>,
        device: &Device,
        row_normalize: bool,
    ) -> Result<Self> {
        ds.validate()?;
        if rows.end > ds.num_nodes() || rows.start > rows.end {
            return Err(Error::Invalid(format!(
                "rows {rows:?} outside dataset `{}` of {} nodes",
                ds.name,
                ds.num_nodes()
            )));
        }
        if ds.split.train.is_empty() {
            return Err(Error::Invalid(format!(
                "dataset `{}` has no training nodes",
                ds.name
            )));
        }
        let n = rows.len();
        let d = ds.features.dense_rows(rows.clone(), row_normalize);
        let x = Tensor::from_vec(d.data, (n, d.cols), device)?;
        let labels: Vec<u32> = ds.labels[rows.clone()]
            .iter()
            .map(|&l| l.max(0) as u32)
            .collect();
        let local = |v: &[u32]| -> Vec<u32> {
            v.iter()
                .filter(|&&i| rows.contains(&(i as usize)))
                .map(|&i| i - rows.start as u32)
                .collect()
        };
        let ids = |v: Vec<u32>| {
            let len = v.len();
            Tensor::from_vec(v, len, device)
        };
        let train_local = local(&ds.split.train);
        let mut w = vec![0f32; n];
        let inv = 1.0 / ds.split.train.len() as f32;
        for &i in &train_local {
            w[i as usize] = inv;
        }
        let labels = Tensor::from_vec(labels, n, device)?;
        let train = ids(train_local)?;
        Ok(Self {
            x,
            train_labels: labels.index_select(&train, 0)?,
            train_weight: Tensor::from_vec(w, n, device)?,
            labels,
            train,
            val: ids(local(&ds.split.val))?,
            test: ids(local(&ds.split.test))?,
            num_classes: ds.num_classes,
        })
    }
}

/// Fraction of `ids` whose argmax logit equals the label (0 for an empty set).
pub fn accuracy(logits: &Tensor, labels: &Tensor, ids: &Tensor) -> Result<f64> {
    let (correct, n) = correct_count(logits, labels, ids)?;
    Ok(if n == 0 { 0.0 } else { correct / n as f64 })
}

/// How many of `ids` have their argmax logit equal to the label, and `ids`' length.
pub fn correct_count(logits: &Tensor, labels: &Tensor, ids: &Tensor) -> Result<(f64, usize)> {
    let n = ids.dim(0)?;
    if n == 0 {
        return Ok((0.0, 0));
    }
    let pred = logits.index_select(ids, 0)?.argmax(1)?;
    let truth = labels.index_select(ids, 0)?;
    let correct = pred
        .eq(&truth)?
        .to_dtype(candle_core::DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    Ok((correct as f64, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    use crate::test_cora as cora;

    #[test]
    fn masked_loss_equals_cross_entropy_on_train_rows() {
        let dev = Device::Cpu;
        let ds = cora();
        let data = DeviceData::new(&ds, &dev, true).unwrap();
        let logits = Tensor::randn(0f32, 2.0, (ds.num_nodes(), 7), &dev).unwrap();
        let a = crate::masked_cross_entropy(&logits, &data.labels, &data.train_weight)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        let out = logits.index_select(&data.train, 0).unwrap();
        let b = candle_nn::loss::cross_entropy(&out, &data.train_labels)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }

    #[test]
    fn half_precision_is_refused_on_the_cpu_and_must_match_the_recipe() {
        let dev = Device::Cpu;
        let ds = cora();
        let data = DeviceData::new(&ds, &dev, true).unwrap();
        let e = DeviceData::new(&ds, &dev, true)
            .unwrap()
            .with_precision(crate::Precision::Bf16)
            .err()
            .expect("bf16 on the CPU")
            .to_string();
        assert!(e.contains("CUDA"), "{e}");
        // f32 data under a bf16 recipe: the trainer says how to upload it.
        let cfg = gnn_models::ModelConfig::new(
            gnn_models::ConvKind::Gcn,
            ds.features.cols(),
            16,
            ds.num_classes,
            2,
            0.5,
        );
        let model = gnn_models::Gnn::new(cfg, &dev, 0).unwrap();
        let graph =
            gnn_models::ModelGraph::new(&ds.graph, gnn_models::ConvKind::Gcn, &dev).unwrap();
        let tc = crate::TrainConfig {
            epochs: 1,
            precision: crate::Precision::Bf16,
            ..Default::default()
        };
        let e = crate::train(&model, &graph, &data, &tc, |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("with_precision") && e.contains("bf16"), "{e}");
    }
}
