//! [`KernelPolicy`]: which GPU kernel each sparse op runs, as one explainable value.
//!
//! Every switch that picks a kernel lives here, one field each (as PyG's `backend.py` keeps
//! its global switches in one file), but none of them is process state: a policy is carried
//! by the [`crate::DeviceGraph`] an op runs on ([`crate::DeviceGraph::with_policy`]), and
//! graphs derived from it (its transpose, a partition's slices, head-expanded copies) carry
//! the same one. Two graphs with different policies in one process each get their own
//! kernels, from any thread. The default is the measured dispatcher everywhere.
//!
//! | field | values | what it decides |
//! |---|---|---|
//! | `spmm` | `auto`, `ge`, `narrow`, `group`, `hp`, `hp:N` | the sum/mean SpMM kernel ([`crate::ops::spmm::dispatch`]) |
//! | `spmm_tiling` | a [`SpmmTiling`] or none | GE-SpMM's row-kernel shape (tuning sweeps) |
//! | `column_block` | `auto`, `off`, a width | the row kernel's column-blocked schedule |
//! | `sddmm` | `auto`, `rows`, `hp:N` | the SDDMM kernel |
//! | `deterministic` | `false`, `true` | no float atomics in any reduction |
//!
//! Half precision has no switch of its own: the features' dtype (the run's `--precision`)
//! selects the bf16 / f16 variant of whichever kernel the policy picks, always accumulating
//! in fp32; no op offers a second half-precision kernel to choose between.
//!
//! The CPU has one kernel per op; a policy changes nothing there.
//!
//! Which kernels a graph's ops actually ran is recorded on the graph
//! ([`crate::DeviceGraph::kernels_used`], a [`KernelsUsed`]), so a report can say what ran,
//! not only what was asked for.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use candle_core::{DType, Device, Tensor};
//! use gnn_kernels::{spmm, DeviceGraph, KernelPolicy, Reduce, SpmmKernel};
//! let csr = gnn_graph::Csr::new_checked(2, 2, vec![0, 1, 2], vec![1, 0])?;
//! let g = DeviceGraph::upload(&csr, &Device::Cpu)?;
//! // The same upload under a policy that forces GE-SpMM's row kernel on a GPU.
//! let ge = g.with_policy(KernelPolicy::default().with_spmm(SpmmKernel::Ge));
//! assert_eq!(ge.policy().to_string(), "spmm ge, sddmm auto, column blocks auto, deterministic off");
//! let x = Tensor::ones((2, 4), DType::F32, g.device())?;
//! spmm(&ge, &x, Reduce::Sum)?;
//! // Each handle keeps its own record; on the CPU every op has one kernel.
//! assert_eq!(ge.kernels_used().kernels("spmm"), ["cpu"]);
//! assert!(g.kernels_used().is_empty());
//! # Ok(()) }
//! ```

use crate::ops::spmm::dispatch::SpmmTiling;
use crate::partition::NPW_CANDIDATES;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The kernel of the sum/mean SpMMs on a GPU (max/min always run GE-SpMM's row kernel, as
/// their shared rows cannot meet through atomic adds). Spelled as `--spmm-kernel` takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SpmmKernel {
    /// `auto`: the measured dispatcher ([`crate::ops::spmm::dispatch::pick`]).
    #[default]
    Auto,
    /// `ge`: GE-SpMM's row kernel over the row schedule (or the forced [`SpmmTiling`]).
    Ge,
    /// `narrow`: GE-SpMM's narrow-row kernel (lane groups of 16-byte loads, several edges
    /// per step) where a row fits 16 lanes; GE-SpMM's row kernel otherwise.
    Narrow,
    /// `hp:N`: HP-SpMM with `N` edges per lane group (one of [`NPW_CANDIDATES`]); `hp`
    /// (`Hp(0)`, or any other `N`): DTP's choice. Deterministic mode runs GE-SpMM instead
    /// (HP-SpMM adds shared rows atomically).
    Hp(u32),
    /// `group`: row groups (lanes of 16-byte loads per row, several rows per warp, the result
    /// written once in the features' precision: no zero fill, atomics or narrowing pass),
    /// where a row of `k` features is whole 16-byte loads; GE-SpMM's row kernel otherwise.
    /// The dispatcher picks it on large sparse graphs (uniform rows, narrow or wide rows;
    /// see [`crate::ops::spmm::dispatch`]).
    Group,
}

/// The SDDMM kernel on a GPU. Spelled as `--sddmm-kernel` takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SddmmKernel {
    /// `auto`: HP-SDDMM with DTP's edges per warp (K <= 1024), else the row kernel.
    #[default]
    Auto,
    /// `rows`: one warp per row.
    Rows,
    /// `hp:N`: HP-SDDMM with `N` edges per warp (one of [`NPW_CANDIDATES`]; anything else:
    /// DTP's); K > 1024 falls back to the row kernel.
    Hp(u32),
}

/// Column blocking of GE-SpMM's row kernel: on a graph wider than the block, the sum/mean
/// row kernel walks a schedule that gathers `x`'s rows from one block of columns at a time
/// (an L2-sized slice; [`crate::schedule::ColumnBlockedSchedule`]). Spelled as
/// `--column-block` takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ColumnBlock {
    /// `auto`: blocks of [`crate::schedule::COLUMN_BLOCK`] columns.
    #[default]
    Auto,
    /// `off` (or `0`): never blocked.
    Off,
    /// A width in columns (`Fixed(0)` is off).
    Fixed(usize),
}

impl ColumnBlock {
    /// The block width in columns; 0 when blocking is off.
    pub fn width(self) -> usize {
        match self {
            Self::Auto => crate::schedule::COLUMN_BLOCK,
            Self::Off => 0,
            Self::Fixed(n) => n,
        }
    }
}

/// Which kernel each sparse op runs on a GPU; see the [module docs](self). `Default` is the
/// measured dispatcher with atomics allowed, what every run did before policies existed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelPolicy {
    /// Sum/mean SpMM kernel.
    pub spmm: SpmmKernel,
    /// A forced shape of GE-SpMM's row kernel (tuning sweeps); checked against each call's
    /// width and alignment at launch, an invalid one falls back to the built-in shape. While
    /// set, `auto`, `narrow` and `group` run the row kernel.
    pub spmm_tiling: Option<SpmmTiling>,
    /// Column blocking of the row kernel.
    pub column_block: ColumnBlock,
    /// SDDMM kernel.
    pub sddmm: SddmmKernel,
    /// No float atomics in any reduction, so a run with fixed seeds is bit-identical to the
    /// next: sum/mean SpMM and the MaxK SpGEMM give each output row to one warp (no split
    /// rows, no HP-SpMM, no column blocks: slower on graphs with hub rows), and the MaxK
    /// SSpMM backward becomes the transpose SpMM followed by a gather at the CBSR pattern. The
    /// max/min backward (argmax scatter) has no deterministic kernel and returns an error in
    /// this mode. The CPU kernels are deterministic either way.
    pub deterministic: bool,
}

impl KernelPolicy {
    /// This policy with the SpMM kernel `spmm`.
    pub fn with_spmm(self, spmm: SpmmKernel) -> Self {
        Self { spmm, ..self }
    }

    /// This policy with the SDDMM kernel `sddmm`.
    pub fn with_sddmm(self, sddmm: SddmmKernel) -> Self {
        Self { sddmm, ..self }
    }

    /// This policy with column blocking `column_block`.
    pub fn with_column_block(self, column_block: ColumnBlock) -> Self {
        Self {
            column_block,
            ..self
        }
    }

    /// This policy with deterministic mode `on` or off.
    pub fn with_deterministic(self, on: bool) -> Self {
        Self {
            deterministic: on,
            ..self
        }
    }

    /// True when every choice is the dispatcher's own (no kernel forced): the only policy the
    /// CPU, which has one kernel per op, can honour exactly. Determinism does not count (the
    /// CPU kernels are deterministic anyway).
    pub fn is_auto(&self) -> bool {
        Self {
            deterministic: false,
            ..*self
        } == Self::default()
    }
}

impl fmt::Display for KernelPolicy {
    /// One line for run headers: `spmm auto, sddmm auto, column blocks auto, deterministic
    /// off` (and the forced tiling, when one is set).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spmm {}, sddmm {}, column blocks {}, deterministic {}",
            self.spmm,
            self.sddmm,
            self.column_block,
            if self.deterministic { "on" } else { "off" }
        )?;
        if let Some(t) = &self.spmm_tiling {
            write!(f, ", tiling {t}")?;
        }
        Ok(())
    }
}

impl fmt::Display for SpmmKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Ge => f.write_str("ge"),
            Self::Narrow => f.write_str("narrow"),
            Self::Group => f.write_str("group"),
            Self::Hp(0) => f.write_str("hp"),
            Self::Hp(n) => write!(f, "hp:{n}"),
        }
    }
}

impl fmt::Display for SddmmKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Rows => f.write_str("rows"),
            Self::Hp(n) => write!(f, "hp:{n}"),
        }
    }
}

impl fmt::Display for ColumnBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Off | Self::Fixed(0) => f.write_str("off"),
            Self::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// `hp:N`'s `N`, checked against [`NPW_CANDIDATES`].
fn edges_per_group(kind: &str, s: &str, n: &str) -> Result<u32, String> {
    match n.trim().parse::<u32>() {
        Ok(n) if NPW_CANDIDATES.contains(&n) => Ok(n),
        _ => Err(format!(
            "{kind} `{s}`: hp:N takes N in {NPW_CANDIDATES:?} (edges per group)"
        )),
    }
}

impl std::str::FromStr for SpmmKernel {
    type Err = String;
    /// `auto`, `ge`, `narrow`, `group`, `hp` or `hp:N` with `N` in [`NPW_CANDIDATES`], any
    /// case.
    fn from_str(s: &str) -> Result<Self, String> {
        let want = s.trim().to_ascii_lowercase();
        match want.as_str() {
            "auto" => Ok(Self::Auto),
            "ge" => Ok(Self::Ge),
            "narrow" => Ok(Self::Narrow),
            "group" => Ok(Self::Group),
            "hp" => Ok(Self::Hp(0)),
            w => match w.strip_prefix("hp:") {
                Some(n) => edges_per_group("SpmmKernel", s, n).map(Self::Hp),
                None => Err(format!(
                    "SpmmKernel `{s}`: expected auto, ge, narrow, group, hp or hp:N with N in \
                     {NPW_CANDIDATES:?}"
                )),
            },
        }
    }
}

impl std::str::FromStr for SddmmKernel {
    type Err = String;
    /// `auto`, `rows` or `hp:N` with `N` in [`NPW_CANDIDATES`], any case.
    fn from_str(s: &str) -> Result<Self, String> {
        let want = s.trim().to_ascii_lowercase();
        match want.as_str() {
            "auto" => Ok(Self::Auto),
            "rows" => Ok(Self::Rows),
            w => match w.strip_prefix("hp:") {
                Some(n) => edges_per_group("SddmmKernel", s, n).map(Self::Hp),
                None => Err(format!(
                    "SddmmKernel `{s}`: expected auto, rows or hp:N with N in \
                     {NPW_CANDIDATES:?}"
                )),
            },
        }
    }
}

impl std::str::FromStr for ColumnBlock {
    type Err = String;
    /// `auto`, `off` (or `0`) or a width in columns.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "off" | "0" => Ok(Self::Off),
            w => w.parse::<usize>().map(Self::Fixed).map_err(|_| {
                format!("ColumnBlock `{s}`: expected auto, off or a width in columns")
            }),
        }
    }
}

/// Serialises the enum as its flag spelling (`"hp:64"`), and reads it back the same way.
macro_rules! as_flag_string {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
as_flag_string!(SpmmKernel, SddmmKernel, ColumnBlock);

/// Every spelling of the two kernel enums, for clap's `ValueEnum` (their `hp:N` variants are
/// finite: one per [`NPW_CANDIDATES`] entry).
#[cfg(feature = "clap")]
mod value_enum {
    use super::*;
    use clap::builder::PossibleValue;

    /// The variants and their spellings, `hp:N` for every candidate, smallest first.
    const SPMM: [(SpmmKernel, &str); 11] = [
        (SpmmKernel::Auto, "auto"),
        (SpmmKernel::Ge, "ge"),
        (SpmmKernel::Narrow, "narrow"),
        (SpmmKernel::Group, "group"),
        (SpmmKernel::Hp(0), "hp"),
        (SpmmKernel::Hp(8), "hp:8"),
        (SpmmKernel::Hp(32), "hp:32"),
        (SpmmKernel::Hp(64), "hp:64"),
        (SpmmKernel::Hp(128), "hp:128"),
        (SpmmKernel::Hp(256), "hp:256"),
        (SpmmKernel::Hp(512), "hp:512"),
    ];
    const SDDMM: [(SddmmKernel, &str); 8] = [
        (SddmmKernel::Auto, "auto"),
        (SddmmKernel::Rows, "rows"),
        (SddmmKernel::Hp(8), "hp:8"),
        (SddmmKernel::Hp(32), "hp:32"),
        (SddmmKernel::Hp(64), "hp:64"),
        (SddmmKernel::Hp(128), "hp:128"),
        (SddmmKernel::Hp(256), "hp:256"),
        (SddmmKernel::Hp(512), "hp:512"),
    ];
    const SPMM_VARIANTS: [SpmmKernel; 11] = {
        let mut v = [SpmmKernel::Auto; 11];
        let mut i = 0;
        while i < v.len() {
            v[i] = SPMM[i].0;
            i += 1;
        }
        v
    };
    const SDDMM_VARIANTS: [SddmmKernel; 8] = {
        let mut v = [SddmmKernel::Auto; 8];
        let mut i = 0;
        while i < v.len() {
            v[i] = SDDMM[i].0;
            i += 1;
        }
        v
    };

    fn name<T: PartialEq + Copy>(table: &[(T, &'static str)], v: T) -> Option<&'static str> {
        table.iter().find(|(t, _)| *t == v).map(|(_, n)| *n)
    }

    impl clap::ValueEnum for SpmmKernel {
        fn value_variants<'a>() -> &'a [Self] {
            &SPMM_VARIANTS
        }
        fn to_possible_value(&self) -> Option<PossibleValue> {
            let help = match self {
                Self::Auto => "the measured dispatcher",
                Self::Ge => "GE-SpMM's row kernel",
                Self::Narrow => "GE-SpMM's narrow-row kernel where the width allows",
                Self::Group => "row groups, output in the features' precision (short rows)",
                Self::Hp(0) => "HP-SpMM, DTP's edges per group",
                Self::Hp(_) => "HP-SpMM, this many edges per group",
            };
            Some(PossibleValue::new(name(&SPMM, *self)?).help(help))
        }
    }

    impl clap::ValueEnum for SddmmKernel {
        fn value_variants<'a>() -> &'a [Self] {
            &SDDMM_VARIANTS
        }
        fn to_possible_value(&self) -> Option<PossibleValue> {
            let help = match self {
                Self::Auto => "HP-SDDMM with DTP's partition (K <= 1024), else rows",
                Self::Rows => "one warp per row",
                Self::Hp(_) => "HP-SDDMM, this many edges per warp",
            };
            Some(PossibleValue::new(name(&SDDMM, *self)?).help(help))
        }
    }
}

/// Which kernels a graph's ops ran: per op family, the kernel names, filled at dispatch.
///
/// | op | kernels |
/// |---|---|
/// | `spmm` | `ge` (GE-SpMM's row kernel), `ge-blocked` (its column-blocked schedule), `narrow`, `hp`, `group`, `cpu` |
/// | `sddmm` | `hp`, `rows`, `cpu` |
/// | `sspmm` (MaxK backward) | `cbsr` (the SSpMM kernel), `transpose` (deterministic: the transpose SpMM and a gather), `cpu` |
///
/// Serialises as `{"spmm": ["hp", "narrow"], ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct KernelsUsed(BTreeMap<&'static str, BTreeSet<&'static str>>);

impl KernelsUsed {
    /// Records that `op` ran `kernel`.
    pub fn insert(&mut self, op: &'static str, kernel: &'static str) {
        self.0.entry(op).or_default().insert(kernel);
    }

    /// Whether `op` ran `kernel`.
    pub fn contains(&self, op: &str, kernel: &str) -> bool {
        self.0.get(op).is_some_and(|k| k.contains(kernel))
    }

    /// The kernels `op` ran, sorted by name.
    pub fn kernels(&self, op: &str) -> Vec<&'static str> {
        self.0
            .get(op)
            .map_or_else(Vec::new, |k| k.iter().copied().collect())
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: &KernelsUsed) {
        for (op, kernels) in &other.0 {
            self.0.entry(op).or_default().extend(kernels);
        }
    }

    /// True when nothing ran.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for KernelsUsed {
    /// `spmm hp+narrow, sddmm hp`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(op, k)| format!("{op} {}", k.iter().copied().collect::<Vec<_>>().join("+")))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// The record a graph family shares ([`crate::DeviceGraph::kernels_used`]).
#[derive(Debug, Default)]
pub(crate) struct KernelLog(std::sync::Mutex<KernelsUsed>);

impl KernelLog {
    /// Records that `op` ran `kernel`.
    pub(crate) fn record(&self, op: &'static str, kernel: &'static str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(op, kernel);
    }

    /// What has been recorded so far.
    pub(crate) fn snapshot(&self) -> KernelsUsed {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl fmt::Display for SpmmTiling {
    /// `vec 2 cf 1 u8 node-major scheduled`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "vec {} cf {} u{} {} {}",
            self.vec,
            self.cf,
            self.unroll,
            if self.tile_major {
                "tile-major"
            } else {
                "node-major"
            },
            if self.schedule {
                "scheduled"
            } else {
                "per-row"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_policy() -> Vec<KernelPolicy> {
        let spmm = [
            SpmmKernel::Auto,
            SpmmKernel::Ge,
            SpmmKernel::Narrow,
            SpmmKernel::Hp(0),
            SpmmKernel::Hp(64),
        ];
        let sddmm = [SddmmKernel::Auto, SddmmKernel::Rows, SddmmKernel::Hp(512)];
        let blocks = [ColumnBlock::Auto, ColumnBlock::Off, ColumnBlock::Fixed(300)];
        let mut out = Vec::new();
        for s in spmm {
            for d in sddmm {
                for b in blocks {
                    for det in [false, true] {
                        out.push(KernelPolicy {
                            spmm: s,
                            spmm_tiling: None,
                            column_block: b,
                            sddmm: d,
                            deterministic: det,
                        });
                    }
                }
            }
        }
        out.push(KernelPolicy {
            spmm_tiling: Some(SpmmTiling {
                vec: 2,
                cf: 1,
                tile_major: true,
                unroll: 8,
                schedule: true,
            }),
            ..KernelPolicy::default()
        });
        out
    }

    #[test]
    fn policies_round_trip_through_json() {
        for p in every_policy() {
            let json = serde_json::to_string(&p).unwrap();
            let back: KernelPolicy = serde_json::from_str(&json).unwrap();
            assert_eq!(back, p, "{json}");
        }
        let p = KernelPolicy::default()
            .with_spmm(SpmmKernel::Hp(64))
            .with_column_block(ColumnBlock::Fixed(4096));
        let v = serde_json::to_value(p).unwrap();
        assert_eq!(v["spmm"], "hp:64");
        assert_eq!(v["column_block"], "4096");
        assert_eq!(v["sddmm"], "auto");
        assert_eq!(v["deterministic"], false);
        // Missing fields take the defaults; a bad spelling is an error naming it.
        let d: KernelPolicy = serde_json::from_str(r#"{"deterministic": true}"#).unwrap();
        assert_eq!(d, KernelPolicy::default().with_deterministic(true));
        let e = serde_json::from_str::<KernelPolicy>(r#"{"spmm": "hp:7"}"#).unwrap_err();
        assert!(e.to_string().contains("hp:7"), "{e}");
    }

    #[test]
    fn spellings_parse_back() {
        for p in every_policy() {
            assert_eq!(p.spmm.to_string().parse::<SpmmKernel>(), Ok(p.spmm));
            assert_eq!(p.sddmm.to_string().parse::<SddmmKernel>(), Ok(p.sddmm));
            assert_eq!(
                p.column_block.to_string().parse::<ColumnBlock>(),
                Ok(p.column_block)
            );
        }
        assert_eq!(" HP:512 ".parse::<SpmmKernel>(), Ok(SpmmKernel::Hp(512)));
        assert_eq!("0".parse::<ColumnBlock>(), Ok(ColumnBlock::Off));
        assert_eq!(ColumnBlock::Fixed(0).width(), 0);
        assert_eq!(ColumnBlock::Auto.width(), crate::schedule::COLUMN_BLOCK);
        for bad in ["hp:7", "hp:", "fast", ""] {
            let e = bad.parse::<SpmmKernel>().unwrap_err();
            assert!(e.starts_with("SpmmKernel `"), "{e}");
        }
        assert!("hp".parse::<SddmmKernel>().is_err());
        assert!("-1".parse::<ColumnBlock>().is_err());
    }

    #[test]
    fn the_default_is_the_dispatcher_and_prints_on_one_line() {
        let d = KernelPolicy::default();
        assert!(d.is_auto() && d.with_deterministic(true).is_auto());
        assert!(!d.with_spmm(SpmmKernel::Ge).is_auto());
        assert!(!d.with_column_block(ColumnBlock::Off).is_auto());
        assert_eq!(
            d.to_string(),
            "spmm auto, sddmm auto, column blocks auto, deterministic off"
        );
        let all = every_policy();
        assert!(all.iter().all(|p| !p.to_string().contains('\n')));
        let tiled = all.last().unwrap().to_string();
        assert!(
            tiled.ends_with("tiling vec 2 cf 1 u8 tile-major scheduled"),
            "{tiled}"
        );
    }

    #[test]
    fn kernels_used_merge_and_print() {
        let mut a = KernelsUsed::default();
        assert_eq!(a.to_string(), "none");
        a.insert("spmm", "narrow");
        a.insert("spmm", "hp");
        let mut b = KernelsUsed::default();
        b.insert("sddmm", "rows");
        b.insert("spmm", "hp");
        a.merge(&b);
        assert_eq!(a.kernels("spmm"), ["hp", "narrow"]);
        assert!(a.contains("sddmm", "rows") && !a.contains("sddmm", "hp"));
        assert_eq!(a.to_string(), "sddmm rows, spmm hp+narrow");
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"sddmm": ["rows"], "spmm": ["hp", "narrow"]})
        );
    }

    #[cfg(feature = "clap")]
    #[test]
    fn clap_parses_the_flags_as_enums() {
        use clap::{Parser, ValueEnum};
        #[derive(Parser)]
        struct Flags {
            #[arg(long, default_value = "auto")]
            spmm_kernel: SpmmKernel,
            #[arg(long, default_value = "auto")]
            sddmm_kernel: SddmmKernel,
            #[arg(long, default_value = "auto")]
            column_block: ColumnBlock,
        }
        let f = Flags::try_parse_from(["x"]).unwrap();
        assert_eq!(
            (f.spmm_kernel, f.sddmm_kernel, f.column_block),
            Default::default()
        );
        let f = Flags::try_parse_from([
            "x",
            "--spmm-kernel",
            "hp:64",
            "--sddmm-kernel",
            "rows",
            "--column-block",
            "4096",
        ])
        .unwrap();
        assert_eq!(f.spmm_kernel, SpmmKernel::Hp(64));
        assert_eq!(f.sddmm_kernel, SddmmKernel::Rows);
        assert_eq!(f.column_block, ColumnBlock::Fixed(4096));
        assert!(Flags::try_parse_from(["x", "--spmm-kernel", "hp:7"]).is_err());
        // Every listed variant parses back to itself.
        for v in SpmmKernel::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(SpmmKernel::from_str(&name, false), Ok(*v));
        }
        for v in SddmmKernel::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(SddmmKernel::from_str(&name, false), Ok(*v));
        }
    }
}
