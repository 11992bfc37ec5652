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
    /// Zero columns appended to `x` ([`Self::with_aligned_features`]); the dataset's feature
    /// count is `x`'s width minus these.
    pub padding: usize,
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

    /// On a CUDA device, the features zero-padded to [`gnn_models::aligned_width`] columns
    /// (Reddit's 602 become 608): rows whose byte length is a multiple of 16, so that cuBLAS
    /// runs the first layer's products and weight gradients on its aligned kernels (on 602
    /// columns it falls back to kernels at about a third of their bandwidth). The models
    /// take the padded width and meet the extra columns with zero weights, so the results
    /// are those of the unpadded features up to rounding; parameters keep the logical width.
    /// A no-op on the CPU and where the width is aligned already.
    pub fn with_aligned_features(self) -> Result<Self> {
        if !self.x.device().is_cuda() {
            return Ok(self);
        }
        self.with_padded_features()
    }

    /// The features zero-padded to [`gnn_models::aligned_width`] columns on any device
    /// ([`Self::with_aligned_features`] does it on CUDA only; the tests use this on the CPU).
    pub fn with_padded_features(mut self) -> Result<Self> {
        let (cols, width) = (self.x.dim(1)?, gnn_models::aligned_width(self.features()?));
        if width > cols {
            self.x = self.x.pad_with_zeros(1, 0, width - cols)?;
            self.padding += width - cols;
        }
        Ok(self)
    }

    /// The dataset's feature count: `x`'s width without its [`Self::padding`].
    pub fn features(&self) -> Result<usize> {
        Ok(self.x.dim(1)? - self.padding)
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
        if rows.end > ds.num_nodes() || rows.start > rows.end {
            return Err(Error::Invalid(format!(
                "rows {rows:?} outside dataset `{}` of {} nodes",
                ds.name,
                ds.num_nodes()
            )));
        }
        // The features of these rows only: each rank of a partitioned run checks its own.
        ds.validate_rows(rows.clone())?;
        if ds.split.train.is_empty() {
            return Err(Error::Invalid(format!(
                "dataset `{}` has no training nodes",
                ds.name
            )));
        }
        let n = rows.len();
        if device.is_cuda() {
            gnn_models::check_elements(
                &format!("the features of dataset `{}`", ds.name),
                n,
                ds.features.cols(),
                "train partitioned over more GPUs (train_dist --ranks), each holding a share \
                 of the rows",
            )?;
        }
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
        let ids = |v: Vec<u32>| id_tensor(v, device);
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
            train_labels: select_rows(&labels, &train)?,
            train_weight: Tensor::from_vec(w, n, device)?,
            labels,
            train,
            val: ids(local(&ds.split.val))?,
            test: ids(local(&ds.split.test))?,
            num_classes: ds.num_classes,
            padding: 0,
        })
    }
}

/// `v` as a u32 tensor on `device`; no ids (a split with no node on this rank, see
/// [`select_rows`]) are an empty view of a one-element buffer: no zero-byte upload reaches
/// the driver.
pub(crate) fn id_tensor(v: Vec<u32>, device: &candle_core::Device) -> Result<Tensor> {
    if v.is_empty() {
        return Ok(Tensor::zeros(1, candle_core::DType::U32, device)?.narrow(0, 0, 0)?);
    }
    let len = v.len();
    Ok(Tensor::from_vec(v, len, device)?)
}

/// The rows `ids` of `t` (`index_select` along dimension 0), for a set of ids that may be
/// empty: a rank of a partitioned run can own no node of a split (Cora's Planetoid split has
/// its training nodes at ids 0..140 and its test nodes at 1708..2708: over two ranges, rank 1
/// owns no training node and rank 0 no test node). On CUDA candle launches `index_select`
/// over no ids with a grid of zero blocks, which the driver refuses
/// (`CUDA_ERROR_INVALID_VALUE`); no ids give an empty view of `t` instead, no kernel. (The
/// empty id sets themselves are views of a one-element buffer for the same reason: a
/// zero-byte `cuMemAllocAsync` gives a null pointer, and a copy to it is nothing to rely on.)
pub(crate) fn select_rows(t: &Tensor, ids: &Tensor) -> Result<Tensor> {
    if ids.dim(0)? == 0 {
        return Ok(t.narrow(0, 0, 0)?);
    }
    Ok(t.index_select(ids, 0)?)
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

    /// Elements in `t`'s buffer (a CPU tensor): its own for a result, its source's for a view.
    fn buffer_len(t: &Tensor) -> usize {
        match &*t.storage_and_layout().0 {
            candle_core::Storage::Cpu(s) => s.as_slice::<u32>().unwrap().len(),
            _ => unreachable!("a CPU tensor"),
        }
    }

    /// Cora over two ranges (what `train(cora, devices=[0, 1])` runs): the Planetoid split
    /// leaves rank 1 without a training or validation node and rank 0 without a test node. A
    /// rank's empty split must reach the device as no zero-length upload and no
    /// `index_select` over no ids: candle's CUDA backend launches that with a grid of zero
    /// blocks, which the driver refuses (`CUDA_ERROR_INVALID_VALUE`, rank 1 of the Python
    /// package's NCCL run ending the process). The CPU runs both fine, so what is checked is
    /// that neither happens: every empty tensor is a view of a buffer that is not empty.
    #[test]
    fn a_rank_without_nodes_of_a_split_makes_no_empty_buffer() {
        let dev = Device::Cpu;
        let ds = cora();
        let plan = crate::dist::DistPlan::new(&ds, gnn_models::ConvKind::Gcn, 2, None).unwrap();
        let ranks: Vec<DeviceData> = (0..2)
            .map(|r| DeviceData::partitioned(&ds, plan.partition.range(r), &dev, true).unwrap())
            .collect();
        let len = |t: &Tensor| t.dims1().unwrap();
        assert_eq!(len(&ranks[0].test), 0, "rank 0 owns no test node");
        assert_eq!((len(&ranks[1].train), len(&ranks[1].val)), (0, 0));
        let r1 = &ranks[1];
        assert_eq!(r1.train_labels.dims(), [0]);
        assert_eq!(r1.train_labels.dtype(), candle_core::DType::U32);
        assert_eq!(
            buffer_len(&r1.train_labels),
            buffer_len(&r1.labels),
            "the empty training labels came from an index_select over no ids"
        );
        for (what, t) in [
            ("rank 1's train", &r1.train),
            ("rank 1's val", &r1.val),
            ("rank 0's test", &ranks[0].test),
        ] {
            assert_eq!(t.dtype(), candle_core::DType::U32, "{what}");
            assert!(buffer_len(t) > 0, "{what}: an upload of zero bytes");
        }
        // Rank 0 holds every training node: its weights sum to 1, rank 1's to 0.
        let sum = |d: &DeviceData| {
            d.train_weight
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!((sum(&ranks[0]) - 1.0).abs() < 1e-5 && sum(r1) == 0.0);
        assert_eq!(len(&ranks[0].train_labels), ds.split.train.len());
        let logits = Tensor::zeros((len(&r1.labels), 7), candle_core::DType::F32, &dev).unwrap();
        assert_eq!(
            correct_count(&logits, &r1.labels, &r1.train).unwrap(),
            (0.0, 0)
        );
        // The labelled-rows view of each rank (the output layer's rows): its empty splits
        // are views of one-element buffers too.
        for (r, d) in ranks.iter().enumerate() {
            let out = crate::LabelledOutput::labelled(d).unwrap();
            let o = &out.data;
            assert_eq!(out.rows.len(), len(&o.labels), "rank {r}");
            for (what, t) in [("train", &o.train), ("val", &o.val), ("test", &o.test)] {
                assert!(buffer_len(t) > 0, "rank {r}'s labelled {what}: zero bytes");
            }
        }
        // Four ranges: rank 1 has no labelled node at all; its view keeps row 0, weight 0,
        // in no split.
        let plan = crate::dist::DistPlan::new(&ds, gnn_models::ConvKind::Gcn, 4, None).unwrap();
        let r = DeviceData::partitioned(&ds, plan.partition.range(1), &dev, true).unwrap();
        assert_eq!(plan.labelled[1], 0);
        let out = crate::LabelledOutput::labelled(&r).unwrap();
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.data.train_weight.to_vec1::<f32>().unwrap(), [0.0]);
        assert_eq!(
            len(&out.data.train) + len(&out.data.val) + len(&out.data.test),
            0
        );
    }

    /// Cora's 1,433 features padded to 1,440 zero columns train the model of the unpadded
    /// ones: the same loss, accuracy and parameters (input dropout on, so the padded path's
    /// mask must be the unpadded one's).
    #[test]
    fn padded_features_train_the_unpadded_model() {
        let dev = Device::Cpu;
        let ds = cora();
        let plain = DeviceData::new(&ds, &dev, true).unwrap();
        let padded = DeviceData::new(&ds, &dev, true)
            .unwrap()
            .with_padded_features()
            .unwrap();
        assert_eq!(padded.x.dims(), [ds.num_nodes(), 1440]);
        assert_eq!((padded.padding, padded.features().unwrap()), (7, 1433));
        // Padding twice is padding once.
        let again = DeviceData::new(&ds, &dev, true)
            .unwrap()
            .with_padded_features()
            .unwrap()
            .with_padded_features()
            .unwrap();
        assert_eq!((again.x.dim(1).unwrap(), again.padding), (1440, 7));
        // A no-op on the CPU: the trainer pads on CUDA only.
        let same = DeviceData::new(&ds, &dev, true)
            .unwrap()
            .with_aligned_features()
            .unwrap();
        assert_eq!(same.x.dims(), [ds.num_nodes(), 1433]);
        let graph =
            gnn_models::ModelGraph::new(&ds.graph, gnn_models::ConvKind::Gcn, &dev).unwrap();
        let tc = crate::TrainConfig {
            epochs: 3,
            ..Default::default()
        };
        let run = |data: &DeviceData| {
            let mut cfg = gnn_models::ModelConfig::new(
                gnn_models::ConvKind::Gcn,
                ds.features.cols(),
                16,
                ds.num_classes,
                2,
                0.5,
            );
            cfg.input_dropout = 0.5;
            let model = gnn_models::Gnn::new(cfg, &dev, 0).unwrap();
            let r = crate::train(&model, &graph, data, &tc, |_| {}).unwrap();
            let vars = model.named_vars();
            let (_, first) = vars
                .iter()
                .find(|(name, _)| name == "convs.0.lin.weight")
                .expect("the first layer's weight");
            let w: Vec<f32> = first.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
            (r.final_loss, r.test_acc, w)
        };
        // A model as wide as the padded rows is refused: the dataset has 1,433 features.
        let wide = gnn_models::Gnn::new(
            gnn_models::ModelConfig::new(
                gnn_models::ConvKind::Gcn,
                1440,
                16,
                ds.num_classes,
                2,
                0.5,
            ),
            &dev,
            0,
        )
        .unwrap();
        let e = crate::train(&wide, &graph, &padded, &tc, |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("expects 1440") && e.contains("has 1433"), "{e}");
        let (l0, a0, w0) = run(&plain);
        let (l1, a1, w1) = run(&padded);
        assert!((l0 - l1).abs() <= 1e-5 * l0.abs(), "loss {l0} vs {l1}");
        assert_eq!(a0, a1);
        for (p, q) in w0.iter().zip(&w1) {
            assert!((p - q).abs() <= 1e-5, "{p} vs {q}");
        }
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
