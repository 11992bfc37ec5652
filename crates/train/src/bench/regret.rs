//! The SpMM dispatcher judged over a sweep: per case (graph, K, precision) the kernel it
//! picked, every candidate's time, the fastest, and the pick's regret (pick time / fastest
//! time, 1.0 when the pick is the fastest); over the sweep, how often the pick was the
//! fastest, the geometric-mean and worst regret, and the worst cases.

use serde::Serialize;

/// One case's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The kernel the dispatcher ran.
    pub pick: String,
    /// Its time, ms.
    pub pick_ms: f64,
    /// The fastest kernel timed.
    pub best: String,
    /// Its time, ms.
    pub best_ms: f64,
    /// `pick_ms / best_ms` (>= 1).
    pub regret: f64,
}

impl Verdict {
    /// The verdict on `pick` among `times` (each candidate's name and time, the pick among
    /// them); `None` when the pick has no time or a time is not a positive number.
    pub fn new(pick: &str, times: &[(String, f64)]) -> Option<Self> {
        if times.iter().any(|(_, t)| !(t.is_finite() && *t > 0.0)) {
            return None;
        }
        let pick_ms = times.iter().find(|(n, _)| n == pick)?.1;
        let (best, best_ms) = times.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
        Some(Self {
            pick: pick.into(),
            pick_ms,
            best: best.clone(),
            best_ms: *best_ms,
            regret: pick_ms / best_ms,
        })
    }

    /// Whether the pick was the fastest (a tie counts).
    pub fn pick_is_best(&self) -> bool {
        self.regret <= 1.0
    }
}

/// One case of the sweep, named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    /// `graph K=k precision`.
    pub case: String,
    /// Its verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The verdicts of a sweep summed up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Cases judged.
    pub cases: usize,
    /// Cases whose pick was the fastest.
    pub pick_best: usize,
    /// Cases whose pick was more than 10 % slower than the fastest.
    pub over_10_percent: usize,
    /// Geometric mean of the regrets.
    pub geomean_regret: f64,
    /// The largest regret.
    pub worst_regret: f64,
    /// The cases of largest regret, worst first (at most the number asked for, only those
    /// with a regret above 1).
    pub worst: Vec<Case>,
}

/// The summary of `cases`, listing up to `n_worst` of the worst.
pub fn summarize(cases: &[Case], n_worst: usize) -> Summary {
    let n = cases.len();
    let log_sum: f64 = cases.iter().map(|c| c.verdict.regret.ln()).sum();
    let mut worst: Vec<Case> = cases
        .iter()
        .filter(|c| !c.verdict.pick_is_best())
        .cloned()
        .collect();
    worst.sort_by(|a, b| b.verdict.regret.total_cmp(&a.verdict.regret));
    worst.truncate(n_worst);
    Summary {
        cases: n,
        pick_best: cases.iter().filter(|c| c.verdict.pick_is_best()).count(),
        over_10_percent: cases.iter().filter(|c| c.verdict.regret > 1.1).count(),
        geomean_regret: if n == 0 {
            1.0
        } else {
            (log_sum / n as f64).exp()
        },
        worst_regret: cases.iter().map(|c| c.verdict.regret).fold(1.0, f64::max),
        worst,
    }
}

impl std::fmt::Display for Summary {
    /// Three lines and one per worst case:
    /// `the pick was the fastest in 8 of 10 cases; 1 more than 10 % slower` /
    /// `regret (pick / fastest): geometric mean 1.021, worst 1.300` / `worst cases:` /
    /// `  reddit@1 K=64 f32: ge 4.100 ms, hp fastest at 3.150 ms (1.30x)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "the pick was the fastest in {} of {} cases; {} more than 10 % slower",
            self.pick_best, self.cases, self.over_10_percent
        )?;
        write!(
            f,
            "regret (pick / fastest): geometric mean {:.3}, worst {:.3}",
            self.geomean_regret, self.worst_regret
        )?;
        if !self.worst.is_empty() {
            write!(f, "\nworst cases:")?;
        }
        for c in &self.worst {
            let v = &c.verdict;
            write!(
                f,
                "\n  {}: {} {:.3} ms, {} fastest at {:.3} ms ({:.2}x)",
                c.case, v.pick, v.pick_ms, v.best, v.best_ms, v.regret
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(n, t)| (n.to_string(), *t)).collect()
    }

    fn case(name: &str, pick: &str, t: &[(&str, f64)]) -> Case {
        Case {
            case: name.into(),
            verdict: Verdict::new(pick, &times(t)).unwrap(),
        }
    }

    #[test]
    fn verdicts() {
        let v = Verdict::new("ge", &times(&[("ge", 4.0), ("narrow", 5.0), ("hp", 3.2)])).unwrap();
        assert_eq!((v.best.as_str(), v.best_ms, v.pick_ms), ("hp", 3.2, 4.0));
        assert!((v.regret - 1.25).abs() < 1e-12 && !v.pick_is_best());
        let v = Verdict::new("hp", &times(&[("ge", 4.0), ("hp", 3.2)])).unwrap();
        assert_eq!(v.regret, 1.0);
        assert!(v.pick_is_best());
        // A tie with another kernel counts as the fastest.
        assert!(Verdict::new("ge", &times(&[("hp", 2.0), ("ge", 2.0)]))
            .unwrap()
            .pick_is_best());
        // No time for the pick, or a time that is not one: no verdict.
        assert!(Verdict::new("narrow", &times(&[("ge", 4.0)])).is_none());
        assert!(Verdict::new("ge", &times(&[("ge", 4.0), ("hp", f64::NAN)])).is_none());
        assert!(Verdict::new("ge", &times(&[("ge", 0.0)])).is_none());
    }

    #[test]
    fn summary() {
        let cases = [
            case("a K=1 f32", "hp", &[("ge", 2.0), ("hp", 1.0)]),
            case("a K=64 f32", "ge", &[("ge", 4.0), ("hp", 2.0)]),
            case("b K=1 f32", "ge", &[("ge", 1.05), ("hp", 1.0)]),
            case("b K=64 f32", "narrow", &[("ge", 1.0), ("narrow", 1.0)]),
        ];
        let s = summarize(&cases, 1);
        assert_eq!((s.cases, s.pick_best, s.over_10_percent), (4, 2, 1));
        // Regrets 1, 2, 1.05, 1: geometric mean (2.1)^(1/4).
        assert!((s.geomean_regret - 2.1f64.powf(0.25)).abs() < 1e-12);
        assert_eq!(s.worst_regret, 2.0);
        assert_eq!(s.worst.len(), 1);
        assert_eq!(s.worst[0].case, "a K=64 f32");
        let text = s.to_string();
        assert!(text.starts_with("the pick was the fastest in 2 of 4 cases; 1 more than 10 %"));
        assert!(text.contains("geometric mean 1.204, worst 2.000"), "{text}");
        assert!(text.ends_with("a K=64 f32: ge 4.000 ms, hp fastest at 2.000 ms (2.00x)"));
        // All best: no worst list; an empty sweep reads as no regret.
        let s = summarize(&cases[..1], 5);
        assert!(s.worst.is_empty() && !s.to_string().contains("worst cases"));
        assert_eq!(summarize(&[], 5).geomean_regret, 1.0);
        // The JSON flattens a case's verdict.
        let j = serde_json::to_value(&cases[1]).unwrap();
        assert_eq!(j["case"], "a K=64 f32");
        assert_eq!(j["regret"], 2.0);
    }
}
