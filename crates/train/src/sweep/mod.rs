//! Parameter sweeps: [`maxk`] trains every model with ReLU and MaxK at each k (accuracy, epoch
//! time, time to accuracy, per-phase breakdown, against ReLU and PyG); [`inference`] runs a
//! trained model under every sampled aggregation and feature encoding (accuracy loss,
//! aggregation speed-up, loading time, against our exact kernel and cuSPARSE). Each writes
//! JSON, a Markdown table and SVG charts.

pub mod inference;
pub mod maxk;
