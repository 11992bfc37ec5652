//! Reading and writing `.npz` archives (numpy's `savez`/`savez_compressed`, scipy's
//! `save_npz`) through the `zip` and `npyz` crates.

use crate::error::{Error, Result};
use npyz::{TypeChar, WriterBuilder};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Typed contents of one `.npy` member.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    /// `f4`, and `f2` (half precision) widened exactly on reading: the datasets' features
    /// are f32 on the host, and a half-precision run narrows them on the device.
    F32(Vec<f32>),
    /// `f8`.
    F64(Vec<f64>),
    /// Any signed integer width, widened.
    I64(Vec<i64>),
    /// Any unsigned integer width, widened.
    U64(Vec<u64>),
    /// `b1`.
    Bool(Vec<bool>),
}

/// One array: shape + row-major data.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// Shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: NpyData,
}

impl NpyArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            NpyData::F32(v) => v.len(),
            NpyData::F64(v) => v.len(),
            NpyData::I64(v) => v.len(),
            NpyData::U64(v) => v.len(),
            NpyData::Bool(v) => v.len(),
        }
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Values as f32 (integers converted).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            NpyData::F32(v) => v.clone(),
            NpyData::F64(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::I64(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::U64(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::Bool(v) => v.iter().map(|&x| x as u8 as f32).collect(),
        }
    }
    /// The `[nodes, features]` matrix of a 2-D array (values as f32); an error naming `path`
    /// and `field` for any other shape.
    pub fn to_dense_matrix(&self, path: &Path, field: &str) -> Result<crate::DenseMatrix> {
        let &[n, dim] = self.shape.as_slice() else {
            return Err(Error::format(
                path,
                field,
                format!("shape {:?}, expected [nodes, features]", self.shape),
            ));
        };
        crate::DenseMatrix::new(n, dim, self.to_f32())
    }

    /// Values as i64; `Err(position)` at the first float that is not an integer.
    pub fn to_i64(&self) -> std::result::Result<Vec<i64>, usize> {
        let from_float = |v: &mut dyn Iterator<Item = f64>| {
            v.enumerate()
                .map(|(k, x)| {
                    if x.fract() == 0.0 && x.is_finite() {
                        Ok(x as i64)
                    } else {
                        Err(k)
                    }
                })
                .collect()
        };
        match &self.data {
            NpyData::F32(v) => from_float(&mut v.iter().map(|&x| x as f64)),
            NpyData::F64(v) => from_float(&mut v.iter().copied()),
            NpyData::I64(v) => Ok(v.clone()),
            NpyData::U64(v) => v
                .iter()
                .enumerate()
                .map(|(k, &x)| i64::try_from(x).map_err(|_| k))
                .collect(),
            NpyData::Bool(v) => Ok(v.iter().map(|&x| x as i64).collect()),
        }
    }

    /// Values as CSR row offsets at the narrowest width for the largest (`u32` up to
    /// `u32::MAX`, `u64` beyond); errors name `path`, `field` and the first negative or
    /// non-integer entry. Order and range are the CSR's checks.
    pub fn to_offsets(&self, path: &Path, field: &str) -> Result<crate::csr::RowPtr> {
        let v = self
            .to_i64()
            .map_err(|k| Error::format(path, field, format!("entry {k} is not an integer")))?;
        if let Some(k) = v.iter().position(|&x| x < 0) {
            return Err(Error::format(
                path,
                field,
                format!("entry {k} = {} is a negative offset", v[k]),
            ));
        }
        let max = v.iter().copied().max().unwrap_or(0) as u64;
        Ok(if max <= u32::MAX as u64 {
            crate::csr::RowPtr::U32(v.iter().map(|&x| x as u32).collect())
        } else {
            crate::csr::RowPtr::U64(v.iter().map(|&x| x as u64).collect())
        })
    }

    /// Values as `u32` node ids (or small offsets), each below `bound` when given; errors
    /// name `path`, `field` and the first bad entry.
    pub fn to_ids(&self, path: &Path, field: &str, bound: Option<usize>) -> Result<Vec<u32>> {
        let v = self
            .to_i64()
            .map_err(|k| Error::format(path, field, format!("entry {k} is not an integer")))?;
        v.iter()
            .enumerate()
            .map(|(k, &x)| match bound {
                Some(b) if x < 0 || x as u64 >= b as u64 => Err(Error::format(
                    path,
                    field,
                    format!("entry {k} = {x} is outside 0..{b}"),
                )),
                _ => u32::try_from(x).map_err(|_| {
                    Error::format(
                        path,
                        field,
                        format!("entry {k} = {x} is not a 32-bit offset"),
                    )
                }),
            })
            .collect()
    }
}

/// An open `.npz` archive.
pub struct NpzArchive {
    path: PathBuf,
    zip: zip::ZipArchive<File>,
    /// The archive's length in bytes: no member's stored bytes can be more.
    len: u64,
}

impl NpzArchive {
    /// Opens an archive; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = f.metadata().map_err(|e| Error::io(&path, e))?.len();
        let zip = zip::ZipArchive::new(f).map_err(|e| {
            Error::format(
                &path,
                "<archive>",
                format!("not a valid npz (zip) archive: {e}"),
            )
        })?;
        Ok(Self { path, zip, len })
    }

    /// Array names (member names without `.npy`).
    pub fn names(&self) -> Vec<String> {
        self.zip
            .file_names()
            .flatten()
            .map(|n| n.strip_suffix(".npy").unwrap_or(&n).to_string())
            .collect()
    }

    /// Reads array `name`; the error names the file and the array.
    pub fn read(&mut self, name: &str) -> Result<NpyArray> {
        let path = self.path.clone();
        let member = format!("{name}.npy");
        let have = self.names().join(", ");
        let mut entry = self.zip.by_name(&member).map_err(|_| {
            Error::format(
                &path,
                name,
                format!("array missing from the archive (it has: {have})"),
            )
        })?;
        // Headers may claim any size: the buffer starts no larger than the archive itself and
        // grows as bytes arrive, and reading stops at the declared size. A member's bytes are
        // then at most the archive's length times deflate's 1032:1 ceiling.
        let declared = entry.size();
        let start = declared.min(entry.compressed_size()).min(self.len);
        let mut bytes = Vec::with_capacity(start as usize);
        (&mut entry)
            .take(declared)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::format(&path, name, format!("cannot decompress: {e}")))?;
        parse_npy(&bytes).map_err(|e| Error::format(&path, name, e))
    }
}

/// Parses one `.npy` byte buffer.
pub fn parse_npy(bytes: &[u8]) -> std::result::Result<NpyArray, String> {
    let npy = npyz::NpyFile::new(bytes).map_err(|e| format!("bad .npy header: {e}"))?;
    let fortran = npy.order() == npyz::Order::Fortran;
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err("structured dtypes are not supported".into());
    };
    // The header's shape must fit in the bytes that follow it before anything is decoded.
    let need = npy
        .shape()
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .and_then(|c| c.checked_mul(ts.size_field()));
    if need.is_none_or(|b| b > bytes.len() as u64) {
        return Err(format!(
            "header shape {:?} of {}-byte items needs more than the member's {} bytes",
            npy.shape(),
            ts.size_field(),
            bytes.len()
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let bad = |e: std::io::Error| format!("bad .npy data ({ts}): {e}");
    // Every width read as its own type, then widened exactly to the type it is kept as.
    fn widened<T: npyz::Deserialize, U: From<T>>(
        npy: npyz::NpyFile<&[u8]>,
    ) -> std::io::Result<Vec<U>> {
        Ok(npy.into_vec::<T>()?.into_iter().map(U::from).collect())
    }
    let data = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 2) => NpyData::F32(widened::<npyz::half::f16, _>(npy).map_err(bad)?),
        (TypeChar::Float, 4) => NpyData::F32(npy.into_vec().map_err(bad)?),
        (TypeChar::Float, 8) => NpyData::F64(npy.into_vec().map_err(bad)?),
        (TypeChar::Int, 1) => NpyData::I64(widened::<i8, _>(npy).map_err(bad)?),
        (TypeChar::Int, 2) => NpyData::I64(widened::<i16, _>(npy).map_err(bad)?),
        (TypeChar::Int, 4) => NpyData::I64(widened::<i32, _>(npy).map_err(bad)?),
        (TypeChar::Int, 8) => NpyData::I64(npy.into_vec().map_err(bad)?),
        (TypeChar::Uint, 1) => NpyData::U64(widened::<u8, _>(npy).map_err(bad)?),
        (TypeChar::Uint, 2) => NpyData::U64(widened::<u16, _>(npy).map_err(bad)?),
        (TypeChar::Uint, 4) => NpyData::U64(widened::<u32, _>(npy).map_err(bad)?),
        (TypeChar::Uint, 8) => NpyData::U64(npy.into_vec().map_err(bad)?),
        (TypeChar::Bool, 1) => NpyData::Bool(npy.into_vec().map_err(bad)?),
        _ => return Err(format!("dtype {ts} is not supported")),
    };
    let mut a = NpyArray { shape, data };
    if Some(a.len()) != a.shape.iter().try_fold(1usize, |p, &d| p.checked_mul(d)) {
        return Err(format!(
            "shape {:?} does not match {} values",
            a.shape,
            a.len()
        ));
    }
    if fortran && a.shape.len() == 2 {
        let (r, c) = (a.shape[0], a.shape[1]);
        fn t<T: Copy>(v: &[T], r: usize, c: usize) -> Vec<T> {
            (0..r * c).map(|k| v[(k % c) * r + k / c]).collect()
        }
        a.data = match &a.data {
            NpyData::F32(v) => NpyData::F32(t(v, r, c)),
            NpyData::F64(v) => NpyData::F64(t(v, r, c)),
            NpyData::I64(v) => NpyData::I64(t(v, r, c)),
            NpyData::U64(v) => NpyData::U64(t(v, r, c)),
            NpyData::Bool(v) => NpyData::Bool(t(v, r, c)),
        };
    }
    Ok(a)
}

/// Reads one standalone `.npy` file; errors name the file. The header's shape is checked
/// against the file's length before anything is allocated for the data.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_npy(&bytes).map_err(|e| Error::format(path, "<npy>", e))
}

/// A `.npy` file of half floats, byte for byte as `np.save(f, x.astype(np.float16))` writes
/// it (version 1.0 header padded to 64 bytes), little- or big-endian (`'<f2'` / `'>f2'`):
/// fixtures for the half-precision reading of [`parse_npy`] (the crate writes no f16 itself).
#[doc(hidden)]
pub fn f16_npy_bytes(shape: &[usize], bits: &[u16], big_endian: bool) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let dims = if dims.len() == 1 {
        format!("{},", dims[0])
    } else {
        dims.join(", ")
    };
    let order = if big_endian { '>' } else { '<' };
    let mut header =
        format!("{{'descr': '{order}f2', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    for b in bits {
        out.extend(if big_endian {
            b.to_be_bytes()
        } else {
            b.to_le_bytes()
        });
    }
    out
}

/// Writes one array as a standalone `.npy` file (`numpy.load` reads it).
pub fn write_npy(path: impl AsRef<Path>, a: &NpyArray) -> Result<()> {
    let path = path.as_ref();
    let bytes = npy_bytes(a).map_err(|e| Error::io(path, e))?;
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

fn npy_bytes(a: &NpyArray) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let shape: Vec<u64> = a.shape.iter().map(|&d| d as u64).collect();
    macro_rules! put {
        ($v:expr, $t:ty) => {{
            let mut wr = npyz::WriteOptions::<$t>::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut buf)
                .begin_nd()?;
            wr.extend($v.iter().copied())?;
            wr.finish()?;
        }};
    }
    match &a.data {
        NpyData::F32(v) => put!(v, f32),
        NpyData::F64(v) => put!(v, f64),
        NpyData::I64(v) => put!(v, i64),
        NpyData::U64(v) => put!(v, u64),
        NpyData::Bool(v) => put!(v, bool),
    }
    Ok(buf)
}

/// Writes arrays to an `.npz` (deflate-compressed when `compressed`), readable by
/// `numpy.load`. Tests use it to write fixtures in the exact formats of DGL and scipy.
pub fn write_npz(
    path: impl AsRef<Path>,
    arrays: &[(&str, &NpyArray)],
    compressed: bool,
) -> Result<()> {
    let path = path.as_ref();
    let f = File::create(path).map_err(|e| Error::io(path, e))?;
    write_npz_to(f, arrays, compressed).map_err(|e| Error::io(path, e))
}

fn write_npz_to<W: Write + Seek>(
    w: W,
    arrays: &[(&str, &NpyArray)],
    compressed: bool,
) -> std::io::Result<()> {
    let mut zip = zip::ZipWriter::new(w);
    let method = if compressed {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, a) in arrays {
        zip.start_file(format!("{name}.npy"), opts)
            .map_err(std::io::Error::other)?;
        let buf = npy_bytes(a)?;
        zip.write_all(&buf)?;
    }
    zip.finish().map_err(std::io::Error::other)?;
    Ok(())
}
