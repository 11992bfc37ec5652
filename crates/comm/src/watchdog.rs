//! A watchdog around any communicator: a collective that does not finish within a timeout,
//! or an error the group reports on its own (NCCL's asynchronous error, another in-process
//! rank's failure), aborts the communicator, and the call in progress (and every later one)
//! returns an error naming this rank, the collective, the step (epoch and phase, from
//! [`Communicator::note_step`]) and the ranks it waited for.
//!
//! ```text
//!  caller ──call──▶ Watchdog ──▶ inner communicator          (the call is marked in flight)
//!                      ▲
//!  watchdog thread ────┘  every poll: in flight longer than the timeout, or inner's
//!                         async_error()?  ─▶ record the error, inner.abort() (own thread)
//!                         still in flight `grace` after that?  ─▶ the stuck hook
//! ```
//!
//! Why a timeout and not only errors: when an NCCL peer process is killed, the survivors'
//! kernels wait for it forever over NVLink and nothing reports an error (PyTorch's NCCL
//! watchdog exists for the same reason). The abort runs on a thread of its own, so a hook for
//! the case where even the aborted call never returns (an NCCL enqueue blocked on a dead peer,
//! which must not be aborted under it) still runs: a launcher passes one that ends the
//! process.

use crate::error::{Error, Result};
use crate::{step_name, Communicator};
use candle_core::Tensor;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The default timeout of a collective: survivors of a dead rank exit within about this plus
/// the time to their next collective, under the minute that PyTorch-style launchers allow.
pub const DEFAULT_COMM_TIMEOUT: Duration = Duration::from_secs(45);

/// Called from the watchdog thread with the error when an aborted call has still not
/// returned after the grace period (see [`Watchdog::with_stuck_hook`]).
pub type StuckHook = Arc<dyn Fn(&Error) + Send + Sync>;

/// The ranks a collective waits for.
#[derive(Debug, Clone)]
enum Waiting {
    /// Every other rank.
    All,
    /// These ranks.
    Ranks(Vec<usize>),
    /// No rank: this rank's own device work ([`Communicator::watch_wait`]).
    Device,
}

impl Waiting {
    fn describe(&self, rank: usize, world: usize) -> String {
        let mut ranks: Vec<usize> = match self {
            Waiting::All => (0..world).filter(|&p| p != rank).collect(),
            Waiting::Ranks(r) => r.clone(),
            Waiting::Device => return "its own GPU work: a kernel ran past the timeout".into(),
        };
        ranks.sort_unstable();
        match ranks.as_slice() {
            [] => "no other rank".into(),
            [p] => format!("rank {p}"),
            ps => format!(
                "ranks {}",
                ps.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A collective in flight.
#[derive(Debug)]
struct Call {
    op: &'static str,
    waiting: Waiting,
    since: Instant,
}

/// Why the watchdog gave up on the group (kept to answer every later call).
#[derive(Debug, Clone)]
enum Cause {
    /// `op` did not finish within the timeout.
    Timeout {
        op: &'static str,
        step: String,
        waiting: String,
    },
    /// The inner communicator reported an error outside any call; its text and the rank it
    /// names, if any.
    Reported {
        text: String,
        peer: Option<usize>,
        step: String,
    },
}

#[derive(Debug)]
struct Fired {
    cause: Cause,
    at: Instant,
}

#[derive(Debug)]
struct State {
    /// The step [`Communicator::note_step`] named last.
    step: (usize, &'static str),
    call: Option<Call>,
    fired: Option<Fired>,
    /// The stuck hook has run.
    stuck_reported: bool,
    stop: bool,
}

struct Shared {
    inner: Arc<dyn Communicator>,
    timeout: Duration,
    state: Mutex<State>,
    wake: Condvar,
    stuck: Option<(Duration, StuckHook)>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error every call returns once the watchdog has fired.
    fn error(&self, cause: &Cause) -> Error {
        let rank = self.inner.rank();
        match cause {
            Cause::Timeout { op, step, waiting } => Error::Timeout {
                rank,
                op,
                step: step.clone(),
                waiting: waiting.clone(),
                timeout: self.timeout,
            },
            Cause::Reported { text, peer, step } => Error::Collective {
                rank,
                op: "communication",
                step: step.clone(),
                cause: Box::new(match peer {
                    Some(p) => Error::PeerFailed {
                        rank: *p,
                        reason: text.clone(),
                    },
                    None => Error::Comm(text.clone()),
                }),
            },
        }
    }
}

/// A communicator whose collectives may take at most a timeout; see the module docs. Wrap
/// each rank's communicator in one ([`Watchdog::new`]) and use it in its place.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Watchdog({:?}, timeout {:?})",
            self.shared.inner, self.shared.timeout
        )
    }
}

impl Watchdog {
    /// Watches `inner` with `timeout` per collective (see [`DEFAULT_COMM_TIMEOUT`]); starts
    /// the watchdog thread, which polls every tenth of the timeout (10 ms to 1 s).
    pub fn new(inner: Arc<dyn Communicator>, timeout: Duration) -> Self {
        Self::start(inner, timeout, None)
    }

    /// [`Self::new`], and when a call is still in flight `grace` after the abort, `hook` runs
    /// on the watchdog thread with the error (once): a launcher ends the process there, since
    /// nothing else can free a thread that NCCL keeps.
    pub fn with_stuck_hook(
        inner: Arc<dyn Communicator>,
        timeout: Duration,
        grace: Duration,
        hook: StuckHook,
    ) -> Self {
        Self::start(inner, timeout, Some((grace, hook)))
    }

    fn start(
        inner: Arc<dyn Communicator>,
        timeout: Duration,
        stuck: Option<(Duration, StuckHook)>,
    ) -> Self {
        let shared = Arc::new(Shared {
            inner,
            timeout,
            state: Mutex::new(State {
                step: (0, "setup"),
                call: None,
                fired: None,
                stuck_reported: false,
                stop: false,
            }),
            wake: Condvar::new(),
            stuck,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("comm-watchdog-{}", shared.inner.rank()))
            .spawn(move || watch(&s))
            .ok();
        Self { shared, thread }
    }

    /// The timeout.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// Runs the collective `f` (`op`, waiting for `waiting`) as the call in flight.
    fn run<R>(
        &self,
        op: &'static str,
        waiting: Waiting,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        {
            let mut st = self.shared.lock();
            if let Some(fired) = &st.fired {
                return Err(self.shared.error(&fired.cause));
            }
            st.call = Some(Call {
                op,
                waiting,
                since: Instant::now(),
            });
        }
        let r = f();
        let mut st = self.shared.lock();
        st.call = None;
        // After an abort the inner error says only that the call was cut short: the recorded
        // cause says why.
        if let Some(fired) = &st.fired {
            return Err(self.shared.error(&fired.cause));
        }
        let step = st.step;
        drop(st);
        r.map_err(|e| match e {
            e @ (Error::PeerFailed { .. } | Error::Comm(_)) => Error::Collective {
                rank: self.shared.inner.rank(),
                op,
                step: step_name(step.0, step.1),
                cause: Box::new(e),
            },
            e => e,
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            // The thread only waits on the condition variable or runs the stuck hook.
            let _ = t.join();
        }
    }
}

/// The watchdog thread's loop.
fn watch(shared: &Arc<Shared>) {
    let poll = (shared.timeout / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut st = shared.lock();
    loop {
        st = shared
            .wake
            .wait_timeout(st, poll)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if st.stop {
            return;
        }
        let (epoch, phase) = st.step;
        if let Some(fired) = &st.fired {
            let Some((grace, hook)) = &shared.stuck else {
                continue;
            };
            if st.call.is_some() && !st.stuck_reported && fired.at.elapsed() >= *grace {
                let e = shared.error(&fired.cause);
                st.stuck_reported = true;
                drop(st);
                hook(&e);
                st = shared.lock();
            }
            continue;
        }
        let overdue = st
            .call
            .as_ref()
            .filter(|c| c.since.elapsed() >= shared.timeout)
            .map(|c| Cause::Timeout {
                op: c.op,
                step: step_name(epoch, phase),
                waiting: c
                    .waiting
                    .describe(shared.inner.rank(), shared.inner.world()),
            });
        let cause = match overdue {
            Some(c) => Some(c),
            None => {
                // Not under the lock: the caller's calls must not wait for the inner query.
                drop(st);
                let reported = shared.inner.async_error();
                st = shared.lock();
                reported.map(|e| Cause::Reported {
                    peer: e.failed_peer(),
                    text: match e {
                        Error::PeerFailed { reason, .. } => reason,
                        e => e.to_string(),
                    },
                    step: step_name(epoch, phase),
                })
            }
        };
        let Some(cause) = cause else { continue };
        let reason = shared.error(&cause).to_string();
        st.fired = Some(Fired {
            cause,
            at: Instant::now(),
        });
        drop(st);
        // On a thread of its own: an abort that blocks must not keep the stuck hook from
        // running.
        let inner = shared.inner.clone();
        let _ = std::thread::Builder::new()
            .name("comm-abort".into())
            .spawn(move || inner.abort(&reason));
        st = shared.lock();
    }
}

/// The ranks an exchange waits for: those it receives rows from or sends rows to.
fn exchange_peers(rank: usize, sends: &[Tensor], recv_rows: &[usize]) -> Waiting {
    let ranks = (0..sends.len().max(recv_rows.len()))
        .filter(|&p| p != rank)
        .filter(|&p| {
            recv_rows.get(p).is_some_and(|&r| r > 0)
                || sends.get(p).is_some_and(|s| s.elem_count() > 0)
        })
        .collect();
    Waiting::Ranks(ranks)
}

impl Communicator for Watchdog {
    fn rank(&self) -> usize {
        self.shared.inner.rank()
    }

    fn world(&self) -> usize {
        self.shared.inner.world()
    }

    fn exchange(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>> {
        let waiting = exchange_peers(self.rank(), sends, recv_rows);
        self.run("exchange", waiting, || {
            self.shared.inner.exchange(sends, recv_rows)
        })
    }

    fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.run("all-reduce", Waiting::All, || {
            self.shared.inner.all_reduce_sum(t)
        })
    }

    fn all_gather(&self, x: &Tensor) -> Result<Tensor> {
        self.run("all-gather", Waiting::All, || {
            self.shared.inner.all_gather(x)
        })
    }

    fn shift_overlapped(
        &self,
        x: &Tensor,
        k: usize,
        recv_rows: usize,
        local: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Tensor> {
        let (rank, world) = (self.rank(), self.world());
        let waiting = match crate::ring_peers("comm shift", rank, world, k) {
            Ok((dst, src)) if dst == src => Waiting::Ranks(vec![src]),
            Ok((dst, src)) => Waiting::Ranks(vec![src, dst]),
            Err(_) => Waiting::Ranks(Vec::new()),
        };
        self.run("ring shift", waiting, || {
            self.shared.inner.shift_overlapped(x, k, recv_rows, local)
        })
    }

    fn reduce_scatter_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.run("reduce-scatter", Waiting::All, || {
            self.shared.inner.reduce_scatter_sum(t)
        })
    }

    fn bytes_sent(&self) -> u64 {
        self.shared.inner.bytes_sent()
    }

    fn time_spent(&self) -> Duration {
        self.shared.inner.time_spent()
    }

    fn watch_wait(&self, what: &'static str, wait: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.run(what, Waiting::Device, wait)
    }

    fn abort(&self, reason: &str) {
        self.shared.inner.abort(reason)
    }

    /// The inner communicator's report first (the in-process group's names the rank that
    /// failed first, which may be another than this one), else why this watchdog fired.
    fn async_error(&self) -> Option<Error> {
        if let Some(e) = self.shared.inner.async_error() {
            return Some(e);
        }
        let st = self.shared.lock();
        st.fired.as_ref().map(|f| self.shared.error(&f.cause))
    }

    fn note_step(&self, epoch: usize, phase: &'static str) {
        self.shared.lock().step = (epoch, phase);
        self.shared.inner.note_step(epoch, phase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalComm;
    use candle_core::Device;

    fn watched(c: LocalComm, timeout: Duration) -> Watchdog {
        Watchdog::new(Arc::new(c), timeout)
    }

    #[test]
    fn a_stalled_rank_times_the_others_out_naming_the_step() {
        // Rank 2 stalls before its all-reduce; ranks 0 and 1 give up after the timeout with
        // an error naming themselves, the step and the rank they waited for; rank 2's own
        // call, when it comes, fails at once with the first survivor's failure.
        let timeout = Duration::from_millis(300);
        let t0 = Instant::now();
        let out = LocalComm::run_group(3, |c| {
            let w = watched(c, timeout);
            w.note_step(4, "gradient all-reduce");
            let x = Tensor::ones(3, candle_core::DType::F32, &Device::Cpu).unwrap();
            if w.rank() == 2 {
                std::thread::sleep(Duration::from_millis(1500));
            }
            let r = w.all_reduce_sum(&x).map(|_| ()).map_err(|e| e.to_string());
            (r, t0.elapsed())
        });
        // The first survivor to time out names itself and the ranks it waited for; the other
        // may time out too, or learn of the first one's abort first and name it.
        for (rank, (r, took)) in out.iter().enumerate().take(2) {
            let e = r.as_ref().unwrap_err();
            assert!(
                e.contains(&format!("rank {rank}"))
                    && e.contains(
                        "all-reduce at epoch 4 (gradient all-reduce) did not finish \
                                   within 0.3 s"
                    ),
                "{e}"
            );
            assert!(*took < Duration::from_millis(1400), "rank {rank}: {took:?}");
        }
        assert!(
            out.iter().take(2).any(|(r, _)| {
                let e = r.as_ref().unwrap_err();
                e.contains("waiting for ranks 1, 2") || e.contains("waiting for ranks 0, 2")
            }),
            "{out:?}"
        );
        let e2 = out[2].0.as_ref().unwrap_err();
        assert!(
            e2.contains("rank 2 at epoch 4") && e2.contains("did not finish"),
            "{e2}"
        );
        assert!(out[2].1 < Duration::from_millis(2500), "{:?}", out[2].1);
    }

    #[test]
    fn a_device_wait_past_the_timeout_fails_naming_the_rank_and_step() {
        // A rank's own device work hangs with no collective in flight (on every rank at once
        // nothing else would notice): the wait is timed like a collective, and the stuck
        // hook runs when it does not come back within the grace (here it does after 400 ms).
        let timeout = Duration::from_millis(100);
        let hooked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let out = LocalComm::run_group(1, |c| {
            let h = hooked.clone();
            let hook: StuckHook = Arc::new(move |_| {
                h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            let w =
                Watchdog::with_stuck_hook(Arc::new(c), timeout, Duration::from_millis(100), hook);
            w.note_step(1, "forward");
            let mut quick = || Ok(());
            w.watch_wait("device wait", &mut quick).unwrap();
            let mut slow = || {
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            };
            w.watch_wait("device wait", &mut slow)
                .unwrap_err()
                .to_string()
        });
        for (rank, e) in out.iter().enumerate() {
            assert!(
                e.contains(&format!(
                    "rank {rank}: device wait at epoch 1 (forward) did not finish"
                )) && e.contains("its own GPU work: a kernel ran past the timeout"),
                "{e}"
            );
        }
        assert!(hooked.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    }

    #[test]
    fn calls_that_finish_in_time_pass_through() {
        let out = LocalComm::run_group(2, |c| {
            let w = watched(c, Duration::from_secs(5));
            let x = Tensor::new(&[[w.rank() as f32 + 1.0]], &Device::Cpu).unwrap();
            let s = w.all_reduce_sum(&x).unwrap();
            let g = w.all_gather(&x).unwrap();
            assert!(w.async_error().is_none());
            (
                s.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                g.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                w.bytes_sent(),
            )
        });
        for (s, g, bytes) in out {
            assert_eq!((s, g), (vec![3.0], vec![1.0, 2.0]));
            assert!(bytes > 0);
        }
    }

    #[test]
    fn a_failed_peer_is_named_with_the_step() {
        // Rank 1 aborts (its training failed); rank 0, inside an exchange with it, fails
        // promptly with an error naming rank 1, its reason and rank 0's step.
        let t0 = Instant::now();
        let out = LocalComm::run_group(2, |c| {
            let w = watched(c, Duration::from_secs(30));
            w.note_step(2, "forward");
            if w.rank() == 1 {
                std::thread::sleep(Duration::from_millis(100));
                w.abort("out of memory in the backward");
                return String::new();
            }
            let e = Tensor::zeros((0, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
            let one = Tensor::zeros((1, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
            let e = w.exchange(&[e, one], &[0, 1]).unwrap_err();
            assert_eq!(e.failed_peer(), Some(1));
            e.to_string()
        });
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(
            out[0].starts_with("rank 0 at epoch 2 (forward)")
                && out[0].contains("rank 1 failed: out of memory in the backward"),
            "{}",
            out[0]
        );
    }

    #[test]
    fn an_aborted_call_that_never_returns_runs_the_stuck_hook() {
        // A communicator whose all-reduce ignores the abort (as an NCCL enqueue blocked on a
        // dead peer would): the hook runs once, after the grace period.
        #[derive(Debug)]
        struct Stuck(LocalComm);
        impl Communicator for Stuck {
            fn rank(&self) -> usize {
                self.0.rank()
            }
            fn world(&self) -> usize {
                2
            }
            fn exchange(&self, s: &[Tensor], r: &[usize]) -> Result<Vec<Tensor>> {
                self.0.exchange(s, r)
            }
            fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor> {
                std::thread::sleep(Duration::from_millis(800));
                Ok(t.clone())
            }
            fn bytes_sent(&self) -> u64 {
                0
            }
            fn time_spent(&self) -> Duration {
                Duration::ZERO
            }
        }
        let mut g = LocalComm::group(2);
        let called = Arc::new(Mutex::new(Vec::new()));
        let seen = called.clone();
        let hook: StuckHook = Arc::new(move |e| seen.lock().unwrap().push(e.to_string()));
        let w = Watchdog::with_stuck_hook(
            Arc::new(Stuck(g.remove(0))),
            Duration::from_millis(100),
            Duration::from_millis(200),
            hook,
        );
        let x = Tensor::ones(2, candle_core::DType::F32, &Device::Cpu).unwrap();
        let e = w.all_reduce_sum(&x).unwrap_err().to_string();
        assert!(e.contains("did not finish within 0.1 s"), "{e}");
        let called = called.lock().unwrap();
        assert_eq!(called.len(), 1, "{called:?}");
        assert_eq!(called[0], e);
        // Later calls fail at once with the same error.
        assert_eq!(w.all_reduce_sum(&x).unwrap_err().to_string(), e);
    }
}
