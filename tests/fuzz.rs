//! Seeded mutation fuzzing of every file the engine reads: Planetoid pickles and test ids, DGL
//! Reddit npz, gnn-benchmark npz, edge-list folders, OGB csv.gz folders, model checkpoints
//! (safetensors with the JSON config in the header), PyG state_dicts, the JSON config itself, feature files (f32 and INT8) and training-state
//! checkpoints (`--resume`).
//!
//! Each case writes a small valid fixture, applies one mutation (bit flips, truncation,
//! insertion, junk, huge declared sizes, or format-aware ones: NaN/Inf in float arrays,
//! negative and out-of-range ids, nasty numbers in text and JSON), loads it and classifies
//! the outcome: ok, clean error, panic, hang (over [`HANG`]) or over the allocation budget
//! (peak heap growth above [`BUDGET_PER_BYTE`] times the case's input bytes plus
//! [`BUDGET_SLACK`], counted by a global allocator). The bar is 0 panics, 0 hangs and 0 over
//! budget; the counts are printed as a table (`cargo test --test fuzz -- --nocapture`).
//!
//! `GNN_FUZZ_CASES` scales the case count (default 15,500 in all) and `GNN_FUZZ_SEED` picks
//! another seed; a failing case prints its target, case number and mutation to replay it.

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use gnn::graph::io::npz::{write_npy, write_npz, NpyArray, NpyData};
use gnn::graph::io::pickle::Writer;
use gnn::graph::{
    load_dgl_reddit, load_edge_list_dir, load_gnn_benchmark, load_ogb_node, load_planetoid,
    BuildOptions,
};
use gnn::models::{ConvKind, Gnn, ModelConfig};
use gnn::train::{train, DeviceData, HostFeatures, TrainConfig, TrainState};
use rand::{Rng, SeedableRng};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A case slower than this counts as a hang.
const HANG: Duration = Duration::from_secs(2);
/// Allowed peak heap growth per input byte...
const BUDGET_PER_BYTE: usize = 64;
/// ...plus 1 MiB (fixed overheads: rayon and candle bookkeeping, zip directories).
const BUDGET_SLACK: usize = 1 << 20;

/// The system allocator, counting live and peak bytes.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's layout and pointer unchanged; the
// counters are plain atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            grew(new);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

type Rng64 = rand_xoshiro::Xoshiro256PlusPlus;
/// The files of one case: relative path -> bytes.
type Files = BTreeMap<String, Vec<u8>>;

// ---------------------------------------------------------------------------------------------
// Mutations.

/// Numbers that break naive parsers: negative, beyond u32/u64/i64, NaN/Inf, empty.
const NASTY: &[&str] = &[
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "4000000000",
    "4294967295",
    "9223372036854775807",
    "-9223372036854775808",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e39",
    "1e308",
    "0",
    "",
    "0.5",
];

/// Applies one byte-level mutation; returns its name.
fn mutate_bytes(r: &mut Rng64, b: &mut Vec<u8>, text: bool) -> &'static str {
    let kinds: &[&str] = if text {
        &[
            "flip", "truncate", "insert", "junk", "number", "number", "number",
        ]
    } else {
        &["flip", "truncate", "insert", "junk", "huge", "huge"]
    };
    let kind = kinds[r.random_range(0..kinds.len())];
    let len = b.len();
    match kind {
        "flip" => {
            for _ in 0..r.random_range(1..=8) {
                if len > 0 {
                    let p = r.random_range(0..len);
                    b[p] ^= 1 << r.random_range(0..8);
                }
            }
        }
        "truncate" => b.truncate(r.random_range(0..=len)),
        "insert" => {
            let p = r.random_range(0..=len);
            let n = r.random_range(1..=64);
            let junk: Vec<u8> = (0..n).map(|_| r.random()).collect();
            b.splice(p..p, junk);
        }
        "junk" => {
            if len > 0 {
                let p = r.random_range(0..len);
                let n = r.random_range(1..=64).min(len - p);
                r.fill(&mut b[p..p + n]);
            }
        }
        "huge" => {
            let words: [u64; 6] = [
                u64::MAX,
                u32::MAX as u64,
                0x7fff_ffff,
                0x8000_0000,
                1 << 40,
                i64::MAX as u64,
            ];
            let w = words[r.random_range(0..words.len())].to_le_bytes();
            let n = if r.random() { 4 } else { 8 };
            if len >= n {
                let p = r.random_range(0..=len - n);
                b[p..p + n].copy_from_slice(&w[..n]);
            }
        }
        _ => {
            // "number": replace one run of digits with a nasty token.
            let runs: Vec<(usize, usize)> = digit_runs(b);
            if let Some(&(s, e)) = runs.get(r.random_range(0..runs.len().max(1))) {
                let t = NASTY[r.random_range(0..NASTY.len())];
                b.splice(s..e, t.bytes());
            }
        }
    }
    kind
}

fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

fn gz(text: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(text).unwrap();
    e.finish().unwrap()
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    GzDecoder::new(b).read_to_end(&mut out).unwrap();
    out
}

/// Mutates one file of `files`: `.gz` members are mutated as text and re-compressed three
/// times out of four (else as raw bytes); other files by their kind.
fn mutate_files(r: &mut Rng64, files: &mut Files) -> String {
    let keys: Vec<String> = files.keys().cloned().collect();
    let key = &keys[r.random_range(0..keys.len())];
    let b = files.get_mut(key).unwrap();
    let kind = if key.ends_with(".gz") && r.random_range(0..4) != 0 {
        let mut text = gunzip(b);
        let k = mutate_bytes(r, &mut text, true);
        *b = gz(&text);
        k
    } else {
        let text = key.ends_with(".index") || key.ends_with(".json");
        mutate_bytes(r, b, text)
    };
    format!("{kind} {key}")
}

// ---------------------------------------------------------------------------------------------
// Fixtures, each with format-aware ("structured") variants chosen by `twist`.

/// Format-aware damage a fixture builder can apply: `None` for the valid fixture.
#[derive(Clone, Copy, Debug)]
enum Twist {
    None,
    NanFeature,
    InfFeature,
    NegativeId,
    OutOfRangeId,
    HugeId,
    HugeShape,
}

const TWISTS: [Twist; 6] = [
    Twist::NanFeature,
    Twist::InfFeature,
    Twist::NegativeId,
    Twist::OutOfRangeId,
    Twist::HugeId,
    Twist::HugeShape,
];

/// A Planetoid folder (`ind.toy.*`): 510 nodes (3 train, 500 val, 7 test ids with a gap),
/// 6 sparse features, 3 classes.
fn planetoid(r: &mut Rng64, twist: Twist) -> Files {
    let (n_all, dim, classes) = (503usize, 6usize, 3usize);
    let feat = |rows: usize| -> Vec<(usize, i32, f32)> {
        (0..rows)
            .flat_map(|i| [(i, (i % dim) as i32, 1.0), (i, ((i + 2) % dim) as i32, 0.5)])
            .collect()
    };
    let mut allx = feat(n_all);
    let tx = feat(6);
    let bad_value = match twist {
        Twist::NanFeature => Some(f32::NAN),
        Twist::InfFeature => Some(f32::NEG_INFINITY),
        _ => None,
    };
    if let Some(v) = bad_value {
        let p = r.random_range(0..allx.len());
        allx[p].2 = v;
    }
    let mut f = Files::new();
    let mut put = |name: &str, w: Writer| {
        f.insert(format!("ind.toy.{name}"), w.finish());
    };
    let csr = |rows: usize, e: &[(usize, i32, f32)]| {
        let mut w = Writer::new();
        w.csr(rows, dim, e);
        w
    };
    let onehot = |labels: Vec<usize>| {
        let mut w = Writer::new();
        w.onehot(&labels, classes);
        w
    };
    put("allx", csr(n_all, &allx));
    put("x", csr(3, &allx[..6]));
    put("tx", csr(6, &tx));
    put("ally", onehot((0..n_all).map(|i| i % classes).collect()));
    put("y", onehot(vec![0, 1, 2]));
    put("ty", onehot(vec![2, 0, 1, 1, 0, 2]));
    let mut ids: Vec<String> = [505, 503, 506, 508, 507, 509]
        .iter()
        .map(|v: &i64| v.to_string())
        .collect();
    let bad_id = match twist {
        Twist::NegativeId => Some("-3".to_string()),
        Twist::OutOfRangeId => Some("600".to_string()),
        Twist::HugeId => Some(["18446744073709551615", "4000000000"][r.random_range(0..2)].into()),
        _ => None,
    };
    if let Some(b) = &bad_id {
        let k = r.random_range(0..ids.len());
        ids[k] = b.clone();
    }
    f.insert(
        "ind.toy.test.index".into(),
        (ids.join("\n") + "\n").into_bytes(),
    );
    let mut lists: Vec<(i32, Vec<i32>)> = (0..509)
        .map(|i| (i, vec![(i + 1) % 509, (i * 7) % 509]))
        .collect();
    match twist {
        Twist::NegativeId => lists[r.random_range(0..509)].1.push(-5),
        Twist::OutOfRangeId | Twist::HugeId => lists[r.random_range(0..509)].1.push(i32::MAX),
        _ => {}
    }
    let mut w = Writer::new();
    w.adjacency(&lists);
    f.insert("ind.toy.graph".into(), w.finish());
    if let Twist::HugeShape = twist {
        // A CSR whose declared row count is huge: patch the first BININT after `_shape`.
        let x = f.get_mut("ind.toy.x").unwrap();
        let at = x.windows(6).position(|w| w == b"_shape").unwrap() + 6;
        let j = at + x[at..].iter().position(|&b| b == b'J').unwrap();
        x[j + 1..j + 5].copy_from_slice(&(i32::MAX - 1).to_le_bytes());
    }
    f
}

fn arr(shape: &[usize], data: NpyData) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data,
    }
}

fn npz(arrays: &[(&str, NpyArray)], compressed: bool) -> Vec<u8> {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let refs: Vec<(&str, &NpyArray)> = arrays.iter().map(|(k, a)| (*k, a)).collect();
    write_npz(tmp.path(), &refs, compressed).unwrap();
    std::fs::read(tmp.path()).unwrap()
}

/// DGL's Reddit files for a 24-node graph with 5 features and 3 classes.
fn dgl(r: &mut Rng64, twist: Twist) -> Files {
    let n = 24usize;
    let mut feature: Vec<f32> = (0..n * 5).map(|v| (v % 7) as f32 * 0.25).collect();
    match twist {
        Twist::NanFeature => feature[r.random_range(0..n * 5)] = f32::NAN,
        Twist::InfFeature => feature[r.random_range(0..n * 5)] = f32::INFINITY,
        _ => {}
    }
    let mut label: Vec<i64> = (0..n as i64).map(|i| i % 3).collect();
    let types: Vec<i64> = (0..n as i64).map(|i| 1 + i % 3).collect();
    let mut row: Vec<i64> = (0..n as i64)
        .flat_map(|i| [i, i, (i + 1) % n as i64])
        .collect();
    let col: Vec<i64> = (0..n as i64)
        .flat_map(|i| [i, (i + 1) % n as i64, i])
        .collect();
    let bad = match twist {
        Twist::NegativeId => Some(-1),
        Twist::OutOfRangeId => Some(n as i64),
        Twist::HugeId => Some(1i64 << 40),
        _ => None,
    };
    if let Some(b) = bad {
        if r.random() {
            let k = r.random_range(0..row.len());
            row[k] = b;
        } else {
            label[r.random_range(0..n)] = b;
        }
    }
    let m = row.len();
    let shape = match twist {
        Twist::HugeShape => vec![1 << 40, 1 << 40],
        _ => vec![n as i64, n as i64],
    };
    let compressed = r.random_range(0..5) == 0;
    let data = npz(
        &[
            ("feature", arr(&[n, 5], NpyData::F32(feature))),
            ("label", arr(&[n], NpyData::I64(label))),
            ("node_types", arr(&[n], NpyData::I64(types))),
        ],
        compressed,
    );
    let graph = npz(
        &[
            ("row", arr(&[m], NpyData::I64(row))),
            ("col", arr(&[m], NpyData::I64(col))),
            ("data", arr(&[m], NpyData::F32(vec![1.0; m]))),
            ("shape", arr(&[2], NpyData::I64(shape))),
        ],
        compressed,
    );
    Files::from([
        ("reddit_data.npz".to_string(), data),
        ("reddit_graph.npz".to_string(), graph),
    ])
}

/// A gnn-benchmark `.npz` (`toy.npz`): 30 nodes in a ring, sparse attributes, 3 classes.
fn gnn_benchmark(r: &mut Rng64, twist: Twist) -> Files {
    let n = 30i64;
    let mut indices: Vec<i64> = (0..n).map(|i| (i + 1) % n).collect();
    let indptr: Vec<i64> = (0..=n).collect();
    let mut attr: Vec<f32> = (0..n).map(|i| (i % 3) as f32 + 1.0).collect();
    let attr_ind: Vec<i64> = (0..n).map(|i| i % 4).collect();
    let mut labels: Vec<i64> = (0..n).map(|i| i % 3).collect();
    match twist {
        Twist::NanFeature => attr[r.random_range(0..n as usize)] = f32::NAN,
        Twist::InfFeature => attr[r.random_range(0..n as usize)] = f32::INFINITY,
        Twist::NegativeId => indices[r.random_range(0..n as usize)] = -1,
        Twist::OutOfRangeId => labels[r.random_range(0..n as usize)] = n,
        Twist::HugeId => indices[r.random_range(0..n as usize)] = 1 << 40,
        _ => {}
    }
    let shape = match twist {
        Twist::HugeShape => vec![1i64 << 40, 1 << 40],
        _ => vec![n, n],
    };
    let m = indices.len();
    let ints = |v: Vec<i64>| arr(&[v.len()], NpyData::I64(v));
    let data = npz(
        &[
            ("adj_data", arr(&[m], NpyData::F32(vec![1.0; m]))),
            ("adj_indices", ints(indices)),
            ("adj_indptr", ints(indptr.clone())),
            ("adj_shape", ints(shape)),
            ("attr_data", arr(&[n as usize], NpyData::F32(attr))),
            ("attr_indices", ints(attr_ind)),
            ("attr_indptr", ints(indptr)),
            ("attr_shape", ints(vec![n, 4])),
            ("labels", ints(labels)),
        ],
        r.random(),
    );
    Files::from([("toy.npz".to_string(), data)])
}

/// An edge-list folder: `edges.csv`, `features.npy`, `labels.npy` and a split as masks.
fn edge_list(r: &mut Rng64, twist: Twist) -> Files {
    let n = 16usize;
    let mut edges: Vec<String> = (0..n).map(|i| format!("{i},{}", (i + 5) % n)).collect();
    edges.insert(0, "src,dst".into());
    let bad = match twist {
        Twist::NegativeId => Some("-1".to_string()),
        Twist::OutOfRangeId => Some(n.to_string()),
        Twist::HugeId | Twist::HugeShape => Some("18446744073709551616".to_string()),
        _ => None,
    };
    if let Some(b) = bad {
        edges[r.random_range(1..=n)] = format!("{b} 0");
    }
    let mut x: Vec<f32> = (0..n * 3).map(|v| v as f32 * 0.5).collect();
    match twist {
        Twist::NanFeature => x[r.random_range(0..n * 3)] = f32::NAN,
        Twist::InfFeature => x[r.random_range(0..n * 3)] = f32::NEG_INFINITY,
        _ => {}
    }
    let npy = |a: NpyArray| {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        write_npy(tmp.path(), &a).unwrap();
        std::fs::read(tmp.path()).unwrap()
    };
    let mask = |k: usize| arr(&[n], NpyData::Bool((0..n).map(|i| i % 3 == k).collect()));
    Files::from([
        (
            "edges.csv".to_string(),
            (edges.join("\n") + "\n").into_bytes(),
        ),
        (
            "features.npy".to_string(),
            npy(arr(&[n, 3], NpyData::F32(x))),
        ),
        (
            "labels.npy".to_string(),
            npy(arr(
                &[n],
                NpyData::I64((0..n as i64).map(|i| i % 2).collect()),
            )),
        ),
        ("train.npy".to_string(), npy(mask(0))),
        ("val.npy".to_string(), npy(mask(1))),
        ("test.npy".to_string(), npy(mask(2))),
    ])
}

/// An OGB node-property raw folder (`ogbn_toy/raw`, `ogbn_toy/split/time`): 12 nodes.
fn ogb(r: &mut Rng64, twist: Twist) -> Files {
    let n = 12;
    let mut feat: Vec<String> = (0..n).map(|i| format!("{},{}.5,-1", i % 4, i)).collect();
    match twist {
        Twist::NanFeature => feat[r.random_range(0..n)] = "nan,1,2".into(),
        Twist::InfFeature => feat[r.random_range(0..n)] = "1,inf,2".into(),
        _ => {}
    }
    let mut edges: Vec<String> = (0..n).map(|i| format!("{i},{}", (i + 3) % n)).collect();
    let bad = match twist {
        Twist::NegativeId => Some("-1"),
        Twist::OutOfRangeId => Some("12"),
        Twist::HugeId => Some("18446744073709551615"),
        _ => None,
    };
    if let Some(b) = bad {
        edges[r.random_range(0..n)] = format!("0,{b}");
    }
    let lines = |v: Vec<String>| gz((v.join("\n") + "\n").as_bytes());
    let mut f = Files::new();
    f.insert("ogbn_toy/raw/node-feat.csv.gz".into(), lines(feat));
    f.insert("ogbn_toy/raw/edge.csv.gz".into(), lines(edges));
    let labels = (0..n).map(|i| (i % 3).to_string()).collect();
    f.insert("ogbn_toy/raw/node-label.csv.gz".into(), lines(labels));
    let count = if let Twist::HugeShape = twist {
        "4000000000"
    } else {
        "12"
    };
    f.insert(
        "ogbn_toy/raw/num-node-list.csv.gz".into(),
        gz(format!("{count}\n").as_bytes()),
    );
    for (name, ids) in [("train", 0..6), ("valid", 6..9), ("test", 9..12)] {
        f.insert(
            format!("ogbn_toy/split/time/{name}.csv.gz"),
            lines(ids.map(|i| i.to_string()).collect()),
        );
    }
    f
}

fn model_config() -> ModelConfig {
    ModelConfig::new(ConvKind::Gcn, 5, 4, 3, 2, 0.5)
}

/// A saved 2-layer GCN checkpoint (`model.safetensors`; the `.json` beside it is for people
/// and is not read back).
fn checkpoint() -> Files {
    let tmp = tempfile::tempdir().unwrap();
    let m = Gnn::new(model_config(), &candle_core::Device::Cpu, 1).unwrap();
    m.save(tmp.path().join("model"), serde_json::json!({}))
        .unwrap();
    ["model.safetensors"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(tmp.path().join(f)).unwrap()))
        .collect()
}

/// The checkpoint with its `gnn.config` JSON replaced: one field set to a nasty value, or the
/// text mutated as bytes.
fn config_json(r: &mut Rng64, base: &Files) -> (Files, String) {
    let st = &base["model.safetensors"];
    let (tensors, cfg) = {
        let s = safetensors::SafeTensors::deserialize(st).unwrap();
        let (_, meta) = safetensors::SafeTensors::read_metadata(st).unwrap();
        let cfg = meta.metadata().as_ref().unwrap()["gnn.config"].clone();
        let t: Vec<(String, Vec<usize>, Vec<u8>)> = s
            .tensors()
            .into_iter()
            .map(|(k, v)| (k, v.shape().to_vec(), v.data().to_vec()))
            .collect();
        (t, cfg)
    };
    let (text, what) = if r.random() {
        let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
        let fields = [
            "in_dim",
            "hidden",
            "out_dim",
            "layers",
            "dropout",
            "input_dropout",
            "kind",
            "activation",
        ];
        let field = fields[r.random_range(0..fields.len())];
        let values = [
            serde_json::json!(0),
            serde_json::json!(-1),
            serde_json::json!(1u64 << 40),
            serde_json::json!(u64::MAX),
            serde_json::json!(1e300),
            serde_json::json!("gcn"),
            serde_json::json!({"MaxK": {"k": 1000}}),
            serde_json::json!(null),
        ];
        let val = values[r.random_range(0..values.len())].clone();
        v[field] = val.clone();
        (v.to_string(), format!("json {field} = {val}"))
    } else {
        let mut b = cfg.into_bytes();
        let k = mutate_bytes(r, &mut b, true);
        {
            let text = String::from_utf8_lossy(&b).into_owned();
            let what = format!("{k} config text {text}");
            (text, what)
        }
    };
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(k, shape, data)| {
            let v =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                    .unwrap();
            (k.clone(), v)
        })
        .collect();
    let meta = std::collections::HashMap::from([
        ("gnn.config".to_string(), text),
        ("format".to_string(), "gnn-v1".to_string()),
    ]);
    let bytes = safetensors::serialize(views, Some(meta)).unwrap();
    let mut f = base.clone();
    f.insert("model.safetensors".into(), bytes);
    (f, what)
}

/// A training checkpoint (`state.safetensors`) of 2 epochs of a small GCN, with model
/// selection state and Adam moments.
fn train_state() -> Files {
    let tmp = tempfile::tempdir().unwrap();
    let dev = candle_core::Device::Cpu;
    let spec = gnn::graph::SyntheticSpec::reddit().scaled(0.001).unwrap();
    let (ds, _) = gnn::graph::generate(&spec, 1).unwrap();
    let data = DeviceData::new(&ds, &dev, false).unwrap();
    let cfg = ModelConfig::new(ConvKind::Gcn, 602, 8, 41, 2, 0.5);
    let g = gnn::models::ModelGraph::new(&ds.graph, ConvKind::Gcn, &dev).unwrap();
    let m = Gnn::new(cfg, &dev, 1).unwrap();
    let tc = TrainConfig {
        epochs: 2,
        checkpoint_every: 2,
        checkpoint: Some(tmp.path().join("state")),
        ..TrainConfig::default()
    };
    train(&m, &g, &data, &tc, |_| {}).unwrap();
    Files::from([(
        "state.safetensors".to_string(),
        std::fs::read(tmp.path().join("state.safetensors")).unwrap(),
    )])
}

/// A feature file, f32 or INT8, for 9 nodes x 4 features.
fn features(r: &mut Rng64, twist: Twist) -> Files {
    let mut v: Vec<f32> = (0..36).map(|i| (i % 5) as f32 - 1.5).collect();
    match twist {
        Twist::NanFeature => v[r.random_range(0..36)] = f32::NAN,
        Twist::InfFeature => v[r.random_range(0..36)] = f32::INFINITY,
        _ => {}
    }
    let x = candle_core::Tensor::from_vec(v, (9, 4), &candle_core::Device::Cpu).unwrap();
    let hf = HostFeatures::F32(x);
    let hf = if r.random() && !matches!(twist, Twist::NanFeature | Twist::InfFeature) {
        hf.quantize().unwrap()
    } else {
        hf
    };
    let tmp = tempfile::NamedTempFile::new().unwrap();
    hf.save(tmp.path()).unwrap();
    Files::from([(
        "features.safetensors".to_string(),
        std::fs::read(tmp.path()).unwrap(),
    )])
}

// ---------------------------------------------------------------------------------------------
// The harness.

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    ok: usize,
    error: usize,
    panic: usize,
    hang: usize,
    over_budget: usize,
    max_ms: f64,
    max_peak: usize,
}

enum Outcome {
    Ok,
    Error(String),
    Panic(String),
}

fn write_files(dir: &Path, files: &Files) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    for (k, b) in files {
        let p = dir.join(k);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b).unwrap();
    }
}

fn run_case(load: &dyn Fn(&Path) -> Result<(), String>, dir: &Path) -> (Outcome, Duration, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load(dir)));
    let dt = t.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let out = match r {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(e)) => Outcome::Error(e),
        Err(p) => Outcome::Panic(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    };
    (out, dt, peak)
}

type Loader = Box<dyn Fn(&Path) -> Result<(), String>>;
type Maker = Box<dyn Fn(&mut Rng64) -> (Files, String)>;

struct Target {
    name: &'static str,
    cases: usize,
    make: Maker,
    load: Loader,
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A maker that mutates the valid fixture as bytes 3 times in 4, else builds a twisted one.
fn with_twists(build: fn(&mut Rng64, Twist) -> Files) -> Maker {
    Box::new(move |r: &mut Rng64| {
        if r.random_range(0..4) == 0 {
            let t = TWISTS[r.random_range(0..TWISTS.len())];
            (build(r, t), format!("{t:?}"))
        } else {
            let mut f = build(r, Twist::None);
            let what = mutate_files(r, &mut f);
            (f, what)
        }
    })
}

fn targets(scale: f64) -> Vec<Target> {
    let n = |c: f64| ((c * scale) as usize).max(1);
    let ckpt = checkpoint();
    let ckpt2 = ckpt.clone();
    let state = train_state();
    vec![
        Target {
            name: "planetoid",
            cases: n(2500.0),
            make: with_twists(planetoid),
            load: Box::new(|d| load_planetoid(d, "toy").map(drop).map_err(err)),
        },
        Target {
            name: "dgl-npz",
            cases: n(2500.0),
            make: with_twists(dgl),
            load: Box::new(|d| load_dgl_reddit(d).map(drop).map_err(err)),
        },
        Target {
            name: "gnn-benchmark",
            cases: n(1500.0),
            make: with_twists(gnn_benchmark),
            load: Box::new(|d| {
                load_gnn_benchmark(d.join("toy.npz"), 0)
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "edge-list",
            cases: n(1500.0),
            make: with_twists(edge_list),
            load: Box::new(|d| {
                load_edge_list_dir(d, BuildOptions::undirected(), 0)
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "ogb-csv-gz",
            cases: n(2000.0),
            make: with_twists(ogb),
            load: Box::new(|d| {
                load_ogb_node(d.join("ogbn_toy"), None, BuildOptions::undirected())
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "checkpoint",
            cases: n(1500.0),
            make: Box::new(move |r| {
                let mut f = ckpt.clone();
                let what = mutate_files(r, &mut f);
                (f, what)
            }),
            load: Box::new(|d| {
                Gnn::load(d.join("model"), &candle_core::Device::Cpu)
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "config-json",
            cases: n(1000.0),
            make: Box::new(move |r| config_json(r, &ckpt2)),
            load: Box::new(|d| {
                Gnn::load(d.join("model"), &candle_core::Device::Cpu)
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "train-state",
            cases: n(1000.0),
            make: Box::new(move |r| {
                let mut f = state.clone();
                let what = mutate_files(r, &mut f);
                (f, what)
            }),
            load: Box::new(|d| {
                TrainState::load(d.join("state"), &candle_core::Device::Cpu)
                    .map(drop)
                    .map_err(err)
            }),
        },
        Target {
            name: "pyg-state-dict",
            cases: n(1000.0),
            make: Box::new(|r| {
                let path = concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/fixtures/pyg/pyg_gin.safetensors"
                );
                let mut f = Files::from([(
                    "m.safetensors".to_string(),
                    std::fs::read(path).expect("PyG fixture"),
                )]);
                let what = mutate_files(r, &mut f);
                (f, what)
            }),
            load: Box::new(|d| {
                Gnn::load_pyg(
                    d.join("m.safetensors"),
                    ConvKind::Gin,
                    &candle_core::Device::Cpu,
                )
                .map(drop)
                .map_err(err)
            }),
        },
        Target {
            name: "features",
            cases: n(1000.0),
            make: with_twists(features),
            load: Box::new(|d| {
                HostFeatures::load(d.join("features.safetensors"))
                    .map(drop)
                    .map_err(err)
            }),
        },
    ]
}

#[test]
fn fuzz_every_input_format() {
    let scale: f64 = std::env::var("GNN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(1.0, |c| c / 15_500.0);
    let seed: u64 = std::env::var("GNN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    // Panics are counted, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut table = Vec::new();
    let mut failures = Vec::new();
    let only = std::env::var("GNN_FUZZ_ONLY").ok();
    let verbose = std::env::var_os("GNN_FUZZ_VERBOSE").is_some();
    for t in targets(scale) {
        if only.as_deref().is_some_and(|o| o != t.name) {
            continue;
        }
        let dir = tmp.path().join(t.name);
        let mut r = Rng64::seed_from_u64(seed);
        let mut c = Counts::default();
        for case in 0..t.cases {
            let (files, what) = (t.make)(&mut r);
            write_files(&dir, &files);
            let input: usize = files.values().map(Vec::len).sum();
            if verbose {
                eprintln!("{} case {case} ({what})", t.name);
            }
            let (out, dt, peak) = run_case(&*t.load, &dir);
            let ms = dt.as_secs_f64() * 1e3;
            c.max_ms = c.max_ms.max(ms);
            if peak > c.max_peak && verbose {
                eprintln!("new largest peak {peak} B: {} case {case} ({what})", t.name);
            }
            c.max_peak = c.max_peak.max(peak);
            let tag = format!("{} case {case} ({what})", t.name);
            match out {
                Outcome::Ok => c.ok += 1,
                Outcome::Error(e) => {
                    c.error += 1;
                    if e.is_empty() {
                        failures.push(format!("{tag}: empty error message"));
                    }
                }
                Outcome::Panic(m) => {
                    c.panic += 1;
                    failures.push(format!("{tag}: panic: {m}"));
                }
            }
            if dt > HANG {
                c.hang += 1;
                failures.push(format!("{tag}: took {ms:.0} ms"));
            }
            if peak > BUDGET_PER_BYTE * input + BUDGET_SLACK {
                c.over_budget += 1;
                failures.push(format!(
                    "{tag}: peak heap growth {peak} B for {input} input bytes"
                ));
            }
        }
        table.push((t.name, t.cases, c));
    }
    let _ = std::panic::take_hook();
    println!(
        "\nfuzz seed {seed}, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "| input | cases | ok | clean error | panic | hang | over budget | slowest ms | largest peak heap growth, KiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut total = Counts::default();
    let mut cases = 0;
    for (name, n, c) in &table {
        println!(
            "| {name} | {n} | {} | {} | {} | {} | {} | {:.1} | {} |",
            c.ok,
            c.error,
            c.panic,
            c.hang,
            c.over_budget,
            c.max_ms,
            c.max_peak.div_ceil(1024)
        );
        cases += n;
        total.ok += c.ok;
        total.error += c.error;
        total.panic += c.panic;
        total.hang += c.hang;
        total.over_budget += c.over_budget;
    }
    println!(
        "| all | {cases} | {} | {} | {} | {} | {} | | |",
        total.ok, total.error, total.panic, total.hang, total.over_budget
    );
    assert!(
        failures.is_empty(),
        "{} failing cases (first 20):\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Each target saw both outcomes: the mutations reach past the first check.
    for (name, _, c) in table.iter().filter(|t| t.1 >= 100) {
        assert!(c.ok > 0 && c.error > 0, "{name}: {c:?}");
    }
}
