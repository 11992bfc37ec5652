//! In-process communicator: one thread per rank, tensors passed through channels.

use super::{check_exchange, Communicator, Counter};
use crate::error::{Error, Result};
use candle_core::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a rank waiting for a message looks whether the group has failed.
const POLL: Duration = Duration::from_millis(10);

/// The group's failure record, shared by its members: the first rank that failed and why.
#[derive(Debug, Default)]
struct Poison {
    /// Set once `first` holds a failure (read without the lock on every wait).
    set: AtomicBool,
    first: Mutex<Option<(usize, String)>>,
}

impl Poison {
    /// Records that `rank` failed, unless another failure came first.
    fn set(&self, rank: usize, reason: &str) {
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some((rank, reason.to_string()));
            self.set.store(true, Ordering::Release);
        }
    }

    /// The first failure, as the error the other ranks' calls return.
    fn error(&self) -> Option<Error> {
        if !self.set.load(Ordering::Acquire) {
            return None;
        }
        let first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        first.as_ref().map(|(rank, reason)| Error::PeerFailed {
            rank: *rank,
            reason: reason.clone(),
        })
    }
}

/// One rank of an in-process group made by [`LocalComm::group`]: ranks are threads of one
/// process, messages are tensors moved through unbounded channels (one per ordered pair of
/// ranks, so successive collectives match in order). Sums run in rank order, so every rank
/// gets bit-identical results. For CPU tests and CPU runs, and for several ranks sharing one
/// GPU (each on its own candle device) to check the partitioned GPU path.
///
/// No rank waits forever for one that failed: a rank that calls [`Communicator::abort`]
/// (its training failed, or its [`crate::Watchdog`] gave up), panics while holding its
/// member, or drops its member in the middle of a collective poisons the group, and every
/// other rank's call then fails within milliseconds with [`Error::PeerFailed`] naming it.
#[derive(Debug)]
pub struct LocalComm {
    rank: usize,
    world: usize,
    /// `to[p]`: the channel to rank `p`.
    to: Vec<Sender<Tensor>>,
    /// `from[p]`: the channel from rank `p`.
    from: Vec<Mutex<Receiver<Tensor>>>,
    sent: Counter,
    /// The group's failure record.
    poison: Arc<Poison>,
}

impl Drop for LocalComm {
    /// A member dropped while its thread panics poisons the group: the others would
    /// otherwise wait for the panicked rank's messages.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.poison.set(self.rank, "its thread panicked");
        }
    }
}

impl LocalComm {
    /// A group of `world` connected ranks; hand element `r` to the thread running rank `r`.
    pub fn group(world: usize) -> Vec<LocalComm> {
        // One channel per ordered pair: `to[src][dst]` and `from[dst][src]` are its two ends
        // (the outer loop runs over `dst`, so each `to[src]` fills in `dst` order).
        let mut to: Vec<Vec<Sender<Tensor>>> = (0..world).map(|_| Vec::new()).collect();
        let mut from: Vec<Vec<Mutex<Receiver<Tensor>>>> = (0..world).map(|_| Vec::new()).collect();
        for from_dst in from.iter_mut() {
            for to_src in to.iter_mut() {
                let (tx, rx) = channel();
                to_src.push(tx);
                from_dst.push(Mutex::new(rx));
            }
        }
        let poison = Arc::new(Poison::default());
        to.into_iter()
            .zip(from)
            .enumerate()
            .map(|(rank, (to, from))| LocalComm {
                rank,
                world,
                to,
                from,
                sent: Counter::default(),
                poison: poison.clone(),
            })
            .collect()
    }

    /// Runs `f` on every member of a [`Self::group`] of `world`, each in its own thread, and
    /// returns what the ranks returned, in rank order. A rank's panic is raised again here
    /// once every thread has ended.
    pub fn run_group<R: Send>(world: usize, f: impl Fn(LocalComm) -> R + Sync) -> Vec<R> {
        std::thread::scope(|s| {
            let f = &f;
            let hs: Vec<_> = Self::group(world)
                .into_iter()
                .map(|c| s.spawn(move || f(c)))
                .collect();
            let out: Vec<_> = hs.into_iter().map(|h| h.join()).collect();
            out.into_iter()
                .map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    fn send(&self, p: usize, t: Tensor) -> Result<()> {
        self.sent.add(&t);
        self.to[p].send(t).map_err(|_| self.left(p))
    }

    /// The group's failure, if any: every call checks it first.
    fn check(&self) -> Result<()> {
        self.poison.error().map_or(Ok(()), Err)
    }

    /// The error of a channel to or from rank `p` that closed: the group's failure if one
    /// was recorded, else `p`'s leaving.
    fn left(&self, p: usize) -> Error {
        self.poison.error().unwrap_or_else(|| Error::PeerFailed {
            rank: p,
            reason: "it left the group (dropped its communicator) in the middle of a \
                     collective"
                .into(),
        })
    }

    /// `t` on the device of `own`: ranks sharing one GPU each run on their own candle device
    /// (own stream and cuBLAS handle, which must not be shared between threads), so a tensor
    /// from another rank is copied over, through the host: the device-to-host copy runs on the
    /// sender's stream (after the kernel that made `t`) and returns when done, so neither
    /// stream can overwrite what the other still reads. (candle's direct device-to-device
    /// copy runs on the receiver's stream without waiting for the sender's.) A test
    /// configuration, not a fast one; a no-op on the CPU and between ranks on one device.
    fn to_own(&self, t: Tensor, own: &Tensor) -> Result<Tensor> {
        if t.device().same_device(own.device()) {
            Ok(t)
        } else {
            Ok(t.to_device(&candle_core::Device::Cpu)?
                .to_device(own.device())?)
        }
    }

    /// The next message from rank `p`, unless the group fails first.
    fn recv(&self, p: usize) -> Result<Tensor> {
        let rx = self.from[p].lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match rx.recv_timeout(POLL) {
                Ok(t) => return Ok(t),
                Err(RecvTimeoutError::Timeout) => self.check()?,
                Err(RecvTimeoutError::Disconnected) => return Err(self.left(p)),
            }
        }
    }
}

impl Communicator for LocalComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn exchange(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>> {
        self.check()?;
        self.sent.timed(|| self.exchange_inner(sends, recv_rows))
    }

    fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.check()?;
        self.sent.timed(|| self.all_reduce_inner(t))
    }

    fn bytes_sent(&self) -> u64 {
        self.sent.get()
    }

    fn time_spent(&self) -> std::time::Duration {
        self.sent.time()
    }

    /// Poisons the group: every rank's calls fail with [`Error::PeerFailed`] naming this rank
    /// and `reason` (unless another rank failed first: the first failure is the one named).
    fn abort(&self, reason: &str) {
        self.poison.set(self.rank, reason);
    }

    /// The group's first failure, whichever rank it was.
    fn async_error(&self) -> Option<Error> {
        self.poison.error()
    }
}

impl LocalComm {
    fn exchange_inner(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>> {
        const OP: &str = "comm exchange";
        let d = check_exchange(OP, self.rank, self.world, sends, recv_rows)?;
        for (p, s) in sends.iter().enumerate() {
            if p != self.rank {
                self.send(p, s.detach())?;
            }
        }
        let own = &sends[self.rank];
        (0..self.world)
            .map(|p| {
                if p == self.rank {
                    return Ok(Tensor::zeros((0, d), own.dtype(), own.device())?);
                }
                let t = self.to_own(self.recv(p)?, own)?;
                if t.dims() != [recv_rows[p], d] || t.dtype() != own.dtype() {
                    return Err(Error::Shape {
                        op: OP,
                        what: format!(
                            "rank {} received {:?} {:?} from rank {p}, expected [{}, {d}] {:?}",
                            self.rank,
                            t.dims(),
                            t.dtype(),
                            recv_rows[p],
                            own.dtype()
                        ),
                    });
                }
                Ok(t)
            })
            .collect()
    }

    fn all_reduce_inner(&self, t: &Tensor) -> Result<Tensor> {
        let t = t.detach();
        for p in 0..self.world {
            if p != self.rank {
                self.send(p, t.clone())?;
            }
        }
        let mut sum: Option<Tensor> = None;
        for p in 0..self.world {
            let part = if p == self.rank {
                t.clone()
            } else {
                self.to_own(self.recv(p)?, &t)?
            };
            if part.dims() != t.dims() || part.dtype() != t.dtype() {
                return Err(Error::Shape {
                    op: "comm all_reduce",
                    what: format!(
                        "rank {} holds {:?} {:?}, rank {p} sent {:?} {:?}",
                        self.rank,
                        t.dims(),
                        t.dtype(),
                        part.dims(),
                        part.dtype()
                    ),
                });
            }
            sum = Some(match sum {
                None => part,
                Some(s) => (s + part)?,
            });
        }
        Ok(sum.unwrap_or(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn exchange_and_all_reduce_across_threads() {
        let world = 3;
        let out = LocalComm::run_group(world, |c| {
            let run = || -> Result<(Vec<Vec<f32>>, Vec<f32>)> {
                let r = c.rank();
                let dev = Device::Cpu;
                // Rank r sends p + 1 rows filled with 10 r + p to rank p.
                let sends: Vec<Tensor> = (0..world)
                    .map(|p| {
                        let rows = if p == r { 0 } else { p + 1 };
                        Tensor::full((10 * r + p) as f32, (rows, 2), &dev).unwrap()
                    })
                    .collect();
                let recv_rows: Vec<usize> =
                    (0..world).map(|p| if p == r { 0 } else { r + 1 }).collect();
                let got = c.exchange(&sends, &recv_rows)?;
                let got = got
                    .iter()
                    .map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
                    .collect();
                let sum = c.all_reduce_sum(&Tensor::new(&[r as f32, 1.0], &dev)?)?;
                Ok((got, sum.to_vec1::<f32>()?))
            };
            run().unwrap()
        });
        for (r, (got, sum)) in out.iter().enumerate() {
            assert_eq!(sum, &[3.0, 3.0]);
            for (p, g) in got.iter().enumerate() {
                let want = if p == r { 0 } else { 2 * (r + 1) };
                assert_eq!(g.len(), want);
                assert!(g.iter().all(|&v| v == (10 * p + r) as f32));
            }
        }
    }

    #[test]
    fn all_gather_and_reduce_scatter_across_threads() {
        let world = 3;
        let out = LocalComm::run_group(world, |c| {
            let run = || -> Result<(Vec<f32>, Vec<f32>)> {
                let r = c.rank() as f32;
                let dev = Device::Cpu;
                // Rank r contributes [[r, r+0.5], [10r, 10r+0.5]].
                let x = Tensor::new(&[[r, r + 0.5], [10. * r, 10. * r + 0.5]], &dev)?;
                let all = c.all_gather(&x)?.flatten_all()?.to_vec1::<f32>()?;
                // Ring steps: rank r sends r + 1 rows of value r; step k brings rank
                // r - k's, with its count, and runs the local work once.
                let rows = |q: usize| Tensor::full(q as f32, (q + 1, 2), &dev);
                for k in 1..world {
                    let src = (c.rank() + world - k) % world;
                    let mut runs = 0;
                    let got = c.shift_overlapped(&rows(c.rank())?, k, src + 1, &mut || {
                        runs += 1;
                        Ok(())
                    })?;
                    assert_eq!(runs, 1);
                    assert_eq!(
                        got.flatten_all()?.to_vec1::<f32>()?,
                        rows(src)?.flatten_all()?.to_vec1::<f32>()?
                    );
                }
                for k in [0, world] {
                    assert!(c.shift_overlapped(&x, k, 2, &mut || Ok(())).is_err());
                }
                // Rank r's block b of the reduce-scatter input is b + 100 r.
                let t = Tensor::arange(0f32, world as f32, &dev)?
                    .reshape((world, 1))?
                    .broadcast_add(&Tensor::new(&[100. * r], &dev)?)?;
                let mine = c.reduce_scatter_sum(&t)?.flatten_all()?.to_vec1::<f32>()?;
                Ok((all, mine))
            };
            run().unwrap()
        });
        let want: Vec<f32> = (0..world)
            .flat_map(|p| {
                let p = p as f32;
                [p, p + 0.5, 10. * p, 10. * p + 0.5]
            })
            .collect();
        for (r, (all, mine)) in out.iter().enumerate() {
            assert_eq!(all, &want);
            // Sum over ranks q of (r + 100 q) = 3 r + 300.
            assert_eq!(mine, &[3.0 * r as f32 + 300.0]);
        }
    }

    #[test]
    fn wrong_shapes_are_errors() {
        let mut g = LocalComm::group(2);
        let c1 = g.pop().unwrap();
        let c0 = g.pop().unwrap();
        let dev = Device::Cpu;
        let e = Tensor::zeros((0, 2), candle_core::DType::F32, &dev).unwrap();
        assert!(c0.exchange(std::slice::from_ref(&e), &[0]).is_err());
        assert!(c0.exchange(&[e.clone(), e.clone()], &[1, 0]).is_err());
        // Rank 1 sends 2 rows where rank 0 expects 1.
        let two = Tensor::zeros((2, 2), candle_core::DType::F32, &dev).unwrap();
        let e1 = e.clone();
        let t = std::thread::spawn(move || {
            c1.exchange(&[two, e1], &[0, 0]).unwrap();
            c1
        });
        assert!(c0.exchange(&[e.clone(), e.clone()], &[0, 1]).is_err());
        drop(t.join().unwrap());
        assert!(c0.all_reduce_sum(&e).is_err());
    }
}
