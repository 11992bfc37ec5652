//! Seeded dropout for training: each call draws the next mask seed of a counter-based stream
//! and applies [`gnn_kernels::dropout`], whose mask is a pure function of (seed, element) on
//! every device. The whole state is `(seed, calls)`, so a checkpoint restores it exactly.

use crate::error::Result;
use candle_core::Tensor;
use gnn_kernels::{LinearProduct, MaxkProduct};
use serde::{Deserialize, Serialize};

/// A reproducible source of dropout masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropoutRng {
    /// The stream's seed.
    pub seed: u64,
    /// Masks drawn so far.
    pub calls: u64,
    /// The global index of the first row this stream's tensors hold (one rank's rows of a
    /// partitioned graph; 0 on one device). The masks are those of the whole tensor's rows
    /// from here on, so a multi-device run drops exactly what a single-device run does.
    #[serde(default)]
    pub row_offset: u64,
}

impl DropoutRng {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            calls: 0,
            row_offset: 0,
        }
    }

    /// The same stream for tensors whose row 0 is global row `row_offset`.
    pub fn with_row_offset(mut self, row_offset: u64) -> Self {
        self.row_offset = row_offset;
        self
    }

    /// The next mask seed, shifted to element `row_offset * cols` of `x` (`[rows, cols]`):
    /// a mask is `keep(seed + i * G)` over the element index `i`, so starting at element `o`
    /// is starting at index 0 with seed `seed + o * G`.
    fn next_seed_for(&mut self, x: &Tensor) -> u64 {
        self.next_seed_for_cols(x.dims().last().copied().unwrap_or(1))
    }

    /// [`Self::next_seed_for`] a tensor of `cols` columns.
    fn next_seed_for_cols(&mut self, cols: usize) -> u64 {
        let cols = cols as u64;
        self.next_seed().wrapping_add(
            self.row_offset
                .wrapping_mul(cols)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    }

    /// The seed of the next mask (splitmix64 of the stream position).
    fn next_seed(&mut self) -> u64 {
        let mut z = self.seed.wrapping_add(
            self.calls
                .wrapping_add(1)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        self.calls += 1;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `dropout(relu(x), p)` fused into one pass each way ([`gnn_kernels::relu_dropout`]),
    /// drawing the same mask seed [`Self::dropout`] would: identical values to ReLU then
    /// dropout, and the same stream position afterwards.
    pub fn relu_dropout(&mut self, x: &Tensor, p: f32) -> Result<Tensor> {
        if p <= 0.0 {
            return Ok(x.relu()?);
        }
        let seed = self.next_seed_for(x);
        Ok(gnn_kernels::relu_dropout(x, p, seed)?)
    }

    /// `dropout(relu(x + b), p)` fused into one pass each way
    /// ([`gnn_kernels::bias_relu_dropout`], `b` broadcast over the rows), drawing the mask seed
    /// [`Self::relu_dropout`] would.
    pub fn bias_relu_dropout(&mut self, x: &Tensor, b: &Tensor, p: f32) -> Result<Tensor> {
        let seed = if p <= 0.0 { 0 } else { self.next_seed_for(x) };
        Ok(gnn_kernels::bias_relu_dropout(x, b, p.max(0.0), seed)?)
    }

    /// `dropout(elu(x + b), p)` fused into one pass each way
    /// ([`gnn_kernels::bias_elu_dropout`], `b` broadcast over the rows), drawing the mask seed
    /// [`Self::dropout`] of the activation would.
    pub fn bias_elu_dropout(&mut self, x: &Tensor, b: &Tensor, p: f32) -> Result<Tensor> {
        let seed = if p <= 0.0 { 0 } else { self.next_seed_for(x) };
        Ok(gnn_kernels::bias_elu_dropout(x, b, p.max(0.0), seed)?)
    }

    /// [`Self::bias_relu_dropout`] outside the autograd graph, with its mask as bits for the
    /// caller's backward ([`gnn_kernels::bias_relu_dropout_untracked`]): the same mask seed,
    /// values and stream position.
    pub fn bias_relu_dropout_untracked(
        &mut self,
        z: &Tensor,
        b: &Tensor,
        p: f32,
    ) -> Result<(Tensor, gnn_kernels::EpilogueMask)> {
        self.add_bias_relu_dropout_untracked(z, None, b, p)
    }

    /// [`Self::bias_relu_dropout_untracked`] of `z + q` where `q` is given, the add in the
    /// same pass ([`gnn_kernels::add_bias_relu_dropout_untracked`]): the same mask seed.
    pub fn add_bias_relu_dropout_untracked(
        &mut self,
        z: &Tensor,
        q: Option<&Tensor>,
        b: &Tensor,
        p: f32,
    ) -> Result<(Tensor, gnn_kernels::EpilogueMask)> {
        let seed = if p <= 0.0 { 0 } else { self.next_seed_for(z) };
        Ok(gnn_kernels::add_bias_relu_dropout_untracked(
            z,
            q,
            b,
            p.max(0.0),
            seed,
        )?)
    }

    /// `dropout(relu(x wᵀ + b), p)` of a product not yet in the autograd graph
    /// ([`gnn_kernels::LinearProduct::bias_relu_dropout`]: the product is not kept for the
    /// backward), drawing the mask seed [`Self::bias_relu_dropout`] would on the product. With
    /// `residual`, the product's input is added in the same pass
    /// ([`LinearProduct::bias_relu_dropout_residual`]); the same mask.
    pub fn linear_bias_relu_dropout(
        &mut self,
        z: LinearProduct,
        b: &Tensor,
        p: f32,
        residual: bool,
    ) -> Result<Tensor> {
        let seed = self.linear_seed(&z, p);
        Ok(if residual {
            z.bias_relu_dropout_residual(b, p.max(0.0), seed)?
        } else {
            z.bias_relu_dropout(b, p.max(0.0), seed)?
        })
    }

    /// The mask seed of a [`LinearProduct`]'s epilogue at rate `p` (that of
    /// [`Self::bias_relu_dropout`] on the product); none drawn when nothing is dropped.
    fn linear_seed(&mut self, z: &LinearProduct, p: f32) -> u64 {
        if p <= 0.0 {
            0
        } else {
            self.next_seed_for_cols(z.out_dim())
        }
    }

    /// Dropout of a [`MaxkProduct`]'s kept values at rate `p` ([`MaxkProduct::dropout`]),
    /// drawing the mask seed [`Self::dropout`] would on the `[N, k]` values: the same mask as
    /// the composed layer's.
    pub fn maxk_dropout(&mut self, m: MaxkProduct, p: f32) -> Result<MaxkProduct> {
        if p <= 0.0 {
            return Ok(m);
        }
        let seed = self.next_seed_for_cols(m.cbsr().k());
        Ok(m.dropout(p, seed)?)
    }

    /// [`Self::dropout`] of `x` as elements `offset..` of a longer tensor (in row-major
    /// order): the mask the whole tensor's dropout draws there, whatever the row offset. An
    /// attention layer's per-edge coefficients on a partitioned graph are such a range of the
    /// whole graph's ([`crate::ModelGraph::edge_offset`]); offset 0 on one device is
    /// [`Self::dropout`] there.
    pub fn dropout_at(&mut self, x: &Tensor, p: f32, offset: u64) -> Result<Tensor> {
        if p <= 0.0 {
            return Ok(x.clone());
        }
        let seed = self.seed_at(offset);
        Ok(gnn_kernels::dropout(x, p, seed)?)
    }

    /// The next call's mask seed shifted to element `offset` of a longer tensor, for a kernel
    /// that draws the mask itself ([`gnn_kernels::gat_aggregate`]): element `i` of that
    /// kernel's mask is then element `offset + i` of the whole tensor's, as in
    /// [`Self::dropout_at`].
    pub fn seed_at(&mut self, offset: u64) -> u64 {
        self.next_seed()
            .wrapping_add(offset.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// Inverted dropout: zeroes each entry with probability `p`, scales the rest by `1/(1-p)`.
    pub fn dropout(&mut self, x: &Tensor, p: f32) -> Result<Tensor> {
        if p <= 0.0 {
            return Ok(x.clone());
        }
        let seed = self.next_seed_for(x);
        Ok(gnn_kernels::dropout(x, p, seed)?)
    }
}
