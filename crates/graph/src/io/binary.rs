//! gnn's own binary CSR format: a graph (and optionally its whole dataset) written once and
//! memory-mapped on the next load, so a graph that took minutes to build or parse loads in
//! the time it takes to copy it out of the page cache.
//!
//! One little-endian file, `graph.gnncsr` inside a dataset folder (or any name, passed as the
//! file). Every section starts at a multiple of 64 bytes, so the mapped arrays are read in
//! place, aligned:
//!
//! ```text
//! offset  size  field
//!      0     8  magic "GNNCSR\0\0"
//!      8     4  version (1)
//!     12     4  number of sections S
//!     16     8  n_rows
//!     24     8  n_cols
//!     32     8  nnz
//!     40     4  bytes per row offset: 4 (u32) or 8 (u64)
//!     44     4  bytes per column index: 4 (u32)
//!     48    16  zero
//!     64  48*S  section table, one entry per section:
//!               name (16 bytes, ASCII, NUL-padded), dtype (u32: 1 u8, 2 u32, 3 u64, 4 i32,
//!               5 f32), 4 zero bytes, rows (u64), cols (u64), byte offset in the file (u64)
//!    ...        the sections' data, each padded to 64 bytes
//! ```
//!
//! | section | dtype | shape | what |
//! |---|---|---|---|
//! | `indptr` | u32 or u64 (the header's offset width) | `n_rows + 1` | row offsets |
//! | `indices` | u32 | `nnz` | column of each entry (row = target, column = source) |
//! | `features` | f32 | `n_rows x F` | dense features, row-major |
//! | `feat_indptr`, `feat_indices`, `feat_values`, `feat_cols` | u32, u32, f32, u64 | `n_rows + 1`, `k`, `k`, 1 | sparse features instead: a CSR `n_rows x F` with `k` entries, `F` in `feat_cols` |
//! | `labels` | i32 | `n_rows` | one label per node, `-1` unlabeled |
//! | `train`, `val`, `test` | u32 | | split node ids |
//! | `meta` | u8 | JSON bytes | `{"name", "num_classes", "raw_features", "source"}` |
//!
//! `indptr` and `indices` are required; a dataset adds features, labels, the three split lists
//! and `meta`. [`MappedGraph::open`] checks the header and that every section lies inside the
//! file; [`MappedGraph::csr`] and [`MappedGraph::dataset`] check the CSR invariants once, on
//! the mapped arrays (offsets start at 0, never decrease and end at `nnz`; every column is
//! `< n_cols`), then copy them out in parallel; the dataset's parts go through
//! [`Dataset::validate`]. Every error names the file, the field and the value.
//!
//! Row offsets are written at the width the writer asks for ([`OffsetWidth`]; `u32` is refused
//! for a graph above `u32::MAX` non-zeros; `graph.offset_width()` writes them as the graph
//! holds them). Either width is read, and loads at the narrowest width for the file's `nnz`:
//! a file of 64-bit offsets whose entries fit 32 bits loads as the `u32` graph a build of
//! them gives. The header has carried the width since version 1, so every file this format
//! has written still loads (no version change). Writing is atomic: a temporary file in the
//! same folder, renamed when complete.

pub use crate::csr::OffsetWidth;
use crate::csr::{Csr, RowPtr};
use crate::dataset::{Dataset, DenseMatrix, Features, SparseRows, Split};
use crate::error::{Error, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first 8 bytes of every file.
pub const MAGIC: [u8; 8] = *b"GNNCSR\0\0";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The file's name inside a dataset folder (what `--save-graph DIR` writes and `--data-dir
/// DIR` finds).
pub const FILE_NAME: &str = "graph.gnncsr";

const HEADER: usize = 64;
const ENTRY: usize = 48;
const ALIGN: usize = 64;
/// Elements per task of the parallel checks and copies.
const BLOCK: usize = 1 << 20;

/// Element type of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    U8 = 1,
    U32 = 2,
    U64 = 3,
    I32 = 4,
    F32 = 5,
}

impl Dtype {
    fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            1 => Dtype::U8,
            2 => Dtype::U32,
            3 => Dtype::U64,
            4 => Dtype::I32,
            5 => Dtype::F32,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 => 8,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "u8",
            Dtype::U32 => "u32",
            Dtype::U64 => "u64",
            Dtype::I32 => "i32",
            Dtype::F32 => "f32",
        }
    }
}

/// Plain little-endian element types: no padding, every bit pattern valid.
trait Plain: Copy + Send + Sync + 'static {
    const DTYPE: Dtype;
}
impl Plain for u8 {
    const DTYPE: Dtype = Dtype::U8;
}
impl Plain for u32 {
    const DTYPE: Dtype = Dtype::U32;
}
impl Plain for u64 {
    const DTYPE: Dtype = Dtype::U64;
}
impl Plain for i32 {
    const DTYPE: Dtype = Dtype::I32;
}
impl Plain for f32 {
    const DTYPE: Dtype = Dtype::F32;
}

fn as_bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `T` is one of u8/u32/u64/i32/f32 (the `Plain` impls above): no padding, so every
    // byte of the slice is initialised; the length is the slice's size in bytes; u8 has
    // alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The refusal on big-endian hosts (the file's arrays are read in place).
fn check_endian(path: &Path) -> Result<()> {
    if cfg!(target_endian = "big") {
        return Err(Error::format(
            path,
            "<file>",
            "the binary CSR format is little-endian and read in place; this host is big-endian",
        ));
    }
    Ok(())
}

/// What the `meta` section records about a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The dataset's name.
    pub name: String,
    /// Number of classes.
    pub num_classes: usize,
    /// Whether the features are used as they are (generated graphs, DGL's Reddit) rather than
    /// row-normalised (the citation formats' convention).
    pub raw_features: bool,
    /// Where the dataset came from (the generator's report, a loader's format and path).
    #[serde(default)]
    pub source: serde_json::Value,
}

/// One section to write.
struct Out<'a> {
    name: &'static str,
    dtype: Dtype,
    rows: u64,
    cols: u64,
    bytes: std::borrow::Cow<'a, [u8]>,
}

impl<'a> Out<'a> {
    fn new<T: Plain>(name: &'static str, rows: usize, cols: usize, data: &'a [T]) -> Self {
        debug_assert_eq!(rows * cols, data.len());
        Out {
            name,
            dtype: T::DTYPE,
            rows: rows as u64,
            cols: cols as u64,
            bytes: as_bytes(data).into(),
        }
    }
}

/// The `indptr` section at `width` (borrowed when the offsets are held at it); an error when
/// `width` is `U32` and they exceed it.
fn indptr_section<'a>(path: &Path, indptr: &'a RowPtr, width: OffsetWidth) -> Result<Out<'a>> {
    let rows = indptr.len();
    Ok(match (indptr, width) {
        (RowPtr::U32(v), OffsetWidth::U32) => Out::new("indptr", rows, 1, v),
        (RowPtr::U64(v), OffsetWidth::U64) => Out::new("indptr", rows, 1, v),
        (RowPtr::U32(_), OffsetWidth::U64) => owned("indptr", rows, &indptr.to_u64()),
        (RowPtr::U64(_), OffsetWidth::U32) => {
            let narrow = indptr.to_u32().ok_or_else(|| {
                Error::format(
                    path,
                    "indptr",
                    format!(
                        "{} non-zeros do not fit u32 row offsets: write them as u64",
                        indptr.last()
                    ),
                )
            })?;
            owned("indptr", rows, &narrow)
        }
    })
}

/// A section of `data`'s bytes, copied.
fn owned<T: Plain>(name: &'static str, rows: usize, data: &[T]) -> Out<'static> {
    Out {
        name,
        dtype: T::DTYPE,
        rows: rows as u64,
        cols: 1,
        bytes: as_bytes(data).to_vec().into(),
    }
}

/// Writes `sections` after a header for an `n_rows x n_cols` pattern with `nnz` entries, to a
/// temporary file renamed to `path` once complete.
fn write_file(
    path: &Path,
    (n_rows, n_cols, nnz): (usize, usize, usize),
    width: OffsetWidth,
    sections: &[Out<'_>],
) -> Result<()> {
    check_endian(path)?;
    let pad = |x: usize| x.div_ceil(ALIGN) * ALIGN;
    let mut offset = pad(HEADER + ENTRY * sections.len());
    let mut head = Vec::with_capacity(offset);
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    for v in [n_rows, n_cols, nnz] {
        head.extend_from_slice(&(v as u64).to_le_bytes());
    }
    let offset_bytes: u32 = match width {
        OffsetWidth::U32 => 4,
        OffsetWidth::U64 => 8,
    };
    head.extend_from_slice(&offset_bytes.to_le_bytes());
    head.extend_from_slice(&4u32.to_le_bytes());
    head.resize(HEADER, 0);
    for s in sections {
        let mut name = [0u8; 16];
        name[..s.name.len()].copy_from_slice(s.name.as_bytes());
        head.extend_from_slice(&name);
        head.extend_from_slice(&(s.dtype as u32).to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        head.extend_from_slice(&s.rows.to_le_bytes());
        head.extend_from_slice(&s.cols.to_le_bytes());
        head.extend_from_slice(&(offset as u64).to_le_bytes());
        offset = pad(offset + s.bytes.len());
    }
    head.resize(pad(head.len()), 0);

    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::with_capacity(1 << 22, std::fs::File::create(&tmp)?);
        f.write_all(&head)?;
        for s in sections {
            f.write_all(&s.bytes)?;
            f.write_all(&[0u8; ALIGN][..pad(s.bytes.len()) - s.bytes.len()])?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = result.and_then(|()| std::fs::rename(&tmp, path)) {
        // Best effort: the temporary file is useless after a failure.
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// Writes a graph alone (no dataset sections) to `path`, its row offsets at `width`
/// (`graph.offset_width()`: as held; `U32` fails above `u32::MAX` non-zeros).
pub fn write_csr(path: impl AsRef<Path>, graph: &Csr, width: OffsetWidth) -> Result<()> {
    let path = path.as_ref();
    let sections = [
        indptr_section(path, graph.indptr(), width)?,
        Out::new("indices", graph.nnz(), 1, graph.indices()),
    ];
    let shape = (graph.n_rows(), graph.n_cols(), graph.nnz());
    write_file(path, shape, width, &sections)
}

/// Writes a whole dataset (graph, features, labels, split) to `path`, with `meta`'s
/// `raw_features` and `source` (its name and class count are the dataset's), the graph's row
/// offsets at `width` (as [`write_csr`]).
pub fn write_dataset(
    path: impl AsRef<Path>,
    ds: &Dataset,
    raw_features: bool,
    source: serde_json::Value,
    width: OffsetWidth,
) -> Result<()> {
    let path = path.as_ref();
    let g = &ds.graph;
    let n = g.n_rows();
    let meta = serde_json::to_vec(&Meta {
        name: ds.name.clone(),
        num_classes: ds.num_classes,
        raw_features,
        source,
    })
    .map_err(|e| Error::format(path, "meta", e.to_string()))?;
    let mut sections = vec![
        indptr_section(path, g.indptr(), width)?,
        Out::new("indices", g.nnz(), 1, g.indices()),
    ];
    match &ds.features {
        Features::Dense(d) => sections.push(Out::new("features", d.rows, d.cols, &d.data)),
        Features::Sparse(s) => {
            let p = &s.pattern;
            let ptr = p.indptr().to_u32().ok_or_else(|| {
                Error::format(
                    path,
                    "feat_indptr",
                    format!(
                        "{} sparse feature entries exceed the format's u32 offsets",
                        p.nnz()
                    ),
                )
            })?;
            sections.push(owned_or_borrowed("feat_indptr", ptr));
            sections.push(Out::new("feat_indices", p.nnz(), 1, p.indices()));
            sections.push(Out::new("feat_values", s.values.len(), 1, &s.values));
            sections.push(Out {
                name: "feat_cols",
                dtype: Dtype::U64,
                rows: 1,
                cols: 1,
                bytes: (p.n_cols() as u64).to_le_bytes().to_vec().into(),
            });
        }
    }
    sections.push(Out::new("labels", n, 1, &ds.labels));
    for (name, ids) in [
        ("train", &ds.split.train),
        ("val", &ds.split.val),
        ("test", &ds.split.test),
    ] {
        sections.push(Out::new(name, ids.len(), 1, ids));
    }
    sections.push(Out::new("meta", meta.len(), 1, &meta));
    write_file(path, (n, g.n_cols(), g.nnz()), width, &sections)
}

/// A u32 section of `data`, borrowed when it is.
fn owned_or_borrowed<'a>(name: &'static str, data: std::borrow::Cow<'a, [u32]>) -> Out<'a> {
    match data {
        std::borrow::Cow::Borrowed(v) => Out::new(name, v.len(), 1, v),
        std::borrow::Cow::Owned(v) => owned(name, v.len(), &v),
    }
}

/// A section as found in the table.
#[derive(Debug, Clone)]
struct Section {
    name: String,
    dtype: Dtype,
    rows: u64,
    cols: u64,
    offset: usize,
    len: usize,
}

/// A mapped binary CSR file whose header and section table were checked: every section lies
/// inside the file. The arrays are read in place.
pub struct MappedGraph {
    path: PathBuf,
    map: memmap2::Mmap,
    n_rows: usize,
    n_cols: usize,
    nnz: usize,
    sections: Vec<Section>,
}

impl std::fmt::Debug for MappedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedGraph")
            .field("path", &self.path)
            .field("n_rows", &self.n_rows)
            .field("n_cols", &self.n_cols)
            .field("nnz", &self.nnz)
            .finish_non_exhaustive()
    }
}

/// The row offsets of a mapped file, at the width it was written with.
#[derive(Debug, Clone, Copy)]
pub enum Offsets<'a> {
    /// u32 offsets.
    U32(&'a [u32]),
    /// u64 offsets.
    U64(&'a [u64]),
}

impl Offsets<'_> {
    fn get(&self, i: usize) -> u64 {
        match self {
            Offsets::U32(o) => o[i] as u64,
            Offsets::U64(o) => o[i],
        }
    }
}

/// True when the file at `path` starts with [`MAGIC`].
pub fn is_binary_csr(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == MAGIC)
}

impl MappedGraph {
    /// Maps `path` and checks its header and section table (magic, version, widths, every
    /// section inside the file with the dtype and length its name requires). The arrays
    /// themselves are checked by [`Self::csr`] and [`Self::dataset`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        check_endian(&path)?;
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: the file is opened read-only and the map is only read. As with every map,
        // another process truncating the file while it is mapped makes later reads fault;
        // the format is written atomically (temporary file, rename), so gnn never does.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
        let bad = |field: &str, problem: String| Error::format(&path, field, problem);
        let len = map.len();
        if len < HEADER {
            return Err(bad(
                "header",
                format!("the file has {len} bytes, a header needs {HEADER} (truncated?)"),
            ));
        }
        if map[..8] != MAGIC {
            return Err(bad(
                "magic",
                format!(
                    "{:?}, expected {:?}: not a gnn binary CSR file",
                    String::from_utf8_lossy(&map[..8]),
                    String::from_utf8_lossy(&MAGIC)
                ),
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(map[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |o: usize| u64::from_le_bytes(map[o..o + 8].try_into().unwrap_or([0; 8]));
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(
                "version",
                format!("{version}, this build reads version {VERSION}"),
            ));
        }
        let n_sections = u32_at(12) as usize;
        let (n_rows, n_cols, nnz) = (u64_at(16), u64_at(24), u64_at(32));
        let (offset_bytes, index_bytes) = (u32_at(40), u32_at(44));
        if offset_bytes != 4 && offset_bytes != 8 {
            return Err(bad(
                "offset width",
                format!("{offset_bytes} bytes per row offset, expected 4 or 8"),
            ));
        }
        if index_bytes != 4 {
            return Err(bad(
                "index width",
                format!("{index_bytes} bytes per column index, expected 4"),
            ));
        }
        for (field, v) in [("n_rows", n_rows), ("n_cols", n_cols)] {
            if v >= u32::MAX as u64 {
                return Err(bad(
                    field,
                    format!("{v} exceeds the 32-bit node ids (at most {})", u32::MAX - 1),
                ));
            }
        }
        let table_end = n_sections
            .checked_mul(ENTRY)
            .and_then(|t| t.checked_add(HEADER))
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                bad(
                    "section table",
                    format!(
                        "{n_sections} sections need {} bytes of table, the file has {len} bytes \
                         (truncated?)",
                        (n_sections as u128) * ENTRY as u128 + HEADER as u128
                    ),
                )
            })?;
        let mut sections: Vec<Section> = Vec::with_capacity(n_sections);
        for e in (HEADER..table_end).step_by(ENTRY) {
            let raw = &map[e..e + 16];
            let name =
                String::from_utf8_lossy(&raw[..raw.iter().position(|&b| b == 0).unwrap_or(16)])
                    .into_owned();
            let code = u32_at(e + 16);
            let dtype = Dtype::from_code(code)
                .ok_or_else(|| bad(&name, format!("unknown dtype code {code}")))?;
            let (rows, cols, offset) = (u64_at(e + 24), u64_at(e + 32), u64_at(e + 40));
            let bytes = rows
                .checked_mul(cols)
                .and_then(|x| x.checked_mul(dtype.size() as u64));
            let end = bytes.and_then(|b| b.checked_add(offset));
            if offset % ALIGN as u64 != 0 {
                return Err(bad(
                    &name,
                    format!("starts at byte {offset}, not a multiple of {ALIGN}"),
                ));
            }
            match end {
                Some(end) if end <= len as u64 => {}
                _ => {
                    return Err(bad(
                        &name,
                        format!(
                            "{rows} x {cols} {} need bytes {offset}..{}, the file has {len} \
                             bytes (truncated?)",
                            dtype.name(),
                            end.map_or_else(|| "overflow".to_string(), |e| e.to_string())
                        ),
                    ))
                }
            }
            if sections.iter().any(|s| s.name == name) {
                return Err(bad(&name, "appears twice in the section table".into()));
            }
            sections.push(Section {
                name,
                dtype,
                rows,
                cols,
                offset: offset as usize,
                len: (rows * cols) as usize,
            });
        }
        let g = MappedGraph {
            path,
            map,
            n_rows: n_rows as usize,
            n_cols: n_cols as usize,
            nnz: nnz as usize,
            sections,
        };
        let want_offset = if offset_bytes == 8 {
            Dtype::U64
        } else {
            Dtype::U32
        };
        g.expect("indptr", want_offset, Some(g.n_rows + 1))?;
        g.expect("indices", Dtype::U32, Some(g.nnz))?;
        Ok(g)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// True when the file holds a dataset (features, labels, split and `meta`), not only a
    /// graph.
    pub fn has_dataset(&self) -> bool {
        self.section("meta").is_some()
    }

    fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The section `name`, which must exist with `dtype` and, when given, `len` elements.
    fn expect(&self, name: &str, dtype: Dtype, len: Option<usize>) -> Result<&Section> {
        let s = self
            .section(name)
            .ok_or_else(|| Error::format(&self.path, name, "missing from the section table"))?;
        if s.dtype != dtype {
            return Err(Error::format(
                &self.path,
                name,
                format!("dtype {}, expected {}", s.dtype.name(), dtype.name()),
            ));
        }
        if let Some(want) = len.filter(|&w| w != s.len) {
            return Err(Error::format(
                &self.path,
                name,
                format!("{} elements, expected {want}", s.len),
            ));
        }
        Ok(s)
    }

    /// The elements of section `s` (its dtype must be `T`'s, as `expect` checked).
    fn slice<T: Plain>(&self, s: &Section) -> &[T] {
        debug_assert_eq!(s.dtype, T::DTYPE);
        let bytes = &self.map[s.offset..s.offset + s.len * T::DTYPE.size()];
        // SAFETY: `T` is a plain type (any bit pattern is a value); the bytes lie inside the
        // map (checked by `open`); the map starts page-aligned and the section at a multiple of
        // 64 bytes, so `align_to` leaves no prefix (asserted below); the host is little-endian,
        // the file's byte order (checked by `open`).
        let (head, body, _) = unsafe { bytes.align_to::<T>() };
        assert!(head.is_empty(), "section {} is misaligned", s.name);
        &body[..s.len]
    }

    /// The row offsets, in place.
    pub fn indptr(&self) -> Offsets<'_> {
        let s = self.section("indptr").expect("checked by open");
        match s.dtype {
            Dtype::U64 => Offsets::U64(self.slice(s)),
            _ => Offsets::U32(self.slice(s)),
        }
    }

    /// The column indices, in place.
    pub fn indices(&self) -> &[u32] {
        self.slice(self.section("indices").expect("checked by open"))
    }

    /// Checks the CSR invariants on the mapped arrays.
    fn check_csr(&self) -> Result<()> {
        let (p, n) = (self.indptr(), self.n_rows);
        let bad = |problem: String| Error::format(&self.path, "indptr", problem);
        if p.get(0) != 0 {
            return Err(bad(format!("indptr[0] = {}, expected 0", p.get(0))));
        }
        if p.get(n) != self.nnz as u64 {
            return Err(bad(format!(
                "indptr[{n}] = {}, expected nnz = {}",
                p.get(n),
                self.nnz
            )));
        }
        // A decrease, or a row longer than a row's 32-bit length (repeated entries only).
        let broken = |i: usize| {
            let (a, b) = (p.get(i), p.get(i + 1));
            b < a || b - a > u32::MAX as u64
        };
        let rows = |b: usize| b * BLOCK..((b + 1) * BLOCK).min(n);
        let block = (0..n.div_ceil(BLOCK))
            .into_par_iter()
            .find_first(|&b| rows(b).fold(false, |acc, i| acc | broken(i)));
        if let Some(i) = block.and_then(|b| rows(b).find(|&i| broken(i))) {
            let (a, b) = (p.get(i), p.get(i + 1));
            return Err(bad(if b < a {
                format!("decreases at row {i}: {a} > {b}")
            } else {
                format!(
                    "row {i} holds {} entries, more than a row's 32-bit length",
                    b - a
                )
            }));
        }
        let idx = self.indices();
        let nc = self.n_cols as u32;
        let block = idx
            .par_chunks(BLOCK)
            .position_first(|c| c.iter().fold(false, |acc, &v| acc | (v >= nc)));
        if let Some(b) = block {
            let q = b * BLOCK + idx[b * BLOCK..].iter().position(|&v| v >= nc).unwrap_or(0);
            return Err(Error::format(
                &self.path,
                "indices",
                format!(
                    "column {} at position {q} is out of range (n_cols = {})",
                    idx[q], self.n_cols
                ),
            ));
        }
        Ok(())
    }

    /// The graph, checked once on the mapped arrays (see the module docs) and copied out in
    /// parallel, its offsets at the narrowest width for `nnz`.
    pub fn csr(&self) -> Result<Csr> {
        self.check_csr()?;
        let narrow = self.nnz as u64 <= u32::MAX as u64;
        let indptr = match self.indptr() {
            Offsets::U32(o) => RowPtr::U32(copy(o)),
            // Every offset is <= nnz <= u32::MAX (checked: non-decreasing, ends at nnz).
            Offsets::U64(o) if narrow => RowPtr::U32(o.par_iter().map(|&v| v as u32).collect()),
            Offsets::U64(o) => RowPtr::U64(copy(o)),
        };
        let indices = copy(self.indices());
        // SAFETY: `check_csr` checked every invariant of `Csr::from_row_ptr` on these arrays
        // (copied unchanged, or u64 offsets all <= nnz <= u32::MAX narrowed): `n_rows, n_cols <
        // u32::MAX` (`open`), `n_rows + 1` offsets (`open`), starting at 0, non-decreasing,
        // ending at nnz == indices.len() (`open`), rows of at most u32::MAX entries, every
        // column < n_cols.
        Ok(unsafe { Csr::new_unchecked(self.n_rows, self.n_cols, indptr, indices) })
    }

    /// The `meta` section.
    pub fn meta(&self) -> Result<Meta> {
        let s = self.expect("meta", Dtype::U8, None)?;
        serde_json::from_slice(self.slice::<u8>(s))
            .map_err(|e| Error::format(&self.path, "meta", format!("bad JSON: {e}")))
    }

    /// The whole dataset: the graph as [`Self::csr`], the features, labels and split copied
    /// out, then [`Dataset::validate`] (its errors name this file). With the dataset, its
    /// [`Meta`].
    pub fn dataset(&self) -> Result<(Dataset, Meta)> {
        let meta = self.meta()?;
        let graph = self.csr()?;
        let n = self.n_rows;
        let features = if self.section("features").is_some() {
            let s = self.expect("features", Dtype::F32, None)?;
            if s.rows as usize != n {
                return Err(Error::format(
                    &self.path,
                    "features",
                    format!("{} rows for {n} nodes", s.rows),
                ));
            }
            Features::Dense(DenseMatrix::new(n, s.cols as usize, copy(self.slice(s)))?)
        } else {
            let ptr = self.expect("feat_indptr", Dtype::U32, Some(n + 1))?;
            let idx = self.expect("feat_indices", Dtype::U32, None)?;
            let val = self.expect("feat_values", Dtype::F32, Some(idx.len))?;
            let cols = self.slice::<u64>(self.expect("feat_cols", Dtype::U64, Some(1))?)[0];
            let pattern = Csr::new_checked(
                n,
                usize::try_from(cols).unwrap_or(usize::MAX),
                copy(self.slice(ptr)),
                copy(self.slice(idx)),
            )
            .map_err(|e| Error::format(&self.path, "feat_indptr/feat_indices", e.to_string()))?;
            Features::Sparse(SparseRows {
                pattern,
                values: copy(self.slice(val)),
            })
        };
        let labels = copy(self.slice(self.expect("labels", Dtype::I32, Some(n))?));
        let ids = |name: &str| -> Result<Vec<u32>> {
            Ok(copy(self.slice(self.expect(name, Dtype::U32, None)?)))
        };
        let ds = Dataset {
            name: meta.name.clone(),
            graph,
            features,
            labels,
            num_classes: meta.num_classes,
            split: Split {
                train: ids("train")?,
                val: ids("val")?,
                test: ids("test")?,
            },
        };
        ds.validate()
            .map_err(|e| Error::format(&self.path, "dataset", e.to_string()))?;
        Ok((ds, meta))
    }
}

/// A copy of `src`, in parallel blocks.
fn copy<T: Plain + Default>(src: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); src.len()];
    out.par_chunks_mut(BLOCK)
        .zip(src.par_chunks(BLOCK))
        .for_each(|(o, s)| o.copy_from_slice(s));
    out
}

/// The file a path names: `path` itself when it is a file, else `path/graph.gnncsr`.
pub fn file_in(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    }
}

/// Loads the dataset in the binary file at `path` (a file, or a folder holding
/// [`FILE_NAME`]).
pub fn load_binary(path: impl AsRef<Path>) -> Result<(Dataset, Meta)> {
    MappedGraph::open(file_in(path.as_ref()))?.dataset()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_written_at_the_width_asked_and_never_truncated() {
        let path = Path::new("g.gnncsr");
        let narrow = RowPtr::U32(vec![0, 2, 5]);
        let wide = RowPtr::U64(vec![0, 2, 5]);
        let le = |v: &[u64], w: usize| -> Vec<u8> {
            v.iter()
                .flat_map(|x| x.to_le_bytes()[..w].to_vec())
                .collect()
        };
        for p in [&narrow, &wide] {
            let s = indptr_section(path, p, OffsetWidth::U32).unwrap();
            assert_eq!(
                (s.dtype, s.rows, &s.bytes[..]),
                (Dtype::U32, 3, &le(&[0, 2, 5], 4)[..])
            );
            let s = indptr_section(path, p, OffsetWidth::U64).unwrap();
            assert_eq!(
                (s.dtype, s.rows, &s.bytes[..]),
                (Dtype::U64, 3, &le(&[0, 2, 5], 8)[..])
            );
        }
        // Held at the width asked: written in place, no copy.
        let s = indptr_section(path, &narrow, OffsetWidth::U32).unwrap();
        assert!(matches!(s.bytes, std::borrow::Cow::Borrowed(_)));
        let big = RowPtr::U64(vec![0, 5_000_000_000]);
        let e = indptr_section(path, &big, OffsetWidth::U32)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("field `indptr`: 5000000000 non-zeros do not fit u32 row offsets"),
            "{e}"
        );
        let s = indptr_section(path, &big, OffsetWidth::U64).unwrap();
        assert_eq!(&s.bytes[8..], &5_000_000_000u64.to_le_bytes());
    }
}
