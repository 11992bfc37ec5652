//! CPU GAT aggregation: f64 inside; rayon over rows (lse, forward, rows pass) and over the
//! transpose's rows (columns pass), each task writing only its own row.

use crate::ops::dropout::cpu::keep;
use gnn_graph::Csr;
use rayon::prelude::*;

/// The dropout mask's parameters: hash seed, keep threshold and the kept scale `1 / (1 - p)`.
#[derive(Clone, Copy)]
pub(crate) struct Mask {
    pub seed: u64,
    pub threshold: u64,
    pub scale: f64,
}

/// The shape and the attention's constants: the op's plan, shared by every pass on both
/// devices.
#[derive(Clone, Copy)]
pub(crate) struct Heads {
    pub heads: usize,
    pub width: usize,
    pub slope: f64,
    pub mask: Option<Mask>,
}

impl Heads {
    fn leaky(&self, z: f64) -> f64 {
        if z > 0.0 {
            z
        } else {
            z * self.slope
        }
    }

    /// `LeakyReLU'(z)`.
    fn slope_at(&self, z: f64) -> f64 {
        if z > 0.0 {
            1.0
        } else {
            self.slope
        }
    }

    /// The dropout factor of edge `p`, head `h` (element `p * heads + h` of the mask).
    fn factor(&self, p: usize, h: usize) -> f64 {
        match self.mask {
            Some(m) if !keep(m.seed, (p * self.heads + h) as u64, m.threshold) => 0.0,
            Some(m) => m.scale,
            None => 1.0,
        }
    }

    /// `<a[h], b[h]>` over head `h`'s columns of two rows.
    fn dot(&self, a: &[f64], b: &[f64], h: usize) -> f64 {
        let c = h * self.width..(h + 1) * self.width;
        a[c.clone()].iter().zip(&b[c]).map(|(x, y)| x * y).sum()
    }
}

/// The softmax's row term `D[i, h] = <dout[i, h], out[i, h]>` (`dout` and `out` row-major
/// `[n_rows, heads * width]`).
pub(crate) fn row_term(dout: &[f64], out: &[f64], k: &Heads) -> Vec<f64> {
    let hf = k.heads * k.width;
    dout.par_chunks(hf.max(1))
        .zip(out.par_chunks(hf.max(1)))
        .flat_map_iter(|(d, o)| (0..k.heads).map(move |h| k.dot(d, o, h)))
        .collect()
}

/// `lse[i, h] = log sum_j exp(LeakyReLU(s_dst[i, h] + s_src[j, h]))` (0 for an empty row).
pub(crate) fn lse(csr: &Csr, s_dst: &[f64], s_src: &[f64], k: &Heads) -> Vec<f64> {
    let h = k.heads;
    let mut out = vec![0.0; csr.n_rows() * h];
    out.par_chunks_mut(h).enumerate().for_each(|(i, o)| {
        let row = csr.row(i);
        if row.is_empty() {
            return;
        }
        for (hh, o) in o.iter_mut().enumerate() {
            let e = |&j: &u32| k.leaky(s_dst[i * h + hh] + s_src[j as usize * h + hh]);
            let m = row.iter().map(e).fold(f64::NEG_INFINITY, f64::max);
            *o = m + row.iter().map(|j| (e(j) - m).exp()).sum::<f64>().ln();
        }
    });
    out
}

/// `out[i, hF + f] = sum_j alpha_ij,h xs[j, hF + f]`, alpha with its dropout factor.
pub(crate) fn forward(
    csr: &Csr,
    xs: &[f64],
    (s_dst, s_src, lse): (&[f64], &[f64], &[f64]),
    k: &Heads,
) -> Vec<f64> {
    let (h, hf) = (k.heads, k.heads * k.width);
    let mut out = vec![0.0; csr.n_rows() * hf];
    out.par_chunks_mut(hf.max(1))
        .enumerate()
        .for_each(|(i, o)| {
            for p in csr.row_range(i) {
                let j = csr.indices()[p] as usize;
                for hh in 0..h {
                    let z = s_dst[i * h + hh] + s_src[j * h + hh];
                    let a = (k.leaky(z) - lse[i * h + hh]).exp() * k.factor(p, hh);
                    let c = hh * k.width..(hh + 1) * k.width;
                    for (o, x) in o[c.clone()].iter_mut().zip(&xs[j * hf..][c]) {
                        *o += a * x;
                    }
                }
            }
        });
    out
}

/// The score gradient of one edge and head: `alpha LeakyReLU'(z) (mask <dout_i, xs_j> - D_i)`,
/// with `alpha` (before the mask) and the mask factor returned beside it.
struct EdgeGrad {
    ds: f64,
    alpha: f64,
    factor: f64,
}

/// The tensors both backward passes read.
pub(crate) struct Saved<'a> {
    pub xs: &'a [f64],
    pub s_dst: &'a [f64],
    pub s_src: &'a [f64],
    pub lse: &'a [f64],
    pub dterm: &'a [f64],
    pub dout: &'a [f64],
}

impl Saved<'_> {
    fn edge(&self, k: &Heads, (i, j, p, hh): (usize, usize, usize, usize)) -> EdgeGrad {
        let (h, hf) = (k.heads, k.heads * k.width);
        let z = self.s_dst[i * h + hh] + self.s_src[j * h + hh];
        let alpha = (k.leaky(z) - self.lse[i * h + hh]).exp();
        let factor = k.factor(p, hh);
        let dot = k.dot(
            &self.dout[i * hf..(i + 1) * hf],
            &self.xs[j * hf..(j + 1) * hf],
            hh,
        );
        let ds = alpha * k.slope_at(z) * (factor * dot - self.dterm[i * h + hh]);
        EdgeGrad { ds, alpha, factor }
    }
}

/// `ds_dst[i, h]`: the row sums of the score gradients.
pub(crate) fn backward_rows(csr: &Csr, s: &Saved, k: &Heads) -> Vec<f64> {
    let h = k.heads;
    let mut out = vec![0.0; csr.n_rows() * h];
    out.par_chunks_mut(h).enumerate().for_each(|(i, o)| {
        for p in csr.row_range(i) {
            let j = csr.indices()[p] as usize;
            for (hh, o) in o.iter_mut().enumerate() {
                *o += s.edge(k, (i, j, p, hh)).ds;
            }
        }
    });
    out
}

/// `(dxs, ds_src)` over the transpose `t` (`pos[q]`: the graph's position of transposed edge
/// `q`): `dxs[j] = sum_i alpha mask dout[i]` and the column sums of the score gradients.
pub(crate) fn backward_cols(t: &Csr, pos: &[u32], s: &Saved, k: &Heads) -> (Vec<f64>, Vec<f64>) {
    let (h, w, hf) = (k.heads, k.width, k.heads * k.width);
    let n = t.n_rows();
    let mut dxs = vec![0.0; n * hf];
    let mut ds_src = vec![0.0; n * h];
    dxs.par_chunks_mut(hf.max(1))
        .zip(ds_src.par_chunks_mut(h))
        .enumerate()
        .for_each(|(j, (dx, ds))| {
            for q in t.row_range(j) {
                let (i, p) = (t.indices()[q] as usize, pos[q] as usize);
                for (hh, ds) in ds.iter_mut().enumerate() {
                    let e = s.edge(k, (i, j, p, hh));
                    *ds += e.ds;
                    let a = e.alpha * e.factor;
                    let c = hh * w..(hh + 1) * w;
                    for (d, g) in dx[c.clone()].iter_mut().zip(&s.dout[i * hf..][c]) {
                        *d += a * g;
                    }
                }
            }
        });
    (dxs, ds_src)
}
