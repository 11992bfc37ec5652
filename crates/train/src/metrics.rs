//! Classification metrics beside accuracy. [`roc_auc`] is the area under the ROC curve of one
//! score per node against a two-class truth; [`split_roc_auc`] applies it to a two-class
//! model's logits on the train, validation and test nodes, and [`RocAuc`] is what the reports
//! carry. The heterophilous benchmarks (Platonov et al.'s questions, tolokers, minesweeper)
//! report ROC-AUC for their two-class datasets because accuracy hides a model that predicts
//! the majority class: on a 97 / 3 split it scores 97 % and an AUC of 0.5.
//!
//! ```
//! use gnn_train::metrics::roc_auc;
//! // Positives score 0.35 and 0.8, negatives 0.1 and 0.4: 3 of the 4 pairs are ordered.
//! let auc = roc_auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]);
//! assert_eq!(auc, Some(0.75));
//! // One class only: no pair to order, no AUC.
//! assert_eq!(roc_auc(&[0.2, 0.9], &[true, true]), None);
//! ```

use crate::data::DeviceData;
use crate::error::Result;
use candle_core::{DType, Tensor};
use gnn_models::{Gnn, ModelGraph};
use serde::{Deserialize, Serialize};

/// Area under the ROC curve of `scores` (higher: more likely positive) against `positive`:
/// the probability that a random positive scores above a random negative, a tie counting one
/// half. Computed as the Mann-Whitney U statistic from ranks, tied scores sharing their
/// average rank, in `O(n log n)`:
///
/// `AUC = (sum of the positives' ranks - P (P + 1) / 2) / (P N)`
///
/// for `P` positives and `N` negatives. `None` when it is undefined: no positive or no
/// negative, `scores` and `positive` of different lengths, or a NaN score.
pub fn roc_auc(scores: &[f64], positive: &[bool]) -> Option<f64> {
    if scores.len() != positive.len() || scores.iter().any(|s| s.is_nan()) {
        return None;
    }
    let p = positive.iter().filter(|&&y| y).count();
    let n = positive.len() - p;
    if p == 0 || n == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Walk the groups of equal scores; ranks are 1-based, a group of ranks i+1 ..= j shares
    // their mean (i + 1 + j) / 2.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < order.len() {
        let s = scores[order[i]];
        let j = i + order[i..].iter().take_while(|&&k| scores[k] == s).count();
        let avg = (i + 1 + j) as f64 / 2.0;
        let pos = order[i..j].iter().filter(|&&k| positive[k]).count();
        rank_sum += avg * pos as f64;
        i = j;
    }
    let (p, n) = (p as f64, n as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// ROC-AUC of a two-class model on each split (fractions in `[0, 1]`); a split without both
/// classes has none.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RocAuc {
    /// On the train nodes.
    pub train: Option<f64>,
    /// On the validation nodes.
    pub val: Option<f64>,
    /// On the test nodes.
    pub test: Option<f64>,
}

impl std::fmt::Display for RocAuc {
    /// `ROC-AUC test 0.8123 (val 0.8011, train 0.9567)`, `-` for a split without one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |x: Option<f64>| crate::report::or_dash(x, |a| format!("{a:.4}"));
        write!(
            f,
            "ROC-AUC test {} (val {}, train {})",
            v(self.test),
            v(self.val),
            v(self.train)
        )
    }
}

/// The [`RocAuc`] of `logits` (`[N, 2]`, any float dtype) on `data`'s splits when the data has
/// exactly two classes, else `None`. Class 1 is the positive one; the score is `logit 1 -
/// logit 0`, which orders the nodes as the softmax probability of class 1 does. One device to
/// host copy of the scores; single-device data (a rank of a partitioned run sees its own rows
/// only).
pub fn split_roc_auc(logits: &Tensor, data: &DeviceData) -> Result<Option<RocAuc>> {
    if data.num_classes != 2 {
        return Ok(None);
    }
    let logits = logits.to_dtype(DType::F32)?;
    let scores: Vec<f32> = (logits.narrow(1, 1, 1)? - logits.narrow(1, 0, 1)?)?
        .flatten_all()?
        .to_vec1()?;
    let labels: Vec<u32> = data.labels.to_vec1()?;
    let on = |ids: &Tensor| -> Result<Option<f64>> {
        let ids: Vec<u32> = ids.to_vec1()?;
        let s: Vec<f64> = ids.iter().map(|&i| scores[i as usize] as f64).collect();
        let y: Vec<bool> = ids.iter().map(|&i| labels[i as usize] == 1).collect();
        Ok(roc_auc(&s, &y))
    };
    Ok(Some(RocAuc {
        train: on(&data.train)?,
        val: on(&data.val)?,
        test: on(&data.test)?,
    }))
}

/// [`split_roc_auc`] of `model`'s predictions (evaluation mode) on `data`: for a trained model
/// holding its best validation epoch's weights, the ROC-AUC at that epoch. `None` without a
/// forward pass unless the data has exactly two classes.
pub fn model_roc_auc(model: &Gnn, graph: &ModelGraph, data: &DeviceData) -> Result<Option<RocAuc>> {
    if data.num_classes != 2 {
        return Ok(None);
    }
    split_roc_auc(&crate::trainer::predict(model, graph, &data.x)?, data)
}

/// Mean and sample standard deviation of the test ROC-AUC over seeds, if every seed has one.
pub fn mean_std_test(runs: &[Option<RocAuc>]) -> Option<(f64, f64)> {
    let v: Option<Vec<f64>> = runs.iter().map(|r| r.and_then(|r| r.test)).collect();
    v.filter(|v| !v.is_empty())
        .map(|v| crate::report::mean_std(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: over all (positive, negative) pairs, 1 if ordered, 1/2 if tied.
    fn by_pairs(s: &[f64], y: &[bool]) -> f64 {
        let (mut sum, mut pairs) = (0.0, 0.0);
        for (a, _) in s.iter().zip(y).filter(|(_, &y)| y) {
            for (b, _) in s.iter().zip(y).filter(|(_, &y)| !y) {
                pairs += 1.0;
                sum += if a > b {
                    1.0
                } else if a == b {
                    0.5
                } else {
                    0.0
                };
            }
        }
        sum / pairs
    }

    #[test]
    fn hand_computed_cases() {
        let y = [false, false, true, true];
        assert_eq!(roc_auc(&[0.1, 0.2, 0.8, 0.9], &y), Some(1.0));
        assert_eq!(roc_auc(&[0.9, 0.8, 0.2, 0.1], &y), Some(0.0));
        // 3 of 4 pairs ordered (0.35 < 0.4).
        assert_eq!(roc_auc(&[0.1, 0.4, 0.35, 0.8], &y), Some(0.75));
        // Unsorted input, one positive among three: it beats two of the three negatives.
        assert_eq!(
            roc_auc(&[0.3, 0.7, 0.5, 0.1], &[false, false, true, false]),
            Some(2.0 / 3.0)
        );
    }

    #[test]
    fn ties_take_the_average_rank() {
        // Ranks 1, 2.5, 2.5, 4; positives hold 2.5 + 4 = 6.5; (6.5 - 3) / (2 * 2) = 0.875:
        // pairs (2,1) 1, (2,2) 1/2, (3,1) 1, (3,2) 1.
        let (s, y) = ([1.0, 2.0, 2.0, 3.0], [false, true, false, true]);
        assert_eq!(roc_auc(&s, &y), Some(0.875));
        // All scores equal: every pair is a tie, whatever the labels.
        assert_eq!(
            roc_auc(&[0.5; 5], &[true, false, false, true, false]),
            Some(0.5)
        );
        // A constant (majority-class) predictor scores 0.5 however skewed the classes.
        let mut y = vec![false; 97];
        y.extend([true; 3]);
        assert_eq!(roc_auc(&[-2.0; 100], &y), Some(0.5));
    }

    #[test]
    fn matches_the_pairwise_definition_with_many_ties() {
        // Scores on a coarse grid (many ties), labels from a fixed LCG.
        let mut x: u64 = 12345;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        let s: Vec<f64> = (0..300).map(|_| (next() % 7) as f64 * 0.25).collect();
        let y: Vec<bool> = (0..300).map(|_| next() % 3 == 0).collect();
        let auc = roc_auc(&s, &y).unwrap();
        assert!((auc - by_pairs(&s, &y)).abs() < 1e-12, "{auc}");
    }

    #[test]
    fn undefined_cases_give_none() {
        assert_eq!(roc_auc(&[0.1, 0.9, 0.4], &[true, true, true]), None);
        assert_eq!(roc_auc(&[0.1, 0.9], &[false, false]), None);
        assert_eq!(roc_auc(&[], &[]), None);
        assert_eq!(roc_auc(&[0.1, 0.9], &[true]), None);
        assert_eq!(roc_auc(&[0.1, f64::NAN], &[true, false]), None);
    }

    #[test]
    fn splits_of_a_two_class_dataset() {
        use candle_core::Device;
        let dev = Device::Cpu;
        // Six nodes, class 1 at nodes 1 to 4. Train {0, 1}, val {2, 3} (class 1 only: no
        // AUC), test {4, 5}.
        let ds = gnn_graph::Dataset {
            name: "two".into(),
            graph: gnn_graph::Csr::empty(6, 6).unwrap(),
            features: gnn_graph::Features::Dense(
                gnn_graph::DenseMatrix::new(6, 1, vec![1.0; 6]).unwrap(),
            ),
            labels: vec![0, 1, 1, 1, 1, 0],
            num_classes: 2,
            split: gnn_graph::Split {
                train: vec![0, 1],
                val: vec![2, 3],
                test: vec![4, 5],
            },
        };
        let data = DeviceData::new(&ds, &dev, false).unwrap();
        // Scores logit1 - logit0: 0.2, 0.1 | 0.3, 0.4 | 0.9, 0.5.
        let l0 = [0.0f32; 6];
        let l1 = [0.2f32, 0.1, 0.3, 0.4, 0.9, 0.5];
        let logits: Vec<f32> = l0.iter().zip(&l1).flat_map(|(&a, &b)| [a, b]).collect();
        let logits = Tensor::from_vec(logits, (6, 2), &dev).unwrap();
        let auc = split_roc_auc(&logits, &data).unwrap().unwrap();
        assert_eq!(auc.train, Some(0.0));
        assert_eq!(auc.val, None);
        assert_eq!(auc.test, Some(1.0));
        assert_eq!(auc.to_string(), "ROC-AUC test 1.0000 (val -, train 0.0000)");
        // The same logits in bf16 give the same order here.
        let half = logits.to_dtype(DType::BF16).unwrap();
        assert_eq!(
            split_roc_auc(&half, &data).unwrap().unwrap().test,
            Some(1.0)
        );
        let (m, s) = mean_std_test(&[
            Some(auc),
            Some(RocAuc {
                test: Some(0.5),
                ..auc
            }),
        ])
        .unwrap();
        assert!(
            (m - 0.75).abs() < 1e-12 && (s - 0.125f64.sqrt()).abs() < 1e-12,
            "{m} {s}"
        );
        assert_eq!(mean_std_test(&[Some(auc), None]), None);
    }

    #[test]
    fn other_class_counts_have_none() {
        let ds = crate::test_cora();
        let data = DeviceData::new(&ds, &candle_core::Device::Cpu, true).unwrap();
        let logits =
            Tensor::zeros((ds.num_nodes(), 7), DType::F32, &candle_core::Device::Cpu).unwrap();
        assert_eq!(split_roc_auc(&logits, &data).unwrap(), None);
    }
}
