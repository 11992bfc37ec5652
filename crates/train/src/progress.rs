//! Progress output for long steps, the way Rust CLIs show it: an `indicatif` bar or spinner on
//! a terminal, plain lines otherwise (logs, CI, pipes), so a redirected run's output stays the
//! same line-oriented text as before.

use crate::trainer::EpochLog;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// Whether progress bars are drawn (stderr is a terminal).
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
}

/// Runs `f` while a spinner shows `msg` (on a terminal; silently otherwise), for steps such as
/// generating or loading a graph whose own summary line is printed afterwards.
pub fn step<T>(msg: impl Into<String>, f: impl FnOnce() -> T) -> T {
    if !interactive() {
        return f();
    }
    let sp = ProgressBar::new_spinner().with_message(msg.into());
    sp.enable_steady_tick(Duration::from_millis(120));
    let out = f();
    sp.finish_and_clear();
    out
}

/// Epoch progress of one training run: on a terminal a bar with the latest loss and epoch
/// time; every evaluated epoch is also printed as a line (above the bar), which is all that is
/// printed when not on a terminal.
pub struct EpochProgress {
    name: String,
    epochs: usize,
    bar: Option<ProgressBar>,
    lines: bool,
}

impl EpochProgress {
    /// Progress over epochs `1..=epochs` of the run called `name`, starting after `done`
    /// epochs (a resumed run).
    pub fn new(name: impl Into<String>, epochs: usize, done: usize) -> Self {
        let name = name.into();
        let bar = interactive().then(|| {
            let b = ProgressBar::new(epochs as u64).with_position(done as u64);
            if let Ok(style) = ProgressStyle::with_template(
                "  [{prefix}] {bar:30.cyan/blue} {pos:>4}/{len} {msg} (eta {eta})",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_prefix(name.clone());
            b
        });
        Self {
            name,
            epochs,
            bar,
            lines: true,
        }
    }

    /// Without the per-evaluation lines: only the bar, and nothing when not on a terminal
    /// (for runs that print their own summary, such as one seed of many).
    pub fn without_lines(mut self) -> Self {
        self.lines = false;
        self
    }

    /// Records one epoch.
    pub fn epoch(&self, log: &EpochLog) {
        let line = log.acc.filter(|_| self.lines).map(|(tr, va, te)| {
            format!(
                "  [{}] epoch {:>4}/{}  loss {:.4}  acc train {:.3} val {:.3} test {:.3}  {:.0} ms/epoch",
                self.name, log.epoch, self.epochs, log.loss, tr, va, te, log.epoch_ms
            )
        });
        match &self.bar {
            Some(b) => {
                b.set_position(log.epoch as u64);
                b.set_message(format!(
                    "loss {:.4}, {:.0} ms/epoch",
                    log.loss, log.epoch_ms
                ));
                if let Some(l) = line {
                    b.println(l);
                }
            }
            None => {
                if let Some(l) = line {
                    println!("{l}");
                }
            }
        }
    }
}

impl Drop for EpochProgress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
