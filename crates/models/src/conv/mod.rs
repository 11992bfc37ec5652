//! Graph convolutions, one per file (PyG's parameter names).

pub mod gat;
pub mod gcn;
pub mod gin;
pub mod linear;
pub mod sage;
pub mod transformer;

pub use gat::GatConv;
pub use gcn::GcnConv;
pub use gin::GinConv;
pub use linear::Linear;
pub use sage::SageConv;
pub use transformer::TransformerConv;

use crate::dropout::DropoutRng;
use crate::error::Result;
use crate::timer::{Phase, Timer};
use candle_core::Tensor;
use gnn_kernels::{maxk, Cbsr};

/// MaxK of `h` then dropout on the kept values (MaxK-GNN's order), timed as element-wise work.
pub(crate) fn maxk_dropout(
    h: &Tensor,
    k: usize,
    drop: Option<(&mut DropoutRng, f32)>,
    t: &Timer,
) -> Result<Cbsr> {
    let c = t.time(Phase::Elementwise, || Ok(maxk(h, k)?))?;
    match drop {
        Some((rng, p)) if p > 0.0 => {
            let d = t.time(Phase::Elementwise, || rng.dropout(c.data(), p))?;
            Ok(c.with_data(d)?)
        }
        _ => Ok(c),
    }
}
