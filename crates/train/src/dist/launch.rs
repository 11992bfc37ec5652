//! Where the ranks of a run live and how they meet: threads of this process over in-process
//! channels ([`Launch::InProcess`]), one thread per GPU over NCCL ([`Launch::Nccl`]), or one
//! rank per process over NCCL, the processes meeting through an id file
//! ([`Launch::Process`], torchrun's environment variables).

use super::{local_comms, train_ranks, DistConfig, DistPlan, RankOutcome, Recipe};
use crate::error::{Error, Result};
use crate::trainer::EpochLog;
use candle_core::Device;
use gnn_graph::Dataset;
use std::path::{Path, PathBuf};

/// NCCL channels for point-to-point transfers (`NCCL_MAX_P2P_NCHANNELS`) unless the
/// environment sets it ([`default_p2p_channels`]). NCCL's default (up to 64) gives every
/// channel its own buffers on first use: on two H100s the symmetric aggregation's ring steps
/// took 0.37 GiB more per GPU of NCCL's own memory than at 4 channels, at the same epoch time
/// (scale 1: 24.1-24.6 ms either way; scale 4: 175.0 vs 174.6 ms;
/// `docs/perf/h100x2-2026-11-26-dist-ring`).
pub const P2P_CHANNELS: &str = "4";

/// The environment variable [`P2P_CHANNELS`] is the default of.
const P2P_CHANNELS_ENV: &str = "NCCL_MAX_P2P_NCHANNELS";

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

/// This process's place in a multi-process run, from the environment variables torchrun
/// sets: rank `rank` of `world` on GPU `gpu`; rank 0 writes the NCCL id to `id_file` (on a
/// file system every rank reads), the others wait for it.
#[derive(Debug, Clone)]
pub struct ProcessRank {
    /// This process's rank (`RANK`).
    pub rank: usize,
    /// Ranks in all (`WORLD_SIZE`).
    pub world: usize,
    /// Its GPU on this host (`LOCAL_RANK`, default `RANK`).
    pub gpu: usize,
    /// Where the NCCL id goes.
    pub id_file: PathBuf,
}

impl ProcessRank {
    /// `RANK`, `WORLD_SIZE` and `LOCAL_RANK` from the environment, the id at `id_file`.
    pub fn from_env(id_file: &Path) -> Result<Self> {
        Self::from_vars(id_file, |name| std::env::var(name))
    }

    /// [`Self::from_env`] reading the variables through `lookup`.
    fn from_vars(
        id_file: &Path,
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
        let need = |name: &str| -> Result<usize> {
            var(name)?.ok_or_else(|| {
                Error::Invalid(format!(
                    "one rank per process: set {name} (and RANK, WORLD_SIZE) as torchrun does"
                ))
            })
        };
        let (rank, world) = (need("RANK")?, need("WORLD_SIZE")?);
        if world == 0 || rank >= world {
            return Err(Error::Invalid(format!(
                "RANK={rank} is not a rank of WORLD_SIZE={world}"
            )));
        }
        Ok(Self {
            rank,
            world,
            gpu: var("LOCAL_RANK")?.unwrap_or(rank),
            id_file: id_file.to_path_buf(),
        })
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
    let (ranks, overlap) = (cfg.world(), cfg.overlap);
    match &cfg.launch {
        Launch::Process(proc) => Ok(vec![nccl_process(
            plan, ds, recipe, proc, overlap, on_epoch,
        )?]),
        Launch::Nccl => nccl_threads(plan, ds, recipe, ranks, overlap, on_epoch),
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
            train_ranks(
                plan,
                ds,
                recipe,
                &local_comms(ranks),
                &devices,
                on_epoch,
                &|_, _| {},
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

/// One rank of a multi-process run: rank 0 makes the NCCL id and writes it to the id file
/// (refusing a file left by an earlier run), the others wait for it (up to 600 s); then the
/// rank joins on its GPU and trains.
#[cfg(feature = "nccl")]
fn nccl_process(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    proc: &ProcessRank,
    overlap: bool,
    on_epoch: &(dyn Fn(&EpochLog) + Sync),
) -> Result<RankOutcome> {
    use gnn_comm::{Communicator, NcclComm, NcclId};
    use std::sync::Arc;
    use std::time::Instant;
    let path = &proc.id_file;
    let id = if proc.rank == 0 {
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
        id
    } else {
        let t = Instant::now();
        loop {
            if path.exists() {
                break NcclId::read(path)?;
            }
            if t.elapsed().as_secs() > 600 {
                return Err(Error::Invalid(format!(
                    "{}: no NCCL id after 600 s; is rank 0 running?",
                    path.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let device = open_gpu(proc.gpu, " (LOCAL_RANK)")?;
    println!(
        "rank {} of {} on GPU {}, NCCL id from {}",
        proc.rank,
        proc.world,
        proc.gpu,
        path.display()
    );
    let comm =
        Arc::new(NcclComm::new(&id, proc.rank, proc.world, &device, true)?.with_overlap(overlap))
            as Arc<dyn Communicator>;
    super::train_rank(plan, ds, recipe, comm, &device, on_epoch)
}

#[cfg(not(feature = "nccl"))]
fn nccl_process(
    _: &DistPlan,
    _: &Dataset,
    _: Recipe<'_>,
    _: &ProcessRank,
    _: bool,
    _: &(dyn Fn(&EpochLog) + Sync),
) -> Result<RankOutcome> {
    Err(no_nccl())
}

/// Ranks `0..ranks` on GPUs `0..ranks`, one thread each, over NCCL. A failed rank (out of
/// memory, say) leaves the others inside an NCCL collective that nothing can cancel from
/// here, so it prints its error and ends the process with status 1, as torchrun does when a
/// worker fails: through `_exit`, not `exit`, whose atexit handlers would tear CUDA down
/// under the threads still inside it (a segmentation fault instead of the error).
#[cfg(feature = "nccl")]
fn nccl_threads(
    plan: &DistPlan,
    ds: &Dataset,
    recipe: Recipe<'_>,
    ranks: usize,
    overlap: bool,
    on_epoch: &(dyn Fn(&EpochLog) + Sync),
) -> Result<Vec<RankOutcome>> {
    use gnn_comm::{Communicator, NcclComm, NcclId};
    use std::sync::Arc;
    let devices = (0..ranks)
        .map(|r| open_gpu(r, ""))
        .collect::<Result<Vec<_>>>()?;
    let id = NcclId::new()?;
    println!(
        "{ranks} ranks on GPUs 0..{ranks}, NCCL (NCCL_MAX_P2P_NCHANNELS={})",
        std::env::var(P2P_CHANNELS_ENV).unwrap_or_default()
    );
    if let Some((_, total)) = crate::device::device_memory_info(&devices[0]) {
        if std::env::var_os(crate::MEMORY_LIMIT_ENV).is_some() {
            println!(
                "each GPU limited to {} ({})",
                crate::device::gib(total),
                crate::MEMORY_LIMIT_ENV
            );
        }
    }
    let make = |rank: usize, dev: &Device| {
        Ok(
            Arc::new(NcclComm::new(&id, rank, ranks, dev, true)?.with_overlap(overlap))
                as Arc<dyn Communicator>,
        )
    };
    let fail_fast = |rank: usize, e: &Error| {
        use std::io::Write;
        eprintln!("Error: rank {rank} failed: {e}\nending the run (the other ranks wait in NCCL)");
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: `_exit` ends the process at once; nothing runs after it.
        unsafe { libc::_exit(1) }
    };
    train_ranks(plan, ds, recipe, &make, &devices, on_epoch, &fail_fast)
}

#[cfg(not(feature = "nccl"))]
fn nccl_threads(
    _: &DistPlan,
    _: &Dataset,
    _: Recipe<'_>,
    _: usize,
    _: bool,
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

    fn process(vars: &[(&str, &str)]) -> Result<ProcessRank> {
        ProcessRank::from_vars(Path::new("id"), |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .ok_or(VarError::NotPresent)
        })
    }

    #[test]
    fn process_ranks_come_from_torchruns_variables() {
        let p = process(&[("RANK", "1"), ("WORLD_SIZE", "4")]).unwrap();
        assert_eq!((p.rank, p.world, p.gpu), (1, 4, 1));
        assert_eq!(p.id_file, Path::new("id"));
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
