//! Model hyper-parameters, serialisable and stored beside the weights.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The convolution a model stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvKind {
    /// Kipf & Welling's GCN: `D^-1/2 (A+I) D^-1/2 X W + b`.
    Gcn,
    /// GraphSAGE with mean aggregation: `W_l mean_{j in N(i)} x_j + W_r x_i + b`.
    SageMean,
    /// GraphSAGE-pool: `W_l max_{j in N(i)} relu(W_p x_j + b_p) + W_r x_i + b`.
    SagePool,
    /// GIN: `MLP((1 + eps) x_i + sum_{j in N(i)} x_j)`, eps learnable, MLP = Lin-ReLU-Lin.
    Gin,
    /// GAT (PyG's `GATConv`): multi-head additive attention over `N(i) ∪ {i}`; hidden layers
    /// concatenate [`ModelConfig::heads`] heads of `hidden / heads`, the last layer has one.
    Gat,
    /// Graph transformer (PyG's `TransformerConv`): multi-head dot-product attention over
    /// `N(i)` plus a root (skip) weight; heads as for GAT.
    Transformer,
    /// No graph: a plain MLP on the features (the baseline every GNN must beat).
    Mlp,
}

impl std::str::FromStr for ConvKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "gcn" => Ok(Self::Gcn),
            "sage" | "sage-mean" | "sage_mean" | "graphsage" => Ok(Self::SageMean),
            "sage-pool" | "sage_pool" => Ok(Self::SagePool),
            "gin" => Ok(Self::Gin),
            "gat" => Ok(Self::Gat),
            "transformer" | "graph-transformer" => Ok(Self::Transformer),
            "mlp" => Ok(Self::Mlp),
            other => Err(Error::Config(format!(
                "unknown model `{other}` (gcn, sage, sage-pool, gin, gat, transformer, mlp)"
            ))),
        }
    }
}

impl std::fmt::Display for ConvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Gcn => "gcn",
            Self::SageMean => "sage",
            Self::SagePool => "sage-pool",
            Self::Gin => "gin",
            Self::Gat => "gat",
            Self::Transformer => "transformer",
            Self::Mlp => "mlp",
        })
    }
}

/// Non-linearity between layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `max(x, 0)` after each hidden layer.
    Relu,
    /// `x` for `x > 0`, `exp(x) - 1` otherwise, after each hidden layer (the GAT paper's).
    Elu,
    /// MaxK-GNN: every layer but the last runs `linear -> MaxK (k largest per row, CBSR) ->
    /// dropout -> aggregation (SpGEMM)`, with no other non-linearity between layers. GCN,
    /// GraphSAGE-mean and GIN (whose MLP keeps its inner ReLU); hidden width <= 1024.
    MaxK {
        /// Entries kept per row.
        k: usize,
    },
}

impl std::fmt::Display for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Relu => f.write_str("relu"),
            Self::Elu => f.write_str("elu"),
            Self::MaxK { k } => write!(f, "maxk:{k}"),
        }
    }
}

/// Everything needed to rebuild a model (not its weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Layer type.
    pub kind: ConvKind,
    /// Input feature width.
    pub in_dim: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Number of classes (output width).
    pub out_dim: usize,
    /// Number of layers (>= 1).
    pub layers: usize,
    /// Dropout on hidden representations.
    pub dropout: f32,
    /// Dropout on the input features (Kipf's GCN uses the same rate as hidden).
    pub input_dropout: f32,
    /// Non-linearity.
    pub activation: Activation,
    /// LayerNorm after each hidden layer, before the activation.
    pub layer_norm: bool,
    /// Residual connections: each hidden layer after the first (same input and output width)
    /// adds its input to its output, after activation and dropout.
    #[serde(default)]
    pub residual: bool,
    /// GIN: LayerNorm inside each layer's MLP, after the first linear and the aggregation
    /// (`Lin -> LN -> ReLU -> Lin`), where PyG's GIN examples put BatchNorm. It removes the
    /// sum's degree-proportional scale, which keeps deep GIN from diverging on graphs of
    /// hundreds of neighbours per node.
    #[serde(default)]
    pub mlp_norm: bool,
    /// MaxK: the first layer runs as the ReLU model's (aggregate, then ReLU and dropout) and
    /// MaxK starts at the second. The first aggregation then sees the whole input (it averages
    /// feature noise before any selection) and can be computed once per run
    /// ([`crate::Gnn::input_aggregate`]).
    #[serde(default)]
    pub maxk_after_first: bool,
    /// GAT and transformer: attention heads of the hidden layers (`hidden` must be a multiple).
    #[serde(default = "one")]
    pub heads: usize,
    /// GAT and transformer: dropout on the attention coefficients.
    #[serde(default)]
    pub att_dropout: f32,
}

fn one() -> usize {
    1
}

/// `cols` rounded up to a multiple of 8: the feature width at which every row of a bf16,
/// f16 or f32 feature matrix starts 16-byte aligned, which cuBLAS needs for its fast kernels.
/// The trainer pads the input features to it on CUDA (zero columns); the models take both
/// widths ([`ModelConfig::accepts_input_width`]).
pub fn aligned_width(cols: usize) -> usize {
    cols.div_ceil(8) * 8
}

impl ModelConfig {
    /// A config with the usual defaults: ReLU, no LayerNorm, dropout on
    /// hidden and input.
    pub fn new(
        kind: ConvKind,
        in_dim: usize,
        hidden: usize,
        out_dim: usize,
        layers: usize,
        dropout: f32,
    ) -> Self {
        Self {
            kind,
            in_dim,
            hidden,
            out_dim,
            layers,
            dropout,
            input_dropout: dropout,
            activation: Activation::Relu,
            layer_norm: false,
            residual: false,
            mlp_norm: false,
            maxk_after_first: false,
            heads: 1,
            att_dropout: 0.0,
        }
    }

    /// Whether the model takes input rows `cols` wide: `in_dim`, or [`aligned_width`] of it
    /// (features padded with zero columns; the first layer's weights meet them with zeros).
    /// The model cannot tell padding from real columns: the trainer checks the dataset's own
    /// width (`gnn_train::DeviceData::features`) against `in_dim`.
    pub fn accepts_input_width(&self, cols: usize) -> bool {
        cols == self.in_dim || cols == aligned_width(self.in_dim)
    }

    /// Checks the numbers.
    pub fn validate(&self) -> Result<()> {
        if self.layers == 0 {
            return Err(Error::Config("layers must be >= 1".into()));
        }
        if self.in_dim == 0 || self.out_dim == 0 || (self.layers > 1 && self.hidden == 0) {
            return Err(Error::Config(format!(
                "widths must be positive (in {}, hidden {}, out {})",
                self.in_dim, self.hidden, self.out_dim
            )));
        }
        if let Activation::MaxK { k } = self.activation {
            if !matches!(
                self.kind,
                ConvKind::Gcn | ConvKind::SageMean | ConvKind::Gin
            ) {
                return Err(Error::Config(format!(
                    "MaxK needs a GCN, GraphSAGE-mean or GIN model, not {}",
                    self.kind
                )));
            }
            if k == 0 || k > self.hidden || self.hidden > gnn_kernels::ops::maxk::MAX_WIDTH {
                return Err(Error::Config(format!(
                    "MaxK k = {k} must be in 1..=hidden ({}), hidden <= {}",
                    self.hidden,
                    gnn_kernels::ops::maxk::MAX_WIDTH
                )));
            }
        }
        if self.maxk_after_first && !matches!(self.activation, Activation::MaxK { .. }) {
            return Err(Error::Config(
                "maxk_after_first (the first layer as ReLU's, MaxK from the second) needs the \
                 MaxK activation"
                    .into(),
            ));
        }
        if self.mlp_norm && self.kind != ConvKind::Gin {
            return Err(Error::Config(format!(
                "mlp_norm (a LayerNorm inside GIN's MLP) applies to GIN only; {} has no MLP",
                self.kind
            )));
        }
        let attention = matches!(self.kind, ConvKind::Gat | ConvKind::Transformer);
        if attention && self.hidden.checked_rem(self.heads) != Some(0) {
            return Err(Error::Config(format!(
                "{}: hidden {} must be a positive multiple of heads {}",
                self.kind, self.hidden, self.heads
            )));
        }
        for (name, p) in [
            ("dropout", self.dropout),
            ("input_dropout", self.input_dropout),
            ("att_dropout", self.att_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(Error::Config(format!("{name} {p} must be in [0, 1)")));
            }
        }
        Ok(())
    }

    /// `(in, out)` widths of layer `l`.
    pub fn layer_dims(&self, l: usize) -> (usize, usize) {
        let i = if l == 0 { self.in_dim } else { self.hidden };
        let o = if l + 1 == self.layers {
            self.out_dim
        } else {
            self.hidden
        };
        (i, o)
    }
}
