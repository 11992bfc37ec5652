//! What runs and benchmarks report: the per-phase timing breakdown ([`breakdown`]), fixed-width
//! and Markdown tables ([`table`]), the one SVG chart implementation ([`chart`]) and the JSON
//! helpers every report file goes through (parent folders created, errors naming the file).

pub mod breakdown;
pub mod chart;
pub mod table;

pub use breakdown::{PhaseRow, PhaseSums};
pub use table::Table;

use crate::error::{Error, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::path::Path;

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `text` to `path`, creating its parent folders.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| io(path, e))
}

/// Writes `value` as pretty JSON (with a final newline) to `path`, creating its parent folders.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::File {
        path: path.display().to_string(),
        problem: format!("cannot encode the report as JSON: {e}"),
    })?;
    write_text(path, &(text + "\n"))
}

/// Reads a JSON report written by [`write_json`] (or by a peer script).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::File {
        path: path.display().to_string(),
        problem: format!("not the expected JSON: {e}"),
    })
}

/// The median of `v` (the upper one for an even count; 0 for none): how every timing in the
/// reports is summarised.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Mean and sample standard deviation (0 for fewer than two values).
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let std = if v.len() > 1 {
        (v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    } else {
        0.0
    };
    (mean, std)
}

/// `Some(x)` as `x` formatted by `f`, `None` as `-`: the tables' missing-value cell.
pub fn or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        let (m, s) = mean_std(&[1.0, 2.0, 3.0]);
        assert!((m - 2.0).abs() < 1e-12 && (s - 1.0).abs() < 1e-12);
        assert_eq!(mean_std(&[5.0]), (5.0, 0.0));
    }

    #[test]
    fn json_round_trip_and_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/r.json");
        write_json(&p, &serde_json::json!({"x": 1})).unwrap();
        let v: serde_json::Value = read_json(&p).unwrap();
        assert_eq!(v["x"], 1);
        std::fs::write(&p, "{").unwrap();
        let e = read_json::<serde_json::Value>(&p).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("JSON"), "{e}");
    }
}
