//! Set-up clocks of a distributed run: the wall and CPU seconds of every phase between
//! loading the data and the first epoch (operands, partition, halo statistics, each rank's
//! local graph, operand and features), printed as each phase ends and kept for the report's
//! `setup`. On a graph of 10^9 non-zeros the set-up takes minutes; these lines say where, even
//! when the run is stopped before it trains.
//!
//! The clocks are off until [`enable`] ([`super::run()`] turns them on): library callers
//! (tests, the Python package) print nothing. CPU seconds are the whole process's
//! (`/proc/self/stat`; 0 where it cannot be read): over a phase that runs alone they show how
//! many cores it kept busy; the ranks' phases overlap, so theirs count the other ranks' work
//! too.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

static ON: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<Vec<(String, f64, f64)>> = Mutex::new(Vec::new());

/// Turns the clocks on (and clears what an earlier run recorded).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Runs `f` as the phase `what`: when the clocks are on, prints `set-up: <what>: <wall> s
/// (<cpu> s CPU)` after it and records it.
pub fn phase<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> T {
    if !ON.load(Ordering::Relaxed) {
        return f();
    }
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let out = f();
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let what = what();
    println!("set-up: {what}: {wall:.2} s ({cpu:.2} s CPU)");
    LOG.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((what, wall, cpu));
    out
}

/// The phases recorded since [`enable`], in the order they ended: the report's `setup`.
pub fn report() -> Value {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    Value::Array(
        log.iter()
            .map(|(what, wall, cpu)| json!({"phase": what, "wall_s": wall, "cpu_s": cpu}))
            .collect(),
    )
}

/// User and system CPU seconds of this process so far (Linux's `/proc/self/stat`, in clock
/// ticks of 1/100 s); 0 where it cannot be read.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces, inside parentheses): state
    // is field 3, utime and stime fields 14 and 15.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_clock_moves() {
        let a = cpu_seconds();
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed().as_millis() < 60 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_seconds() >= a);
    }
}
