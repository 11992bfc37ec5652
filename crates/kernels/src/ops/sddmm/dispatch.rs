//! The SDDMM kernel choice on CUDA under a graph's [`KernelPolicy`]: HP-SDDMM (nnz-balanced
//! warps, vectorised loads) wherever its shapes reach (K <= 1024), else one warp per row. A
//! pure function of the policy, the width and the operands' alignment, tested without a GPU.

use crate::device_graph::DeviceGraph;
use crate::partition::{HpShape, NPW_CANDIDATES};
use crate::policy::{KernelPolicy, SddmmKernel};

/// The kernel one SDDMM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SddmmChoice {
    /// HP-SDDMM of this shape, with a forced edges-per-warp (one of [`NPW_CANDIDATES`]) or
    /// `None` for DTP's.
    Hp {
        /// The launch shape.
        shape: HpShape,
        /// Edges per warp, `None`: DTP's.
        npw: Option<u32>,
    },
    /// One warp per row.
    Rows,
}

impl SddmmChoice {
    /// The kernel's name in a [`crate::policy::KernelsUsed`] record: `hp` or `rows`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hp { .. } => "hp",
            Self::Rows => "rows",
        }
    }
}

/// The kernel an SDDMM of width `k`, whose operands allow `aligned_to`-wide loads (1, 2 or
/// 4), runs under `policy`. SDDMM writes every edge once, so deterministic mode changes
/// nothing here.
pub fn sddmm_choice(policy: &KernelPolicy, k: usize, aligned_to: usize) -> SddmmChoice {
    let shape = match policy.sddmm {
        SddmmKernel::Rows => None,
        SddmmKernel::Auto | SddmmKernel::Hp(_) => HpShape::new(k, aligned_to),
    };
    match (shape, policy.sddmm) {
        (None, _) => SddmmChoice::Rows,
        (Some(shape), SddmmKernel::Hp(n)) if NPW_CANDIDATES.contains(&n) => SddmmChoice::Hp {
            shape,
            npw: Some(n),
        },
        (Some(shape), _) => SddmmChoice::Hp { shape, npw: None },
    }
}

/// [`sddmm_choice`] on `g` under its own policy.
pub fn sddmm_choice_for(g: &DeviceGraph, k: usize, aligned_to: usize) -> SddmmChoice {
    sddmm_choice(g.policy(), k, aligned_to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(c: SddmmChoice) -> String {
        match c {
            SddmmChoice::Hp { npw: None, .. } => "H".into(),
            SddmmChoice::Hp { npw: Some(n), .. } => format!("H{n}"),
            SddmmChoice::Rows => "R".into(),
        }
    }

    const WIDTHS: [usize; 8] = [0, 1, 16, 33, 128, 602, 1024, 1025];

    fn row(p: &KernelPolicy) -> String {
        WIDTHS
            .iter()
            .map(|&k| short(sddmm_choice(p, k, 4)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn choices_follow_the_policy_as_the_old_override_did() {
        // Written down from the rule before policies (`sddmm/cuda.rs` under each value of
        // `set_kernel_override`): HP wherever `HpShape` covers K (1..=1024), the row kernel
        // beyond and when forced; a forced edges-per-warp only from the candidates.
        let d = KernelPolicy::default();
        assert_eq!(row(&d), "R H H H H H H R");
        assert_eq!(row(&d.with_sddmm(SddmmKernel::Rows)), "R R R R R R R R");
        assert_eq!(
            row(&d.with_sddmm(SddmmKernel::Hp(64))),
            "R H64 H64 H64 H64 H64 H64 R"
        );
        assert_eq!(row(&d.with_sddmm(SddmmKernel::Hp(7))), "R H H H H H H R");
        assert_eq!(row(&d.with_deterministic(true)), row(&d));
        // The shape is HP-SDDMM's own for the alignment.
        match sddmm_choice(&d, 33, 1) {
            SddmmChoice::Hp { shape, .. } => assert_eq!(Some(shape), HpShape::new(33, 1)),
            SddmmChoice::Rows => panic!("K = 33 runs HP-SDDMM"),
        }
    }

    #[test]
    fn two_graphs_with_different_policies_get_their_own_kernels() {
        let csr = gnn_graph::Csr::new_checked(3, 3, vec![0, 2, 3, 3], vec![0, 2, 1]).unwrap();
        let g = DeviceGraph::upload(&csr, &candle_core::Device::Cpu).unwrap();
        let rows = g.with_policy(KernelPolicy::default().with_sddmm(SddmmKernel::Rows));
        let hp = g.with_policy(KernelPolicy::default().with_sddmm(SddmmKernel::Hp(512)));
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for k in 1..=64 {
                        assert!(matches!(
                            sddmm_choice_for(&g, k, 4),
                            SddmmChoice::Hp { npw: None, .. }
                        ));
                        assert_eq!(sddmm_choice_for(&rows, k, 4), SddmmChoice::Rows);
                        assert!(matches!(
                            sddmm_choice_for(&hp, k, 4),
                            SddmmChoice::Hp { npw: Some(512), .. }
                        ));
                    }
                });
            }
        });
    }
}
