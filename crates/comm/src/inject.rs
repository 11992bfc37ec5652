//! Faults on purpose, to test what the other ranks do when one fails: [`FaultyComm`] wraps
//! one rank's communicator and makes its first collective of a given epoch fail, panic or
//! hang (the epoch comes from [`Communicator::note_step`]).

use crate::error::{Error, Result};
use crate::Communicator;
use candle_core::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the failing rank does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Its collectives return an error (as a rank whose step failed: out of memory, say).
    Error,
    /// It panics inside the collective (a bug).
    Panic,
    /// It stops before the collective without a word (a rank killed or hung where nothing
    /// reports it) until its communicator reports the group aborted
    /// ([`Communicator::async_error`]), then goes on and fails. Wrapped around a watchdog, it
    /// is outside that watchdog's view: in-process, the other ranks' timeouts end it; a
    /// process of an NCCL run learns of nothing and hangs until killed.
    Stall,
}

/// Rank `rank` fails at its first collective of training epoch `epoch` (1-based), as `kind`
/// says. Parsed from `RANK:EPOCH` or `RANK:EPOCH:KIND` (`error`, `panic`, `stall`; default
/// `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The rank that fails.
    pub rank: usize,
    /// The epoch it fails in.
    pub epoch: usize,
    /// How.
    pub kind: FaultKind,
}

impl std::str::FromStr for Fault {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = |what: String| Error::InvalidArgument {
            op: "fault",
            what: format!("{s:?}: {what} (expected RANK:EPOCH or RANK:EPOCH:error|panic|stall)"),
        };
        let parts: Vec<&str> = s.split(':').collect();
        let num = |i: usize, name: &str| -> Result<usize> {
            parts[i]
                .trim()
                .parse()
                .map_err(|e| bad(format!("{name} {:?}: {e}", parts[i])))
        };
        if !(2..=3).contains(&parts.len()) {
            return Err(bad(format!("{} fields", parts.len())));
        }
        let (rank, epoch) = (num(0, "rank")?, num(1, "epoch")?);
        if epoch == 0 {
            return Err(bad("epochs count from 1".into()));
        }
        let kind = match parts.get(2).map(|k| k.trim()) {
            None | Some("error") => FaultKind::Error,
            Some("panic") => FaultKind::Panic,
            Some("stall") => FaultKind::Stall,
            Some(k) => return Err(bad(format!("unknown kind {k:?}"))),
        };
        Ok(Self { rank, epoch, kind })
    }
}

/// A communicator that fails on purpose: see the module docs.
#[derive(Debug)]
pub struct FaultyComm {
    inner: Arc<dyn Communicator>,
    fault: Fault,
    /// The fault's epoch has begun.
    armed: AtomicBool,
    /// The phase [`Communicator::note_step`] named last.
    phase: std::sync::Mutex<&'static str>,
}

impl FaultyComm {
    /// `inner`, failing as `fault` says when it is `fault.rank`'s; other ranks' come back
    /// unchanged.
    pub fn wrap(inner: Arc<dyn Communicator>, fault: Fault) -> Arc<dyn Communicator> {
        if inner.rank() != fault.rank {
            return inner;
        }
        Arc::new(Self {
            inner,
            fault,
            armed: AtomicBool::new(false),
            phase: std::sync::Mutex::new("setup"),
        })
    }

    /// Fails as the fault says once armed; `Ok` before.
    fn strike(&self) -> Result<()> {
        if !self.armed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (rank, epoch) = (self.fault.rank, self.fault.epoch);
        let phase = *self.phase.lock().unwrap_or_else(|e| e.into_inner());
        match self.fault.kind {
            FaultKind::Error => Err(Error::Comm(format!(
                "fault injected: rank {rank} fails at epoch {epoch} ({phase})"
            ))),
            FaultKind::Panic => {
                panic!("fault injected: rank {rank} panics at epoch {epoch} ({phase})")
            }
            FaultKind::Stall => {
                while self.inner.async_error().is_none() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(())
            }
        }
    }
}

impl Communicator for FaultyComm {
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn world(&self) -> usize {
        self.inner.world()
    }

    fn exchange(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>> {
        self.strike()?;
        self.inner.exchange(sends, recv_rows)
    }

    fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.strike()?;
        self.inner.all_reduce_sum(t)
    }

    fn all_gather(&self, x: &Tensor) -> Result<Tensor> {
        self.strike()?;
        self.inner.all_gather(x)
    }

    fn shift_overlapped(
        &self,
        x: &Tensor,
        k: usize,
        recv_rows: usize,
        local: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Tensor> {
        self.strike()?;
        self.inner.shift_overlapped(x, k, recv_rows, local)
    }

    fn reduce_scatter_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.strike()?;
        self.inner.reduce_scatter_sum(t)
    }

    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }

    fn time_spent(&self) -> Duration {
        self.inner.time_spent()
    }

    fn watch_wait(&self, what: &'static str, wait: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.inner.watch_wait(what, wait)
    }

    fn abort(&self, reason: &str) {
        self.inner.abort(reason)
    }

    fn async_error(&self) -> Option<Error> {
        self.inner.async_error()
    }

    fn note_step(&self, epoch: usize, phase: &'static str) {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
        if epoch >= self.fault.epoch {
            self.armed.store(true, Ordering::Relaxed);
        }
        self.inner.note_step(epoch, phase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalComm;
    use candle_core::Device;

    #[test]
    fn faults_parse() {
        let f: Fault = "1:3".parse().unwrap();
        assert_eq!((f.rank, f.epoch, f.kind), (1, 3, FaultKind::Error));
        let f: Fault = "0:2:stall".parse().unwrap();
        assert_eq!(f.kind, FaultKind::Stall);
        assert_eq!("2:1:panic".parse::<Fault>().unwrap().kind, FaultKind::Panic);
        for bad in ["1", "1:0", "x:2", "1:2:explode", "1:2:3:4"] {
            assert!(bad.parse::<Fault>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_faulty_rank_fails_from_its_epoch_on_and_the_others_learn_it() {
        let fault: Fault = "1:2".parse().unwrap();
        let out = LocalComm::run_group(2, |c| {
            let c = FaultyComm::wrap(Arc::new(c), fault);
            let x = Tensor::ones(2, candle_core::DType::F32, &Device::Cpu).unwrap();
            c.note_step(1, "forward");
            c.all_reduce_sum(&x).unwrap();
            c.note_step(2, "forward");
            let e = c.all_reduce_sum(&x).unwrap_err();
            if c.rank() == 1 {
                c.abort(&e.to_string());
            }
            e.to_string()
        });
        assert_eq!(
            out[1],
            "communication: fault injected: rank 1 fails at epoch 2 (forward)"
        );
        assert!(
            out[0].contains("rank 1 failed: communication: fault injected"),
            "{}",
            out[0]
        );
    }
}
