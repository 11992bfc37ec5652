//! Node features as files and on the device, in f32 or INT8 (AES-SpMM's quantisation).
//!
//! File format (safetensors, header metadata `format = gnn-features-v1`):
//! - f32: tensor `features` `[N, F]` f32, metadata `encoding = f32`;
//! - INT8: `features.codes` `[N, F]` u8, `features.scale` `[F]` f32, `features.min` `[F]` f32,
//!   metadata `encoding = int8` (see [`gnn_kernels::QuantizedFeatures`] for the map).
//!
//! Loading is split in the three steps the inference breakdown reports: reading the file
//! ([`HostFeatures::load`]), the host-to-device copy and the on-device dequantisation
//! ([`HostFeatures::upload`], timed apart in [`LoadTimes`]).

use crate::error::{Error, Result};
use candle_core::{DType, Device, Tensor};
use gnn_graph::Dataset;
use gnn_kernels::QuantizedFeatures;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

const FORMAT: &str = "gnn-features-v1";

/// Features held in host memory, ready to upload.
#[derive(Debug, Clone)]
pub enum HostFeatures {
    /// f32 `[N, F]` (a CPU tensor).
    F32(Tensor),
    /// INT8 codes `[N, F]` u8 with per-feature `scale` and `min` (`[F]` f32), CPU tensors.
    Int8 {
        /// Codes.
        codes: Tensor,
        /// Per-feature step.
        scale: Tensor,
        /// Per-feature minimum.
        min: Tensor,
    },
}

/// Where feature loading time goes (beside reading the file).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct LoadTimes {
    /// Host-to-device copy (synchronised).
    pub h2d: Duration,
    /// Dequantisation on the device (zero for f32).
    pub dequant: Duration,
    /// Bytes copied to the device.
    pub bytes: usize,
}

impl HostFeatures {
    /// The dataset's features as dense f32 (`row_normalize`: divide each row by its sum, the
    /// GCN preprocessing the trainer applies).
    pub fn from_dataset(ds: &Dataset, row_normalize: bool) -> Result<Self> {
        let mut f = ds.features.clone();
        if row_normalize {
            f.row_normalize();
        }
        let d = f.to_dense();
        Ok(Self::F32(Tensor::from_vec(
            d.data,
            (d.rows, d.cols),
            &Device::Cpu,
        )?))
    }

    /// INT8 copy of f32 features (INT8 features are returned as they are).
    pub fn quantize(&self) -> Result<Self> {
        match self {
            Self::F32(x) => {
                let (rows, cols) = x.dims2()?;
                let data: Vec<f32> = x.flatten_all()?.to_vec1()?;
                let q = QuantizedFeatures::quantize(&data, rows, cols)?;
                let cpu = Device::Cpu;
                Ok(Self::Int8 {
                    codes: Tensor::from_vec(q.codes, (rows, cols), &cpu)?,
                    scale: Tensor::from_vec(q.scale, cols, &cpu)?,
                    min: Tensor::from_vec(q.min, cols, &cpu)?,
                })
            }
            q @ Self::Int8 { .. } => Ok(q.clone()),
        }
    }

    /// `(N, F)`.
    pub fn dims(&self) -> Result<(usize, usize)> {
        Ok(match self {
            Self::F32(x) => x.dims2()?,
            Self::Int8 { codes, .. } => codes.dims2()?,
        })
    }

    /// `"f32"` or `"int8"`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Self::F32(_) => "f32",
            Self::Int8 { .. } => "int8",
        }
    }

    /// Bytes that travel to the device.
    pub fn bytes(&self) -> usize {
        match self {
            Self::F32(x) => x.elem_count() * 4,
            Self::Int8 { codes, scale, min } => {
                codes.elem_count() + 4 * (scale.elem_count() + min.elem_count())
            }
        }
    }

    /// Writes the features to a safetensors file (format in the module docs).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let meta = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("encoding".to_string(), self.encoding().to_string()),
        ]);
        let tensors: Vec<(&str, &Tensor)> = match self {
            Self::F32(x) => vec![("features", x)],
            Self::Int8 { codes, scale, min } => vec![
                ("features.codes", codes),
                ("features.scale", scale),
                ("features.min", min),
            ],
        };
        safetensors::serialize_to_file(tensors, Some(meta), path).map_err(|e| Error::File {
            path: path.display().to_string(),
            problem: e.to_string(),
        })
    }

    /// Reads a file written by [`HostFeatures::save`], checking names, dtypes and shapes.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bad = |problem: String| Error::File {
            path: path.display().to_string(),
            problem,
        };
        let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let md = crate::checkpoint::metadata_of_format(&bytes, FORMAT, "").map_err(bad)?;
        let mut t = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
            .map_err(|e| bad(e.to_string()))?;
        let mut take = |name: &str, dtype: DType, rank: usize| -> Result<Tensor> {
            let x = t
                .remove(name)
                .ok_or_else(|| bad(format!("missing tensor `{name}`")))?;
            if x.dtype() != dtype || x.rank() != rank {
                return Err(bad(format!(
                    "tensor `{name}` is {:?} {:?}, expected rank {rank} {dtype:?}",
                    x.dtype(),
                    x.dims()
                )));
            }
            Ok(x)
        };
        // NaN/Inf would poison every row it aggregates into: refuse them, naming the place.
        let finite = |name: &str, x: &Tensor| -> Result<()> {
            let cols = x.dims().last().copied().unwrap_or(1).max(1);
            let v = x.flatten_all()?.to_vec1::<f32>()?;
            match v.iter().position(|x| !x.is_finite()) {
                None => Ok(()),
                Some(p) if x.rank() == 2 => Err(bad(format!(
                    "tensor `{name}` holds {} at node {} feature {} (values must be finite)",
                    v[p],
                    p / cols,
                    p % cols
                ))),
                Some(p) => Err(bad(format!(
                    "tensor `{name}` holds {} at feature {p} (values must be finite)",
                    v[p]
                ))),
            }
        };
        match md.get("encoding").map(String::as_str) {
            Some("f32") => {
                let x = take("features", DType::F32, 2)?;
                finite("features", &x)?;
                Ok(Self::F32(x))
            }
            Some("int8") => {
                let codes = take("features.codes", DType::U8, 2)?;
                let scale = take("features.scale", DType::F32, 1)?;
                let min = take("features.min", DType::F32, 1)?;
                let f = codes.dim(1)?;
                for (name, v) in [("features.scale", &scale), ("features.min", &min)] {
                    if v.dim(0)? != f {
                        return Err(bad(format!(
                            "tensor `{name}` has {} entries for {f} features",
                            v.dim(0)?
                        )));
                    }
                    finite(name, v)?;
                }
                Ok(Self::Int8 { codes, scale, min })
            }
            other => Err(bad(format!(
                "metadata `encoding` is {other:?}, expected `f32` or `int8`"
            ))),
        }
    }

    /// f32 features `[N, F]` on `device`: the copy, then (INT8) dequantisation on the device,
    /// each synchronised and timed.
    pub fn upload(&self, device: &Device) -> Result<(Tensor, LoadTimes)> {
        let mut times = LoadTimes {
            bytes: self.bytes(),
            ..Default::default()
        };
        device.synchronize()?;
        let t0 = Instant::now();
        let x = match self {
            Self::F32(x) => {
                let x = x.to_device(device)?;
                device.synchronize()?;
                times.h2d = t0.elapsed();
                x
            }
            Self::Int8 { codes, scale, min } => {
                let (c, s, m) = (
                    codes.to_device(device)?,
                    scale.to_device(device)?,
                    min.to_device(device)?,
                );
                device.synchronize()?;
                times.h2d = t0.elapsed();
                let t1 = Instant::now();
                let x = gnn_kernels::dequantize(&c, &s, &m)?;
                device.synchronize()?;
                times.dequant = t1.elapsed();
                x
            }
        };
        Ok((x, times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_cora as cora;

    #[test]
    fn files_round_trip_in_both_encodings() {
        let dir = tempfile::tempdir().unwrap();
        let f = HostFeatures::from_dataset(&cora(), true).unwrap();
        let q = f.quantize().unwrap();
        assert_eq!(q.dims().unwrap(), (2708, 1433));
        assert!(q.bytes() * 3 < f.bytes());
        for (h, name) in [(&f, "f.safetensors"), (&q, "q.safetensors")] {
            let p = dir.path().join(name);
            h.save(&p).unwrap();
            let back = HostFeatures::load(&p).unwrap();
            assert_eq!(back.encoding(), h.encoding());
            let (a, _) = h.upload(&Device::Cpu).unwrap();
            let (b, t) = back.upload(&Device::Cpu).unwrap();
            assert_eq!(t.bytes, h.bytes());
            let d = (a - b).unwrap().abs().unwrap().max_all().unwrap();
            assert_eq!(d.to_scalar::<f32>().unwrap(), 0.0);
        }
        // INT8 stays within half a step of the f32 features.
        let (a, _) = f.upload(&Device::Cpu).unwrap();
        let (b, _) = q.upload(&Device::Cpu).unwrap();
        let d = (a - b).unwrap().abs().unwrap().max_all().unwrap();
        let HostFeatures::Int8 { scale, .. } = &q else {
            unreachable!()
        };
        let step = scale.max_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(d.to_scalar::<f32>().unwrap() <= step * 0.5 + 1e-6);
    }

    #[test]
    fn bad_files_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk.safetensors");
        std::fs::write(&p, b"not a safetensors file").unwrap();
        let e = HostFeatures::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("junk.safetensors") && e.contains("not a safetensors"),
            "{e}"
        );

        // Right container, wrong content.
        let x = Tensor::zeros((2, 3), DType::F32, &Device::Cpu).unwrap();
        let meta = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("encoding".to_string(), "int8".to_string()),
        ]);
        safetensors::serialize_to_file([("features", &x)], Some(meta), &p).unwrap();
        let e = HostFeatures::load(&p).unwrap_err().to_string();
        assert!(e.contains("missing tensor `features.codes`"), "{e}");

        safetensors::serialize_to_file([("features", &x)], None, &p).unwrap();
        let e = HostFeatures::load(&p).unwrap_err().to_string();
        assert!(e.contains("format"), "{e}");

        let e = HostFeatures::load(dir.path().join("absent")).unwrap_err();
        assert!(e.to_string().contains("absent"));
    }
}
