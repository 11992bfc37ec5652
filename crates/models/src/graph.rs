//! The graph operands a model consumes, derived from a host graph and uploaded once.

use crate::config::ConvKind;
use crate::error::Result;
use candle_core::{Device, Tensor};
use gnn_graph::{BuildOptions, Csr, Normalization, SelfLoops};
use gnn_kernels::{spmm, spmm_weighted, DeviceGraph, Reduce};

/// A device graph plus optional edge values, in the form one model kind expects:
///
/// | kind | structure | values |
/// |---|---|---|
/// | GCN | `A + I` (one self loop per node) | `D^-1/2 (A+I) D^-1/2` |
/// | GraphSAGE, GIN | `A` without self loops | none (mean / max / sum in the kernel) |
/// | MLP | `A` as given (unused) | none |
pub struct ModelGraph {
    /// The structure on the device.
    pub graph: DeviceGraph,
    /// Edge values aligned with the structure, when the layer is weighted.
    pub values: Option<Tensor>,
}

impl ModelGraph {
    /// Derives and uploads the operands of `kind` from a square graph (row = target).
    pub fn new(csr: &Csr, kind: ConvKind, device: &Device) -> Result<Self> {
        let rebuild = |loops| {
            csr.rebuild(BuildOptions {
                symmetrize: false,
                dedup: true,
                self_loops: loops,
            })
        };
        Ok(match kind {
            ConvKind::Gcn => {
                let a = rebuild(SelfLoops::Add).map_err(gnn_kernels::Error::from)?;
                let v = Normalization::GcnSymmetric.edge_values(&a);
                let values = Tensor::from_vec(v, a.nnz(), device)?;
                Self {
                    graph: DeviceGraph::upload(&a, device)?,
                    values: Some(values),
                }
            }
            ConvKind::SageMean | ConvKind::SagePool | ConvKind::Gin => {
                let graph = if csr.self_loop_count() == 0 {
                    DeviceGraph::upload(csr, device)?
                } else {
                    DeviceGraph::upload(
                        &rebuild(SelfLoops::Remove).map_err(gnn_kernels::Error::from)?,
                        device,
                    )?
                };
                Self {
                    graph,
                    values: None,
                }
            }
            ConvKind::Mlp => Self {
                graph: DeviceGraph::upload(csr, device)?,
                values: None,
            },
        })
    }

    /// Aggregates `x` with the graph's values (if any) under `reduce`.
    pub fn aggregate(&self, x: &Tensor, reduce: Reduce) -> Result<Tensor> {
        Ok(match &self.values {
            Some(v) => spmm_weighted(&self.graph, x, v, reduce)?,
            None => spmm(&self.graph, x, reduce)?,
        })
    }
}
