//! TCP rendezvous for a multi-process run: rank 0 listens on a port and hands its NCCL
//! unique id (128 bytes) to every other rank that connects, as torchrun's `MASTER_ADDR` /
//! `MASTER_PORT` do for PyTorch; no shared file system needed. Plain `std::net`, no CUDA.
//!
//! ```text
//!  rank r > 0                                   rank 0 (listens on MASTER_PORT)
//!  connect MASTER_ADDR:MASTER_PORT (retrying until the timeout: rank 0 may start later)
//!  "GNNRDZV1" rank:u32le world:u32le  ──────▶  holds the connection until all
//!                                               world - 1 ranks have said hello, checks
//!                                               them (same world, distinct ranks 1..world)
//!             ◀──────  0 + the 128 id bytes     to every rank, once all are there, or
//!             ◀──────  1 + len:u16le + text     the reason it refuses, to every rank
//! ```
//!
//! Everything has a deadline ([`TcpRendezvous::timeout`]): a rank that finds nobody
//! listening, or a rank 0 that waits for ranks that never come, fails with an error saying
//! which address and which ranks. Connections that do not start with the greeting (a port
//! scanner, a stray client) are dropped and do not count.

use crate::error::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Bytes of an NCCL unique id.
pub const ID_BYTES: usize = 128;

/// The greeting that starts a rank's hello.
const MAGIC: &[u8; 8] = b"GNNRDZV1";

/// The default rendezvous timeout: ranks of a big run load their data before they meet.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// torchrun's default `MASTER_PORT`.
pub const DEFAULT_PORT: u16 = 29500;

/// Where rank 0 listens and how long everyone waits; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpRendezvous {
    /// Rank 0's host (`MASTER_ADDR`): a name or an address the other ranks can reach.
    pub host: String,
    /// Rank 0's port (`MASTER_PORT`).
    pub port: u16,
    /// How long a rank waits for rank 0, and rank 0 for the others.
    pub timeout: Duration,
}

fn fail(what: String) -> Error {
    Error::Rendezvous(what)
}

impl TcpRendezvous {
    /// Rank 0 at `host:port`, with [`DEFAULT_TIMEOUT`].
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The same with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Rank `rank` of `world`'s part: rank 0 makes the id with `make_id` and serves it
    /// ([`Self::serve`]), the others fetch it ([`Self::fetch`]). Every rank returns the id.
    pub fn share(
        &self,
        rank: usize,
        world: usize,
        make_id: impl FnOnce() -> Result<[u8; ID_BYTES]>,
    ) -> Result<[u8; ID_BYTES]> {
        if world == 0 || rank >= world {
            return Err(fail(format!(
                "rank {rank} is not a rank of a world of {world}"
            )));
        }
        if rank == 0 {
            let id = make_id()?;
            self.serve(world, &id)?;
            Ok(id)
        } else {
            self.fetch(rank, world)
        }
    }

    /// Rank 0: listens on [`Self::port`] on every interface of `host`'s address family and
    /// hands `id` to ranks `1..world`; returns once each has it.
    pub fn serve(&self, world: usize, id: &[u8; ID_BYTES]) -> Result<()> {
        let v6 = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| a.is_ipv6());
        let any = if v6 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        let listener = TcpListener::bind(SocketAddr::new(any, self.port)).map_err(|e| {
            let busy = if e.kind() == ErrorKind::AddrInUse {
                " (another run holds it, or under torchrun its own store does: choose a free \
                 port with --master-port or MASTER_PORT)"
            } else {
                ""
            };
            fail(format!(
                "rank 0 cannot listen on port {}: {e}{busy}",
                self.port
            ))
        })?;
        serve_on(&listener, world, id, self.timeout)
    }

    /// Rank `rank` (`1..world`): connects to rank 0 (retrying until the timeout, since rank 0
    /// may start later) and returns the id it sends.
    pub fn fetch(&self, rank: usize, world: usize) -> Result<[u8; ID_BYTES]> {
        let deadline = Instant::now() + self.timeout;
        let at = format!("{}:{}", self.host, self.port);
        let mut stream = self.connect(rank, &at, deadline)?;
        let mut hello = Vec::with_capacity(16);
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&(rank as u32).to_le_bytes());
        hello.extend_from_slice(&(world as u32).to_le_bytes());
        let io = |e: std::io::Error| {
            let late = matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
            fail(if late {
                format!(
                    "rank {rank}: rank 0 at {at} took the connection but sent no NCCL id within \
                     {} s (it waits for all {world} ranks: are they all started?)",
                    self.timeout.as_secs_f64()
                )
            } else {
                format!("rank {rank}: talking to rank 0 at {at}: {e}")
            })
        };
        stream.write_all(&hello).map_err(io)?;
        let left = deadline.saturating_duration_since(Instant::now());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(io)?;
        let mut status = [0u8; 1];
        stream.read_exact(&mut status).map_err(io)?;
        if status[0] == 0 {
            let mut id = [0u8; ID_BYTES];
            stream.read_exact(&mut id).map_err(io)?;
            return Ok(id);
        }
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).map_err(io)?;
        let mut text = vec![0u8; u16::from_le_bytes(len) as usize];
        stream.read_exact(&mut text).map_err(io)?;
        Err(fail(format!(
            "rank {rank}: rank 0 at {at} refused: {}",
            String::from_utf8_lossy(&text)
        )))
    }

    /// A connection to rank 0, retried until `deadline`.
    fn connect(&self, rank: usize, at: &str, deadline: Instant) -> Result<TcpStream> {
        let mut last = String::from("no address");
        loop {
            match (self.host.as_str(), self.port).to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        let left = deadline.saturating_duration_since(Instant::now());
                        let try_for = left.clamp(Duration::from_millis(1), Duration::from_secs(2));
                        match TcpStream::connect_timeout(&a, try_for) {
                            Ok(s) => return Ok(s),
                            Err(e) => last = format!("{a}: {e}"),
                        }
                    }
                }
                Err(e) => last = format!("cannot resolve {:?}: {e}", self.host),
            }
            if Instant::now() >= deadline {
                return Err(fail(format!(
                    "rank {rank}: nobody listening at {at} (MASTER_ADDR:MASTER_PORT, where rank \
                     0 serves the NCCL id) within {} s; last attempt: {last}",
                    self.timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(50).min(deadline - Instant::now()));
        }
    }
}

/// Reads a rank's hello from `s`: `Some((rank, world))`, or `None` when it is not one.
fn hello(s: &mut TcpStream, deadline: Instant) -> Option<(usize, usize)> {
    let left = deadline.saturating_duration_since(Instant::now());
    s.set_nonblocking(false).ok()?;
    // A client that connects and says nothing does not hold rank 0 for long.
    s.set_read_timeout(Some(
        left.clamp(Duration::from_millis(1), Duration::from_secs(10)),
    ))
    .ok()?;
    let mut b = [0u8; 16];
    s.read_exact(&mut b).ok()?;
    if &b[..8] != MAGIC {
        return None;
    }
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    Some((word(8), word(12)))
}

/// Sends `why` as a refusal to every held connection (best effort: they may have gone).
fn refuse_all(held: &mut [(usize, TcpStream)], why: &str) {
    let text = why.as_bytes();
    let text = &text[..text.len().min(u16::MAX as usize)];
    for (_, s) in held {
        let mut msg = vec![1u8];
        msg.extend_from_slice(&(text.len() as u16).to_le_bytes());
        msg.extend_from_slice(text);
        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = s.write_all(&msg);
    }
}

/// Rank 0's side on a bound `listener`: see the module docs.
fn serve_on(
    listener: &TcpListener,
    world: usize,
    id: &[u8; ID_BYTES],
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let io = |e: std::io::Error| fail(format!("rank 0 on port {port}: {e}"));
    listener.set_nonblocking(true).map_err(io)?;
    let mut held: Vec<(usize, TcpStream)> = Vec::with_capacity(world.saturating_sub(1));
    while held.len() + 1 < world {
        let (mut s, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = (1..world)
                        .filter(|r| !held.iter().any(|(h, _)| h == r))
                        .map(|r| r.to_string())
                        .collect();
                    let why = format!(
                        "rank 0 on port {port}: rank(s) {} of {world} did not connect within {} s",
                        missing.join(", "),
                        timeout.as_secs_f64()
                    );
                    refuse_all(&mut held, &why);
                    return Err(fail(why));
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => return Err(io(e)),
        };
        let Some((rank, says)) = hello(&mut s, deadline) else {
            continue;
        };
        let problem = if says != world {
            Some(format!(
                "rank {rank} (from {from}) says the world has {says} ranks, rank 0 runs {world}: \
                 every process needs the same WORLD_SIZE"
            ))
        } else if rank == 0 || rank >= world {
            Some(format!(
                "a process at {from} says it is rank {rank}, not one of 1..{world}"
            ))
        } else if held.iter().any(|(r, _)| *r == rank) {
            Some(format!(
                "two processes say they are rank {rank} (the second from {from})"
            ))
        } else {
            None
        };
        held.push((rank, s));
        if let Some(why) = problem {
            refuse_all(&mut held, &why);
            return Err(fail(format!("rank 0 on port {port}: {why}")));
        }
    }
    for (rank, s) in &mut held {
        let mut msg = Vec::with_capacity(1 + ID_BYTES);
        msg.push(0u8);
        msg.extend_from_slice(id);
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .and_then(|()| s.write_all(&msg))
            .map_err(|e| fail(format!("rank 0: sending the NCCL id to rank {rank}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seed: u8) -> [u8; ID_BYTES] {
        std::array::from_fn(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
    }

    /// A listener on a free port of 127.0.0.1, and the rendezvous pointing at it.
    fn local(timeout: Duration) -> (TcpListener, TcpRendezvous) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        (
            l,
            TcpRendezvous::new("127.0.0.1", port).with_timeout(timeout),
        )
    }

    #[test]
    fn ranks_in_threads_get_rank_zeros_id() {
        let (l, r) = local(Duration::from_secs(20));
        let want = id(7);
        let got = std::thread::scope(|s| {
            let hs: Vec<_> = (1..4)
                .map(|k| {
                    s.spawn({
                        let r = &r;
                        move || r.fetch(k, 4)
                    })
                })
                .collect();
            serve_on(&l, 4, &want, r.timeout).unwrap();
            hs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        for g in got {
            assert_eq!(g.unwrap(), want);
        }
    }

    /// The child half of [`two_processes_share_the_id`]: fetches the id as rank 1 and prints
    /// it.
    #[test]
    #[ignore = "run as a child process by two_processes_share_the_id"]
    fn rendezvous_child() {
        let port: u16 = std::env::var("GNN_RDZV_TEST_PORT")
            .unwrap()
            .parse()
            .unwrap();
        let r = TcpRendezvous::new("127.0.0.1", port).with_timeout(Duration::from_secs(20));
        let got = r
            .share(1, 2, || unreachable!("rank 1 makes no id"))
            .unwrap();
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        println!("ID:{hex}");
    }

    #[test]
    fn two_processes_share_the_id() {
        let (l, _) = local(Duration::from_secs(20));
        let port = l.local_addr().unwrap().port();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "rendezvous::tests::rendezvous_child",
                "--exact",
                "--ignored",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env("GNN_RDZV_TEST_PORT", port.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let want = id(42);
        serve_on(&l, 2, &want, Duration::from_secs(20)).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let hex: String = want.iter().map(|b| format!("{b:02x}")).collect();
        assert!(text.contains(&format!("ID:{hex}")), "{text}");
    }

    #[test]
    fn nobody_listening_fails_within_the_timeout() {
        let (l, r) = local(Duration::from_millis(400));
        drop(l);
        let t = Instant::now();
        let e = r.fetch(1, 2).unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert!(
            e.contains(&format!("rank 1: nobody listening at 127.0.0.1:{}", r.port))
                && e.contains("within 0.4 s"),
            "{e}"
        );
    }

    #[test]
    fn a_wrong_world_size_fails_both_sides() {
        let (l, r) = local(Duration::from_secs(20));
        let (served, fetched) = std::thread::scope(|s| {
            let h = s.spawn(|| r.fetch(1, 3));
            (serve_on(&l, 2, &id(1), r.timeout), h.join().unwrap())
        });
        let (s, f) = (
            served.unwrap_err().to_string(),
            fetched.unwrap_err().to_string(),
        );
        assert!(
            s.contains("says the world has 3 ranks, rank 0 runs 2"),
            "{s}"
        );
        assert!(
            f.contains("rank 1: rank 0 at") && f.contains("refused"),
            "{f}"
        );
        assert!(f.contains("world has 3 ranks"), "{f}");
    }

    #[test]
    fn rank_zero_names_the_ranks_that_never_came() {
        let (l, r) = local(Duration::from_millis(500));
        // Rank 2 waits longer than rank 0 serves, so that it hears rank 0's refusal rather
        // than timing out first on a loaded machine (both at 0.5 s raced under `cargo test`).
        let patient = r.clone().with_timeout(Duration::from_secs(20));
        let (served, fetched) = std::thread::scope(|s| {
            // Rank 2 of 3 connects; rank 1 never does. A stray connection does not count.
            let h = s.spawn(|| patient.fetch(2, 3));
            let stray = s.spawn(|| {
                let mut c = TcpStream::connect(("127.0.0.1", r.port)).unwrap();
                c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            });
            stray.join().unwrap();
            (serve_on(&l, 3, &id(1), r.timeout), h.join().unwrap())
        });
        let s = served.unwrap_err().to_string();
        assert!(
            s.contains("rank(s) 1 of 3 did not connect within 0.5 s"),
            "{s}"
        );
        let f = fetched.unwrap_err().to_string();
        assert!(
            f.contains("refused") && f.contains("did not connect"),
            "{f}"
        );
    }

    #[test]
    fn duplicate_and_out_of_range_ranks_are_refused() {
        for (a, b, says) in [
            (1, 1, "two processes say they are rank 1"),
            (1, 5, "rank 5"),
        ] {
            let (l, r) = local(Duration::from_secs(20));
            let (served, _, _) = std::thread::scope(|s| {
                let h1 = s.spawn(|| r.fetch(a, 3));
                let h2 = s.spawn(|| r.fetch(b, 3));
                let served = serve_on(&l, 3, &id(1), r.timeout);
                // Closing the port resets a rank still queued behind the refused one.
                drop(l);
                (served, h1.join().unwrap(), h2.join().unwrap())
            });
            let e = served.unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let r = TcpRendezvous::new("127.0.0.1", 1);
        assert!(r.share(2, 2, || Ok(id(0))).is_err());
    }
}
