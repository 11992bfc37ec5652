//! INT8 feature quantisation (AES-SpMM, Song et al. 2025): input features stored as one byte
//! per value with a per-feature (column) affine map, so that loading them to the device moves a
//! quarter of the f32 bytes; the device turns them back into f32 before the first layer.
//!
//! For feature `j` with range `[min_j, max_j]` over all nodes, `scale_j = (max_j - min_j) / 255`
//! and `code = round((x - min_j) / scale_j)` in `0..=255`; dequantisation is
//! `x' = code * scale_j + min_j` (rounded product, then rounded sum: no fused multiply-add, so
//! CPU and GPU give identical bits). `|x - x'| <= scale_j / 2` (plus f32 rounding); a constant
//! feature has `scale_j = 0` and is reproduced exactly.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use super::cpu_slice;
use crate::error::{Error, Result};
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

/// Host-side INT8 features: row-major codes `[rows, cols]` and per-column `scale`, `min`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedFeatures {
    /// Number of nodes.
    pub rows: usize,
    /// Number of features.
    pub cols: usize,
    /// Codes, row-major, `rows * cols`.
    pub codes: Vec<u8>,
    /// Per-feature step `(max - min) / 255`.
    pub scale: Vec<f32>,
    /// Per-feature minimum.
    pub min: Vec<f32>,
}

impl QuantizedFeatures {
    /// Quantises row-major `data` (`rows * cols` finite values).
    pub fn quantize(data: &[f32], rows: usize, cols: usize) -> Result<Self> {
        let bad = |what: String| Err(Error::shape("quantize", what));
        if rows.checked_mul(cols) != Some(data.len()) {
            return bad(format!(
                "{} values for a {rows} x {cols} feature matrix",
                data.len()
            ));
        }
        if let Some(p) = data.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "quantize",
                format!(
                    "feature ({}, {}) is {} (quantisation needs finite values)",
                    p / cols.max(1),
                    p % cols.max(1),
                    data[p]
                ),
            ));
        }
        let (scale, min, codes) = cpu::quantize(data, rows, cols);
        Ok(Self {
            rows,
            cols,
            codes,
            scale,
            min,
        })
    }

    /// Checks that the parts agree in size.
    pub fn validate(&self) -> Result<()> {
        let ok = self.rows.checked_mul(self.cols) == Some(self.codes.len())
            && self.scale.len() == self.cols
            && self.min.len() == self.cols;
        if ok {
            Ok(())
        } else {
            Err(Error::shape(
                "dequantize",
                format!(
                    "{} codes, {} scales, {} minima for {} x {} features",
                    self.codes.len(),
                    self.scale.len(),
                    self.min.len(),
                    self.rows,
                    self.cols
                ),
            ))
        }
    }

    /// Dequantised values on the host.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        self.validate()?;
        Ok(cpu::dequantize(&self.codes, &self.scale, &self.min))
    }
}

/// `[N, F]` f32 from u8 codes `[N, F]` and per-feature `scale`, `min` (`[F]` f32), on the
/// codes' device (one pass on the GPU). Inference only: no gradient.
pub fn dequantize(codes: &Tensor, scale: &Tensor, min: &Tensor) -> Result<Tensor> {
    const OP: &str = "dequantize";
    let (_, f) = codes.dims2().map_err(|_| {
        Error::shape(
            OP,
            format!("codes have shape {:?}, expected [N, F]", codes.dims()),
        )
    })?;
    if codes.dtype() != DType::U8 {
        return Err(Error::dtype(
            OP,
            format!("codes have dtype {:?}, expected u8", codes.dtype()),
        ));
    }
    for (what, t) in [("scale", scale), ("min", min)] {
        if t.dims() != [f] || t.dtype() != DType::F32 {
            return Err(Error::shape(
                OP,
                format!(
                    "{what} is {:?} {:?}, expected [{f}] f32",
                    t.dims(),
                    t.dtype()
                ),
            ));
        }
        if !t.device().same_device(codes.device()) {
            return Err(Error::shape(
                OP,
                format!("{what} is on another device than the codes"),
            ));
        }
    }
    Ok(codes.contiguous()?.apply_op3_no_bwd(
        &scale.contiguous()?,
        &min.contiguous()?,
        &Dequantize,
    )?)
}

struct Dequantize;

impl CustomOp3 for Dequantize {
    fn name(&self) -> &'static str {
        "dequantize"
    }
    fn cpu_fwd(
        &self,
        c: &CpuStorage,
        cl: &Layout,
        s: &CpuStorage,
        sl: &Layout,
        m: &CpuStorage,
        ml: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let codes = cpu_slice::<u8>("dequantize", c, cl)?;
        let scale = cpu_slice::<f32>("dequantize", s, sl)?;
        let min = cpu_slice::<f32>("dequantize", m, ml)?;
        let out = cpu::dequantize(codes, scale, min);
        Ok((CpuStorage::F32(out), cl.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        c: &CudaStorage,
        cl: &Layout,
        s: &CudaStorage,
        sl: &Layout,
        m: &CudaStorage,
        ml: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        cuda::dequantize((c, cl), (s, sl), (m, ml))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn lcg(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 2.0
            })
            .collect()
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        for (rows, cols) in [(0, 5), (1, 1), (7, 3), (100, 33), (257, 64)] {
            let mut x = lcg(rows * cols, rows as u64 + 7);
            if cols > 2 && rows > 0 {
                for r in 0..rows {
                    x[r * cols + 1] = 0.25; // a constant column
                }
            }
            let q = QuantizedFeatures::quantize(&x, rows, cols).unwrap();
            let y = q.dequantize().unwrap();
            for (p, (a, b)) in x.iter().zip(&y).enumerate() {
                let j = p % cols;
                let tol = q.scale[j] * 0.5 * (1.0 + 1e-5) + 1e-6;
                assert!((a - b).abs() <= tol, "({rows},{cols}) at {p}: {a} vs {b}");
            }
            if cols > 2 && rows > 0 {
                assert_eq!(q.scale[1], 0.0);
                assert!((0..rows).all(|r| y[r * cols + 1] == 0.25));
            }
            // The extremes of each column are hit exactly by codes 0 and 255.
            for j in 0..cols {
                let col = (0..rows).map(|r| q.codes[r * cols + j]);
                if rows > 0 && q.scale[j] > 0.0 {
                    assert_eq!(col.clone().min(), Some(0));
                    assert_eq!(col.max(), Some(255));
                }
            }
        }
    }

    #[test]
    fn op_matches_host_dequantisation() {
        let (rows, cols) = (50, 7);
        let x = lcg(rows * cols, 3);
        let q = QuantizedFeatures::quantize(&x, rows, cols).unwrap();
        let dev = Device::Cpu;
        let codes = Tensor::from_vec(q.codes.clone(), (rows, cols), &dev).unwrap();
        let s = Tensor::from_vec(q.scale.clone(), cols, &dev).unwrap();
        let m = Tensor::from_vec(q.min.clone(), cols, &dev).unwrap();
        let y = dequantize(&codes, &s, &m).unwrap();
        assert_eq!(y.dims(), &[rows, cols]);
        let y: Vec<f32> = y.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(y, q.dequantize().unwrap());
    }

    #[test]
    fn bad_inputs_are_rejected() {
        assert!(QuantizedFeatures::quantize(&[1.0, 2.0, 3.0], 2, 2).is_err());
        let e = QuantizedFeatures::quantize(&[1.0, f32::NAN], 1, 2).unwrap_err();
        assert!(e.to_string().contains("(0, 1)"), "{e}");
        let dev = Device::Cpu;
        let codes = Tensor::zeros((3, 2), DType::U8, &dev).unwrap();
        let s = Tensor::zeros(2, DType::F32, &dev).unwrap();
        let bad = Tensor::zeros(3, DType::F32, &dev).unwrap();
        assert!(dequantize(&codes, &s, &bad).is_err());
        let f = Tensor::zeros((3, 2), DType::F32, &dev).unwrap();
        assert!(dequantize(&f, &s, &s).is_err());
        let mut q = QuantizedFeatures::quantize(&[1.0, 2.0], 1, 2).unwrap();
        q.scale.pop();
        assert!(q.dequantize().is_err());
    }
}
