//! Where the ranks of a run live and how they meet: threads of this process over in-process
//! channels ([`Launch::InProcess`]), one thread per GPU over NCCL ([`Launch::Nccl`]), or one
//! rank per process over NCCL ([`Launch::Process`]): its rank from flags, torchrun's or
//! Slurm's variables ([`ProcessRank::from_env`]), rank 0's NCCL id through a file or over TCP
//! at `MASTER_ADDR:MASTER_PORT` ([`Rendezvous`]). Every launch puts each rank's communicator
//! behind the run's watchdog (and its injected fault, in fault tests).

use super::{local_comms, train_ranks, DistConfig, DistPlan, RankOutcome, Recipe};
use crate::error::{Error, Result};
use crate::trainer::EpochLog;
use candle_core::Device;
use gnn_comm::{Communicator, FaultyComm, StuckHook, TcpRendezvous, Watchdog};
use gnn_graph::Dataset;
#[cfg(feature = "nccl")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// NCCL channels for point-to-point transfers (`NCCL_MAX_P2P_NCHANNELS`) unless the
/// environment sets it ([`default_p2p_channels`]). The ring exchange's shifts are
/// point-to-point, one peer at a time; at 4 channels (the default until session 14) they
/// capped the papers100M-sized exchange at about 130 GB/s a GPU. On 4 H100s, GCN 3x128 at
/// full size: 1,058.5 ms per epoch at 4 channels, 880.1 ms at 32 (exposed exchange 288.6 ->
/// 34.5 ms); at a tenth of that size 94.88 / 86.87 / 85.82 ms at 4 / 16 / 32; GraphSAGE 3x64
/// at full size, which exchanges by all-gather, 809.4 vs 831.6 ms back to back
/// (`bench/records/dist-papers/h100x4-2026-11-27-7`, `h100x4-2026-11-28-2/session14`). The cost is NCCL's own memory,
/// about 13 MiB per channel and peer ([`super::memory::nccl_p2p_reserve`], which the memory
/// pre-flight keeps off each rank's budget).
pub const P2P_CHANNELS: &str = "32";

/// The environment variable [`P2P_CHANNELS`] is the default of.
const P2P_CHANNELS_ENV: &str = "NCCL_MAX_P2P_NCHANNELS";

/// The point-to-point channels NCCL will use: the environment's `NCCL_MAX_P2P_NCHANNELS`
/// where it holds a number, else [`P2P_CHANNELS`].
pub fn p2p_channels() -> usize {
    std::env::var(P2P_CHANNELS_ENV)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| P2P_CHANNELS.parse().unwrap_or(32))
}

/// Sets `NCCL_MAX_P2P_NCHANNELS` to [`P2P_CHANNELS`] unless the environment sets it. Call it
/// before any other thread starts and before NCCL reads its environment
/// ([`super::run()`] does, first thing, for an NCCL launch).
pub fn default_p2p_channels() {
    if std::env::var_os(P2P_CHANNELS_ENV).is_none() {
        std::env::set_var(P2P_CHANNELS_ENV, P2P_CHANNELS);
    }
}

/// Where the ranks of a run live and how they talk.
#[derive(Debug, Clone)]
pub enum Launch {
    /// Threads of this process sharing one device (on a GPU each rank gets its own candle
    /// device: stream and cuBLAS handle), talking through in-process channels
    /// ([`local_comms`]): the partitioned computation, to check it and read its volume.
    InProcess,
    /// One thread per GPU (rank `r` on GPU `r`), NCCL between them (feature `nccl`).
    Nccl,
    /// This process runs one rank of a multi-process NCCL run (feature `nccl`).
    Process(ProcessRank),
}

impl Launch {
    /// Whether the ranks talk through NCCL.
    pub fn uses_nccl(&self) -> bool {
        !matches!(self, Launch::InProcess)
    }

    /// How the report names it: `in-process`, `nccl`, or `nccl, one process per rank`.
    pub fn describe(&self) -> &'static str {
        match self {
            Launch::InProcess => "in-process",
            Launch::Nccl => "nccl",
            Launch::Process(_) => "nccl, one process per rank",
        }
    }
}

/// How the processes of a multi-process run get rank 0's NCCL id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    /// Rank 0 writes it to this file (on a file system every rank reads), the others wait
    /// for it (up to 600 s).
    File(PathBuf),
    /// Rank 0 serves it over TCP, at `MASTER_ADDR:MASTER_PORT` as torchrun's environment
    /// names it ([`gnn_comm::TcpRendezvous`]); no shared file system needed.
    Tcp(TcpRendezvous),
}

impl Rendezvous {
    /// TCP at `host` and `port` where given, else `MASTER_ADDR` and `MASTER_PORT` from the
    /// environment (the port defaults to torchrun's 29500); every rank waits up to `timeout`.
    pub fn tcp_from_env(
        host: Option<String>,
        port: Option<u16>,
        timeout: Duration,
    ) -> Result<Self> {
        Self::tcp_from_vars(host, port, timeout, |name| std::env::var(name))
    }

    /// [`Self::tcp_from_env`] reading the variables through `lookup`.
    fn tcp_from_vars(
        host: Option<String>,
        port: Option<u16>,
        timeout: Duration,
        lookup: impl Fn(&str) -> std::result::Result<String, std::env::VarError>,
    ) -> Result<Self> {
        let host = match host {
            Some(h) => h,
            None => lookup("MASTER_ADDR")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .ok_or_else(|| {
                    Error::Invalid(
                        "TCP rendezvous: no address for rank 0: pass --master-addr or set \
                         MASTER_ADDR (the host rank 0 runs on)"
                            .into(),
                    )
                })?,
        };
        let port = match port {
            Some(p) => p,
            None => match lookup("MASTER_PORT") {
                Ok(p) => p.trim().parse().map_err(|e| {
                    Error::Invalid(format!("environment variable MASTER_PORT={p:?}: {e}"))
                })?,
                Err(_) => gnn_comm::rendezvous::DEFAULT_PORT,
            },
        };
        Ok(Self::Tcp(
            TcpRendezvous::new(host, port).with_timeout(timeout),
        ))
    }

    /// How the log names it.
    pub fn describe(&self) -> String {
        match self {
            Rendezvous::File(p) => format!("NCCL id file {}", p.display()),
            Rendezvous::Tcp(t) => format!("TCP rendezvous at {}:{}", t.host, t.port),
        }
    }
}

/// A process's rank, world size and local GPU as given on its command line: each one given
/// overrides the environment ([`ProcessRank::from_env`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankFlags {
    /// `--rank`.
    pub rank: Option<usize>,
    /// `--world-size`.
    pub world: Option<usize>,
    /// `--local-rank`: the GPU on this host.
    pub local_rank: Option<usize>,
}

/// This process's place in a multi-process run: rank `rank` of `world` on GPU `gpu`, meeting
/// the others through `rendezvous`.
#[derive(Debug, Clone)]
pub struct ProcessRank {
    /// This process's rank.
    pub rank: usize,
    /// Ranks in all.
    pub world: usize,
    /// Its GPU on this host.
    pub gpu: usize,
    /// How it gets rank 0's NCCL id.
    pub rendezvous: Rendezvous,
    /// Where the rank, the world size and the GPU came from (for the log).
    pub sources: String,
}

impl ProcessRank {
    /// Rank, world size and GPU from `flags`, else the environment: each from its flag, else
    /// torchrun's variable, else Slurm's (`srun` sets them for every task):
    ///
    /// | | flag | torchrun | Slurm | default |
    /// |---|---|---|---|---|
    /// | rank | `--rank` | `RANK` | `SLURM_PROCID` | (error) |
    /// | world size | `--world-size` | `WORLD_SIZE` | `SLURM_NTASKS` | (error) |
    /// | GPU | `--local-rank` | `LOCAL_RANK` | `SLURM_LOCALID` | the rank |
    ///
    /// Where `CUDA_VISIBLE_DEVICES` shows exactly one GPU (`srun --gpus-per-task=1`), that
    /// one is the rank's, device 0, whatever the local rank.
    pub fn from_env(flags: RankFlags, rendezvous: Rendezvous) -> Result<Self> {
        Self::from_vars(flags, rendezvous, |name| std::env::var(name))
    }

    /// [`Self::from_env`] reading the variables through `lookup`.
    fn from_vars(
        flags: RankFlags,
        rendezvous: Rendezvous,
        lookup: impl Fn(&str) -> std::result::Result<String, std::env::VarError>,
    ) -> Result<Self> {
        let var = |name: &str| -> Result<Option<usize>> {
            match lookup(name) {
                Ok(v) => v.trim().parse().map(Some).map_err(|e| {
                    Error::Invalid(format!(
                        "environment variable {name}={v:?} is not a non-negative integer ({e})"
                    ))
                }),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(e) => Err(Error::Invalid(format!("environment variable {name}: {e}"))),
            }
        };
        // The flag, else the first variable set, with the name it came from.
        let pick = |flag: Option<usize>, flag_name: &str, names: [&str; 2]| {
            if let Some(v) = flag {
                return Ok(Some((v, flag_name.to_string())));
            }
            for name in names {
                if let Some(v) = var(name)? {
                    return Ok(Some((v, name.to_string())));
                }
            }
            Ok::<_, Error>(None)
        };
        let missing = |what: &str, flag: &str, torchrun: &str, slurm: &str| {
            Error::Invalid(format!(
                "one rank per process: no {what}: pass {flag}, or set {torchrun} (as torchrun \
                 does) or {slurm} (as srun does)"
            ))
        };
        let (rank, from_rank) = pick(flags.rank, "--rank", ["RANK", "SLURM_PROCID"])?
            .ok_or_else(|| missing("rank", "--rank", "RANK", "SLURM_PROCID"))?;
        let (world, from_world) =
            pick(flags.world, "--world-size", ["WORLD_SIZE", "SLURM_NTASKS"])?.ok_or_else(
                || missing("world size", "--world-size", "WORLD_SIZE", "SLURM_NTASKS"),
            )?;
        if world == 0 || rank >= world {
            return Err(Error::Invalid(format!(
                "rank {rank} ({from_rank}) is not a rank of a world of {world} ({from_world})"
            )));
        }
        let (mut gpu, mut from_gpu) = pick(
            flags.local_rank,
            "--local-rank",
            ["LOCAL_RANK", "SLURM_LOCALID"],
        )?
        .unwrap_or((rank, "the rank".to_string()));
        if let Ok(v) = lookup("CUDA_VISIBLE_DEVICES") {
            if v.split(',').filter(|d| !d.trim().is_empty()).count() == 1 && gpu != 0 {
                gpu = 0;
                from_gpu = format!("the one GPU CUDA_VISIBLE_DEVICES={v} shows");
            }
        }
        Ok(Self {
            rank,
            world,
            gpu,
            rendezvous,
            sources: format!(
                "rank from {from_rank}, world size from {from_world}, GPU from {from_gpu}"
            ),
        })
    }
}

/// How long an aborted collective may take to return before an NCCL launch ends the process
/// ([`gnn_comm::Watchdog::with_stuck_hook`]): the survivors of a dead rank are gone within
/// [`gnn_comm::DEFAULT_COMM_TIMEOUT`] plus this, under a minute.
pub const STUCK_GRACE: Duration = Duration::from_secs(10);

/// `comm` as the run's fault settings want it: behind a watchdog of
/// [`DistConfig::comm_timeout`] (with `stuck` as its stuck hook, when given), then failing on
/// purpose where [`DistConfig::fault`] names its rank. The fault sits outside the watchdog,
/// as a rank killed or hung outside communication would: its own watchdog does not see it.
fn guard(
    cfg: &DistConfig,
    comm: Arc<dyn Communicator>,
    stuck: Option<StuckHook>,
) -> Arc<dyn Communicator> {
    let comm: Arc<dyn Communicator> = match (cfg.comm_timeout, stuck) {
        (None, _) => comm,
        (Some(t), None) => Arc::new(Watchdog::new(comm, t)),
        (Some(t), Some(hook)) => Arc::new(Watchdog::with_stuck_hook(comm, t, STUCK_GRACE, hook)),
    };
    match cfg.fault {
        Some(f) => FaultyComm::wrap(comm, f),
        None => comm,
    }
}

/// Trains the ranks `cfg.launch` puts in this process ([`DistConfig::world`] of them for the
/// launches that run every rank here) and returns their outcomes; `device` is the run's
/// device (what the in-process ranks share). Under [`Launch::Nccl`] a failed rank ends the
/// process (see [`nccl_threads`]).
pub(super) fn train_launched(
    cfg: &DistConfig,
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    device: &Device,
    on_epoch: &(dyn Fn(&EpochLog) + Sync),
) -> Result<Vec<RankOutcome>> {
    let ranks = cfg.world();
    match &cfg.launch {
        Launch::Process(proc) => Ok(vec![nccl_process(cfg, plan, ds, recipe, proc, on_epoch)?]),
        Launch::Nccl => nccl_threads(cfg, plan, ds, recipe, on_epoch),
        Launch::InProcess => {
            // Ranks sharing a GPU each get their own candle device (stream and cuBLAS handle:
            // a cuBLAS handle must not be used by two threads at once).
            let devices = match device {
                Device::Cuda(_) => (0..ranks)
                    .map(|_| Device::new_cuda_with_stream(0))
                    .collect::<candle_core::Result<Vec<_>>>()?,
                d => vec![d.clone(); ranks],
            };
            println!(
                "{ranks} in-process ranks on {:?} (channels, not NCCL)",
                device.location()
            );
            let local = local_comms(ranks);
            let make = |rank: usize, dev: &Device| Ok(guard(cfg, local(rank, dev)?, None));
            train_ranks(
                plan,
                ds,
                recipe,
                &make,
                &devices,
                cfg.resume.as_deref(),
                on_epoch,
                &|rank, e| eprintln!("rank {rank} failed: {e}"),
            )
        }
    }
}

/// GPU `gpu`, opened and prepared ([`crate::prepare_device`]); `what` names it in errors.
#[cfg(feature = "nccl")]
fn open_gpu(gpu: usize, what: &str) -> Result<Device> {
    let d = Device::new_cuda(gpu)
        .map_err(|e| Error::Invalid(format!("opening GPU {gpu}{what}: {e}")))?;
    crate::prepare_device(&d)?;
    Ok(d)
}

/// Ends the process at once with status 1 after printing `e` and `then` (a failed NCCL
/// rank, whose peers wait inside NCCL): through `_exit`, not `exit`, whose atexit handlers
/// would tear CUDA down under the threads still inside it (a segmentation fault instead of
/// the error).
#[cfg(feature = "nccl")]
fn end_process(e: &dyn std::fmt::Display, then: &str) -> ! {
    use std::io::Write;
    eprintln!("Error: {e}\n{then}");
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process at once; nothing runs after it.
    unsafe { libc::_exit(1) }
}

/// The stuck hook of an NCCL launch's watchdogs: ends the process.
#[cfg(feature = "nccl")]
fn end_when_stuck() -> StuckHook {
    Arc::new(|e| {
        let then = format!(
            "ending the process: the aborted collective did not return within {} s",
            STUCK_GRACE.as_secs()
        );
        end_process(e, &then)
    })
}

/// Rank 0 makes the NCCL id and writes it to `path` (refusing a file left by an earlier
/// run); the others wait for it (up to 600 s).
#[cfg(feature = "nccl")]
fn id_through_file(rank: usize, path: &Path) -> Result<gnn_comm::NcclId> {
    use gnn_comm::NcclId;
    use std::time::Instant;
    if rank == 0 {
        // A leftover id from an earlier run would send the other ranks to a communicator
        // that never forms; refuse instead of overwriting under their feet.
        if path.exists() {
            return Err(Error::Invalid(format!(
                "{}: the NCCL id file exists already (an earlier run's?); remove it or use a \
                 fresh path for each run",
                path.display()
            )));
        }
        let id = NcclId::new()?;
        let tmp = path.with_extension("partial");
        id.write(&tmp)?;
        std::fs::rename(&tmp, path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        return Ok(id);
    }
    let t = Instant::now();
    loop {
        if path.exists() {
            return Ok(NcclId::read(path)?);
        }
        if t.elapsed().as_secs() > 600 {
            return Err(Error::Invalid(format!(
                "{}: no NCCL id after 600 s; is rank 0 running?",
                path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One rank of a multi-process run: gets the NCCL id through the rendezvous, joins on its
/// GPU (the process ends if that takes longer than the watchdog's timeout) and trains
/// behind the watchdog (which ends the process when an aborted collective never returns).
#[cfg(feature = "nccl")]
fn nccl_process(
    cfg: &DistConfig,
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    proc: &ProcessRank,
    on_epoch: &(dyn Fn(&EpochLog) + Sync),
) -> Result<RankOutcome> {
    use gnn_comm::{NcclComm, NcclId};
    let id = match &proc.rendezvous {
        Rendezvous::File(path) => id_through_file(proc.rank, path)?,
        Rendezvous::Tcp(t) => {
            NcclId::from_bytes(t.share(proc.rank, proc.world, || Ok(NcclId::new()?.to_bytes()))?)
        }
    };
    let device = open_gpu(proc.gpu, " (the rank's local GPU)")?;
    println!(
        "rank {} of {} on GPU {} ({}), NCCL id through the {}",
        proc.rank,
        proc.world,
        proc.gpu,
        proc.sources,
        proc.rendezvous.describe()
    );
    // Joining is collective and no watchdog sees it yet: a rank that died after the
    // rendezvous would keep the others in it.
    let joined = cfg.comm_timeout.map(|t| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rank = proc.rank;
        std::thread::spawn(move || {
            if rx.recv_timeout(t) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let e = format!(
                    "rank {rank}: joining the NCCL communicator did not finish within {} s (a \
                     rank died after the rendezvous?)",
                    t.as_secs_f64()
                );
                end_process(&e, "ending the process");
            }
        });
        tx
    });
    let comm = NcclComm::new(&id, proc.rank, proc.world, &device, true);
    drop(joined);
    let comm = Arc::new(comm?.with_overlap(cfg.overlap));
    let comm = guard(cfg, comm, Some(end_when_stuck()));
    let out = super::train_rank(
        plan,
        ds,
        recipe,
        comm.clone(),
        &device,
        cfg.resume.as_deref(),
        on_epoch,
    );
    if let Err(e) = &out {
        comm.abort(&e.to_string());
    }
    out
}

#[cfg(not(feature = "nccl"))]
fn nccl_process(
    _: &DistConfig,
    _: &DistPlan,
    _: &Dataset,
    _: Recipe<'_>,
    _: &ProcessRank,
    _: &(dyn Fn(&EpochLog) + Sync),
) -> Result<RankOutcome> {
    Err(no_nccl())
}

/// Ranks `0..ranks` on GPUs `0..ranks`, one thread each, over NCCL ([`NcclGroup`]). A failed
/// rank (out of memory, say) leaves the others inside an NCCL collective that only their
/// watchdogs would end, so it prints its error and ends the process with status 1
/// ([`NcclGroup::end_run`]), as torchrun does when a worker fails.
#[cfg(feature = "nccl")]
fn nccl_threads(
    cfg: &DistConfig,
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    on_epoch: &(dyn Fn(&EpochLog) + Sync),
) -> Result<Vec<RankOutcome>> {
    let ranks = cfg.world();
    let group = super::setup::phase(
        || format!("opening GPUs 0..{ranks}"),
        || NcclGroup::open(&(0..ranks).collect::<Vec<_>>(), cfg.overlap),
    )?;
    println!(
        "{ranks} ranks on GPUs 0..{ranks}, NCCL (NCCL_MAX_P2P_NCHANNELS={})",
        std::env::var(P2P_CHANNELS_ENV).unwrap_or_default()
    );
    if let Some((_, total)) = crate::device::device_memory_info(&group.devices[0]) {
        if std::env::var_os(crate::MEMORY_LIMIT_ENV).is_some() {
            println!(
                "each GPU limited to {} ({})",
                crate::device::gib(total),
                crate::MEMORY_LIMIT_ENV
            );
        }
    }
    let make =
        |rank: usize, dev: &Device| Ok(guard(cfg, group.join(rank, dev)?, Some(end_when_stuck())));
    train_ranks(
        plan,
        ds,
        recipe,
        &make,
        &group.devices,
        cfg.resume.as_deref(),
        on_epoch,
        &NcclGroup::end_run,
    )
}

/// One NCCL group over GPUs of this process, one rank per GPU (rank `r` on `gpus[r]`), for
/// the threads of [`super::train_ranks`] / [`super::train_ranks_with_control`]: the devices,
/// opened and prepared, and each rank's communicator ([`Self::join`], [`Self::guarded`]).
/// What [`Launch::Nccl`] runs on GPUs `0..ranks`, and the Python package's
/// `train(..., devices=[...])` on the GPUs it lists.
#[cfg(feature = "nccl")]
pub struct NcclGroup {
    /// Rank `r`'s device: GPU `gpus[r]`.
    pub devices: Vec<Device>,
    id: gnn_comm::NcclId,
    overlap: bool,
    /// Every communicator [`Self::join`] has handed out, for [`Self::abort_all_or_end`].
    joined: std::sync::Mutex<Vec<Arc<dyn Communicator>>>,
}

#[cfg(feature = "nccl")]
impl NcclGroup {
    /// Opens GPUs `gpus` (distinct ordinals) and makes the group's NCCL id. `overlap`: a
    /// sliced aggregation's own-block slices run while the exchange is in flight
    /// ([`DistConfig::overlap`]). Sets NCCL's point-to-point channels first
    /// ([`default_p2p_channels`]).
    pub fn open(gpus: &[usize], overlap: bool) -> Result<Self> {
        let mut seen = std::collections::BTreeSet::new();
        if gpus.is_empty() || !gpus.iter().all(|g| seen.insert(*g)) {
            return Err(Error::Invalid(format!(
                "an NCCL group needs one or more distinct GPUs, not {gpus:?}"
            )));
        }
        default_p2p_channels();
        let devices = gpus
            .iter()
            .map(|&g| open_gpu(g, ""))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            devices,
            id: gnn_comm::NcclId::new()?,
            overlap,
            joined: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Rank `rank`'s communicator on `device` (its entry of [`Self::devices`]); collective:
    /// every rank joins at the same time, each from its own thread.
    pub fn join(&self, rank: usize, device: &Device) -> gnn_comm::Result<Arc<dyn Communicator>> {
        let comm = gnn_comm::NcclComm::new(&self.id, rank, self.devices.len(), device, true)?;
        let comm: Arc<dyn Communicator> = Arc::new(comm.with_overlap(self.overlap));
        self.joined
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(comm.clone());
        Ok(comm)
    }

    /// [`Self::join`] behind a watchdog of `timeout` ([`gnn_comm::Watchdog`]; `None`: none)
    /// that ends the process when an aborted collective does not return within
    /// [`STUCK_GRACE`].
    pub fn guarded(
        &self,
        rank: usize,
        device: &Device,
        timeout: Option<Duration>,
    ) -> gnn_comm::Result<Arc<dyn Communicator>> {
        let comm = self.join(rank, device)?;
        Ok(match timeout {
            Some(t) => Arc::new(Watchdog::with_stuck_hook(
                comm,
                t,
                STUCK_GRACE,
                end_when_stuck(),
            )),
            None => comm,
        })
    }

    /// An `on_rank_error` that keeps the process: once every rank has joined, aborts every
    /// rank's communicator (`ncclCommAbort`, on a thread of its own as the watchdog does,
    /// since an abort can block), so the peers' collectives fail at once and the run returns
    /// rank `rank`'s error to its caller (the Python package raises it). Before that the peers
    /// wait in `ncclCommInitRank`, which nothing aborts, so it ends the process as
    /// [`Self::end_run`] does. A peer whose abort is refused (it is inside an enqueue) is left
    /// to its watchdog, whose stuck hook ends the process if it never returns.
    pub fn abort_all_or_end(&self, rank: usize, e: &Error) {
        let joined = self
            .joined
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if joined.len() < self.devices.len() {
            Self::end_run(rank, e);
            return;
        }
        let reason = format!("rank {rank} failed: {e}");
        let spawned = std::thread::Builder::new()
            .name("comm-abort-all".into())
            .spawn(move || {
                for comm in &joined {
                    comm.abort(&reason);
                }
            });
        if spawned.is_err() {
            Self::end_run(rank, e);
        }
    }

    /// The `on_rank_error` of a run over the group: prints rank `rank`'s error and ends the
    /// process with status 1 (its peers wait inside NCCL for it).
    pub fn end_run(rank: usize, e: &Error) {
        end_process(
            &format!("rank {rank} failed: {e}"),
            "ending the run (the other ranks wait in NCCL)",
        )
    }
}

#[cfg(not(feature = "nccl"))]
fn nccl_threads(
    _: &DistConfig,
    _: &DistPlan,
    _: &Dataset,
    _: Recipe<'_>,
    _: &(dyn Fn(&EpochLog) + Sync),
) -> Result<Vec<RankOutcome>> {
    Err(no_nccl())
}

/// The error of an NCCL launch in a build without the `nccl` feature.
pub(super) fn no_nccl() -> Error {
    Error::Invalid("NCCL launches need a build with gnn-train's `nccl` feature".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::env::VarError;

    fn lookup<'a>(
        vars: &'a [(&str, &str)],
    ) -> impl Fn(&str) -> std::result::Result<String, VarError> + 'a {
        |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .ok_or(VarError::NotPresent)
        }
    }

    fn file() -> Rendezvous {
        Rendezvous::File("id".into())
    }

    fn with_flags(flags: RankFlags, vars: &[(&str, &str)]) -> Result<ProcessRank> {
        ProcessRank::from_vars(flags, file(), lookup(vars))
    }

    fn process(vars: &[(&str, &str)]) -> Result<ProcessRank> {
        with_flags(RankFlags::default(), vars)
    }

    #[test]
    fn process_ranks_come_from_torchruns_variables() {
        let p = process(&[("RANK", "1"), ("WORLD_SIZE", "4")]).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (1, 4, 1));
        assert_eq!(p.rendezvous, file());
        assert_eq!(
            p.sources,
            "rank from RANK, world size from WORLD_SIZE, GPU from the rank"
        );
        let p = process(&[("RANK", " 3 "), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "0")]).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (3, 4, 0));
        for (vars, says) in [
            (&[("WORLD_SIZE", "2")][..], "set RANK"),
            (&[("RANK", "0")][..], "set WORLD_SIZE"),
            (&[("RANK", "2"), ("WORLD_SIZE", "2")][..], "not a rank"),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")][..], "not a rank"),
            (&[("RANK", "-1"), ("WORLD_SIZE", "2")][..], "RANK=\"-1\""),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "x")][..],
                "LOCAL_RANK",
            ),
        ] {
            let e = process(vars).unwrap_err().to_string();
            assert!(e.contains(says), "{vars:?}: {e}");
        }
    }

    #[test]
    fn slurm_fills_in_and_flags_and_torchrun_come_first() {
        let slurm = [
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
        ];
        let p = process(&slurm).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (5, 8, 1));
        assert_eq!(
            p.sources,
            "rank from SLURM_PROCID, world size from SLURM_NTASKS, GPU from SLURM_LOCALID"
        );
        // torchrun inside an allocation: its variables win, field by field.
        let mut both = slurm.to_vec();
        both.extend([("RANK", "2"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "2")]);
        let p = process(&both).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (2, 4, 2));
        // Flags win over both.
        let flags = RankFlags {
            rank: Some(0),
            world: Some(2),
            local_rank: None,
        };
        let p = with_flags(flags, &both).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (0, 2, 2));
        assert!(p
            .sources
            .starts_with("rank from --rank, world size from --world-size"));
        // srun --gpus-per-task=1: the task sees its one GPU as device 0.
        let mut one = slurm.to_vec();
        one.push(("CUDA_VISIBLE_DEVICES", "3"));
        let p = process(&one).unwrap();
        assert_eq!(p.gpu, 0);
        assert!(
            p.sources.contains("CUDA_VISIBLE_DEVICES=3"),
            "{}",
            p.sources
        );
        one.pop();
        one.push(("CUDA_VISIBLE_DEVICES", "0,1,2,3"));
        assert_eq!(process(&one).unwrap().gpu, 1);
        let e = process(&[("SLURM_NTASKS", "2")]).unwrap_err().to_string();
        assert!(e.contains("--rank") && e.contains("SLURM_PROCID"), "{e}");
    }

    #[test]
    fn the_tcp_rendezvous_comes_from_master_addr_and_port() {
        let t = Duration::from_secs(5);
        let tcp = |host: Option<&str>, port, vars: &[(&str, &str)]| {
            Rendezvous::tcp_from_vars(host.map(String::from), port, t, lookup(vars))
        };
        let want = |h: &str, p| Rendezvous::Tcp(TcpRendezvous::new(h, p).with_timeout(t));
        let env = [("MASTER_ADDR", "node7"), ("MASTER_PORT", "1234")];
        assert_eq!(tcp(None, None, &env).unwrap(), want("node7", 1234));
        assert_eq!(tcp(Some("h"), Some(9), &env).unwrap(), want("h", 9));
        assert_eq!(
            tcp(None, None, &env[..1]).unwrap(),
            want("node7", gnn_comm::rendezvous::DEFAULT_PORT)
        );
        let e = tcp(None, None, &env[1..]).unwrap_err().to_string();
        assert!(e.contains("MASTER_ADDR"), "{e}");
        let e = tcp(
            None,
            None,
            &[("MASTER_ADDR", "a"), ("MASTER_PORT", "99999")],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("MASTER_PORT=\"99999\""), "{e}");
        assert_eq!(
            want("node7", 1234).describe(),
            "TCP rendezvous at node7:1234"
        );
    }

    #[test]
    fn launches_name_their_transport() {
        let p = process(&[("RANK", "0"), ("WORLD_SIZE", "2")]).unwrap();
        assert!(!Launch::InProcess.uses_nccl());
        assert!(Launch::Nccl.uses_nccl() && Launch::Process(p.clone()).uses_nccl());
        assert_eq!(
            [Launch::InProcess, Launch::Nccl, Launch::Process(p)].map(|l| l.describe()),
            ["in-process", "nccl", "nccl, one process per rank"]
        );
    }
}
