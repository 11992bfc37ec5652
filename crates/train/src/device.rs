//! Device choice and device-memory readings.

use crate::error::{Error, Result};
use candle_core::Device;

/// The first CUDA device when built with `cuda` and one is present (unless `force_cpu`),
/// else the CPU.
pub fn pick_device(force_cpu: bool) -> Result<Device> {
    if force_cpu {
        return Ok(Device::Cpu);
    }
    let device = Device::cuda_if_available(0)?;
    prepare_device(&device)?;
    Ok(device)
}

/// Applies the process-wide device settings to a freshly opened device: candle's kernels start
/// compiling in the background ([`crate::warmup`]), the pool keeps freed
/// memory ([`keep_freed_memory`]) and, when [`MEMORY_LIMIT_ENV`] is set, the device is limited
/// to that much memory ([`limit_device_memory`]). Every example calls it once per GPU it opens.
pub fn prepare_device(device: &Device) -> Result<()> {
    crate::warmup::start(device);
    keep_freed_memory(device)?;
    let limit = memory_limit(std::env::var(MEMORY_LIMIT_ENV).ok().as_deref())?;
    if let Some(bytes) = limit {
        limit_device_memory(device, bytes)?;
    }
    Ok(())
}

/// The environment variable that limits each GPU this process opens to that many GiB
/// (a decimal number), as if the card were that small: [`limit_device_memory`].
pub const MEMORY_LIMIT_ENV: &str = "GNN_CUDA_MEMORY_LIMIT_GIB";

/// The byte count [`MEMORY_LIMIT_ENV`]'s value asks for (`None` when unset).
fn memory_limit(value: Option<&str>) -> Result<Option<u64>> {
    let Some(v) = value else {
        return Ok(None);
    };
    match v.trim().parse::<f64>() {
        Ok(g) if g.is_finite() && g > 0.0 => Ok(Some((g * (1u64 << 30) as f64) as u64)),
        _ => Err(Error::Invalid(format!(
            "{MEMORY_LIMIT_ENV}={v:?} is not a positive number of GiB (e.g. 10 or 12.5)"
        ))),
    }
}

/// Bytes held back by [`limit_device_memory`] on each GPU ordinal (held for the process's life).
static HELD_BACK: std::sync::Mutex<Vec<(usize, u64)>> = std::sync::Mutex::new(Vec::new());

/// The bytes [`limit_device_memory`] holds back on `device` (0 when none).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn held_back(device: &Device) -> u64 {
    let candle_core::DeviceLocation::Cuda { gpu_id } = device.location() else {
        return 0;
    };
    HELD_BACK
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(g, _)| *g == gpu_id)
        .map_or(0, |(_, b)| *b)
}

/// Makes `device` behave as a GPU with `limit` bytes of memory: one plain allocation (outside
/// the stream-ordered pool, so [`allocated_peak_bytes`] does not count it) holds the rest for
/// the process's life, and every later allocation (tensors, graphs, NCCL's buffers, cuBLAS'
/// workspace) competes for what is left, as on a smaller card. For capacity questions ("the
/// largest graph one GPU trains, against two") at sizes a short run can generate; torch's
/// `set_per_process_memory_fraction` serves the same purpose. Once per GPU ordinal (a second
/// call for the same GPU is a no-op); an error on the CPU or when `limit` is below what the
/// device already has in use.
pub fn limit_device_memory(device: &Device, limit: u64) -> Result<()> {
    let candle_core::DeviceLocation::Cuda { gpu_id } = device.location() else {
        return Err(Error::Invalid(format!(
            "{MEMORY_LIMIT_ENV} limits GPU memory, but this run is on the CPU"
        )));
    };
    let mut held = HELD_BACK.lock().unwrap_or_else(|e| e.into_inner());
    if held.iter().any(|(g, _)| *g == gpu_id) {
        return Ok(());
    }
    #[cfg(feature = "cuda")]
    {
        use candle_core::cuda_backend::cudarc::driver::result;
        let Device::Cuda(d) = device else {
            unreachable!("a CUDA location is a CUDA device")
        };
        d.cuda_stream()
            .context()
            .bind_to_thread()
            .map_err(|e| Error::Invalid(format!("binding GPU {gpu_id}: {e:?}")))?;
        let (free, total) = result::mem_get_info()
            .map_err(|e| Error::Invalid(format!("reading GPU {gpu_id}'s memory: {e:?}")))?;
        let (free, total) = (free as u64, total as u64);
        let in_use = total - free;
        if limit <= in_use || limit >= total {
            return Err(Error::Invalid(format!(
                "{MEMORY_LIMIT_ENV} asks for {} on GPU {gpu_id}, which has {} with {} in use                  already: the limit must lie between the two",
                gib(limit),
                gib(total),
                gib(in_use)
            )));
        }
        let hold = free - (limit - in_use);
        // SAFETY: a plain device allocation on the bound context; it is never freed (the
        // context's teardown at exit releases it) and never handed to anything.
        unsafe { result::malloc_sync(hold as usize) }.map_err(|e| {
            Error::Invalid(format!(
                "holding back {} of GPU {gpu_id} for {MEMORY_LIMIT_ENV}: {e:?}",
                gib(hold)
            ))
        })?;
        held.push((gpu_id, hold));
        Ok(())
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (limit, &mut held);
        Err(Error::Invalid(format!("GPU {gpu_id} without a CUDA build")))
    }
}

/// The environment variable that sets the allocator pool's release threshold in bytes
/// ([`keep_freed_memory`]); `0` is the driver's default.
pub const POOL_RELEASE_THRESHOLD_ENV: &str = "GNN_CUDA_POOL_RELEASE_THRESHOLD";

/// Lets the stream-ordered allocator's pool keep the memory tensors free, instead of handing
/// it back to the driver at every synchronisation (the driver's default, a release threshold
/// of 0). A training epoch frees and re-allocates its activations every epoch, and
/// synchronises between phases: returning those pages and mapping them again cost
/// milliseconds per epoch. PyTorch's caching allocator keeps its memory the same way until
/// `empty_cache`. The pool never holds more than the run's peak; set
/// [`POOL_RELEASE_THRESHOLD_ENV`] (bytes; `0` for the driver's behaviour) when other processes
/// need the memory back. Nothing on the CPU or without memory pools.
pub fn keep_freed_memory(device: &Device) -> Result<()> {
    let threshold = release_threshold(std::env::var(POOL_RELEASE_THRESHOLD_ENV).ok().as_deref())?;
    #[cfg(feature = "cuda")]
    if let Some(pool) = default_mem_pool(device) {
        use candle_core::cuda_backend::cudarc::driver::sys;
        let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        let r = set_pool_u64(pool, attr, threshold);
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::Invalid(format!(
                "setting the CUDA memory pool's release threshold to {threshold}: {r:?}"
            )));
        }
    }
    let _ = (device, threshold);
    Ok(())
}

/// Sets whether f32 GEMMs may run on TF32 tensor cores (candle's process-wide
/// `set_gemm_reduced_precision_f32`, cuBLAS's `CUBLAS_COMPUTE_32F_FAST_TF32`). TF32 rounds the
/// GEMM inputs to a 10-bit mantissa and accumulates in fp32, the trade torch makes with
/// `allow_tf32`; it affects f32 GEMMs only (half-precision GEMMs are unchanged). Asking for it on
/// the CPU is an error; turning it off always succeeds.
pub fn set_tf32(device: &Device, on: bool) -> Result<()> {
    if on && !device.is_cuda() {
        return Err(Error::CudaOnly {
            what: "TF32 (cuBLAS's tensor-core mode for f32 GEMMs)".into(),
        });
    }
    #[cfg(feature = "cuda")]
    candle_core::cuda_backend::set_gemm_reduced_precision_f32(on);
    Ok(())
}

/// Bytes of device memory in use (total minus free, as the driver reports it: includes the
/// CUDA context and memory held by the stream-ordered allocator's pool, not what
/// [`limit_device_memory`] holds back). `None` on the CPU.
pub fn device_memory_in_use(device: &Device) -> Option<u64> {
    device_memory_info(device).map(|(free, total)| total - free)
}

/// The stream-ordered allocator's default pool of `device` (the pool candle's allocations
/// come from through cudarc's `cuMemAllocAsync`), with the context bound to this thread.
#[cfg(feature = "cuda")]
fn default_mem_pool(
    device: &Device,
) -> Option<candle_core::cuda_backend::cudarc::driver::sys::CUmemoryPool> {
    use candle_core::cuda_backend::cudarc::driver::sys;
    let Device::Cuda(d) = device else {
        return None;
    };
    let stream = d.cuda_stream();
    let ctx = stream.context();
    if !ctx.has_async_alloc() || ctx.bind_to_thread().is_err() {
        return None;
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer and `cu_device` a device of a live context.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) };
    (r == sys::CUresult::CUDA_SUCCESS && !pool.is_null()).then_some(pool)
}

/// Sets `attr`, one of the pool attributes that take a `cuuint64_t`, to `value`.
#[cfg(feature = "cuda")]
fn set_pool_u64(
    pool: candle_core::cuda_backend::cudarc::driver::sys::CUmemoryPool,
    attr: candle_core::cuda_backend::cudarc::driver::sys::CUmemPool_attribute,
    value: u64,
) -> candle_core::cuda_backend::cudarc::driver::sys::CUresult {
    let mut v = value;
    // SAFETY: the callers pass cuuint64_t attributes (RELEASE_THRESHOLD, USED_MEM_HIGH) of a
    // live pool; `v` outlives the call.
    unsafe {
        candle_core::cuda_backend::cudarc::driver::sys::cuMemPoolSetAttribute(
            pool,
            attr,
            (&mut v as *mut u64).cast(),
        )
    }
}

/// Peak bytes held by allocations of the stream-ordered allocator's default pool since the
/// last [`reset_allocated_peak`]: the allocator's own accounting of live tensors (rounded to
/// its granularity), the figure comparable with torch's `max_memory_allocated` (it excludes
/// the CUDA context and memory the pool keeps cached). `None` on the CPU or without memory
/// pools.
pub fn allocated_peak_bytes(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    if let Some(pool) = default_mem_pool(device) {
        use candle_core::cuda_backend::cudarc::driver::sys;
        let mut v: u64 = 0;
        // SAFETY: USED_MEM_HIGH is a cuuint64_t attribute; `v` outlives the call.
        let r = unsafe {
            sys::cuMemPoolGetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                (&mut v as *mut u64).cast(),
            )
        };
        return (r == sys::CUresult::CUDA_SUCCESS).then_some(v);
    }
    let _ = device;
    None
}

/// Starts a new [`allocated_peak_bytes`] window (the pool's high-water mark drops to what is
/// allocated now). Nothing on the CPU.
pub fn reset_allocated_peak(device: &Device) {
    #[cfg(feature = "cuda")]
    if let Some(pool) = default_mem_pool(device) {
        use candle_core::cuda_backend::cudarc::driver::sys;
        // Only 0 is allowed; a failure leaves the old window, which only makes the peak an
        // over-estimate.
        let _ = set_pool_u64(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            0,
        );
    }
    let _ = device;
}

/// The release threshold [`POOL_RELEASE_THRESHOLD_ENV`]'s value asks for: unset keeps all
/// freed memory (`u64::MAX`), otherwise a byte count.
fn release_threshold(value: Option<&str>) -> Result<u64> {
    match value {
        None => Ok(u64::MAX),
        Some(v) => v.trim().parse::<u64>().map_err(|e| {
            Error::Invalid(format!(
                "{POOL_RELEASE_THRESHOLD_ENV}={v:?} is not a byte count ({e}); use 0 for the \
                 driver's default or leave it unset to keep freed memory"
            ))
        }),
    }
}

/// `(free, total)` device memory in bytes, as the driver reports it, the total less what
/// [`limit_device_memory`] holds back. `None` on the CPU.
pub fn device_memory_info(device: &Device) -> Option<(u64, u64)> {
    #[cfg(feature = "cuda")]
    if device.is_cuda() {
        use candle_core::cuda_backend::cudarc::driver::result::mem_get_info;
        let held = held_back(device);
        return mem_get_info()
            .ok()
            .map(|(f, t)| (f as u64, t as u64 - held));
    }
    let _ = device;
    None
}

/// `bytes` as GiB (or MiB below one GiB) for messages.
pub fn gib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// True when `e` or one of its sources is a CUDA out-of-memory error.
pub fn is_out_of_memory(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(x) = cur {
        let text = x.to_string();
        if text.contains("OUT_OF_MEMORY") || text.contains("out of memory") {
            return true;
        }
        cur = x.source();
    }
    false
}

/// Turns a CUDA out-of-memory failure of `r` into [`Error::OutOfMemory`] saying what was being
/// done (`what`), the bytes asked for when known, and the device's free and total memory;
/// other errors pass through.
pub fn on_oom<T, E>(
    r: std::result::Result<T, E>,
    device: &Device,
    what: impl FnOnce() -> (String, Option<u64>),
) -> Result<T>
where
    E: Into<Error>,
{
    r.map_err(|e| {
        let e: Error = e.into();
        if matches!(e, Error::OutOfMemory { .. }) || !is_out_of_memory(&e) {
            return e;
        }
        let (what, bytes) = what();
        let info = device_memory_info(device);
        Error::OutOfMemory {
            what,
            bytes,
            free: info.map(|i| i.0),
            total: info.map(|i| i.1),
        }
    })
}

/// A short name for reports (`cpu`, `cuda:0`).
pub fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_release_threshold_parses_bytes_and_names_a_bad_value() {
        assert_eq!(release_threshold(None).unwrap(), u64::MAX);
        assert_eq!(release_threshold(Some("0")).unwrap(), 0);
        assert_eq!(release_threshold(Some(" 1073741824 ")).unwrap(), 1 << 30);
        let e = release_threshold(Some("1G")).unwrap_err().to_string();
        assert!(
            e.contains(POOL_RELEASE_THRESHOLD_ENV) && e.contains("\"1G\""),
            "{e}"
        );
        // The CPU has no pool: nothing to set, whatever the variable says.
        keep_freed_memory(&Device::Cpu).unwrap();
    }

    #[test]
    fn memory_limit_parses_gib_and_names_a_bad_value() {
        assert_eq!(memory_limit(None).unwrap(), None);
        assert_eq!(memory_limit(Some("10")).unwrap(), Some(10 << 30));
        assert_eq!(memory_limit(Some(" 0.5 ")).unwrap(), Some(1 << 29));
        for bad in ["0", "-1", "10GiB", "nan", ""] {
            let e = memory_limit(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains(MEMORY_LIMIT_ENV) && e.contains("GiB"),
                "{bad}: {e}"
            );
        }
        // A limit on the CPU is a mistake worth naming, not a silent no-op.
        let e = limit_device_memory(&Device::Cpu, 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU"), "{e}");
        assert_eq!(held_back(&Device::Cpu), 0);
    }

    #[test]
    fn tf32_is_refused_on_the_cpu() {
        assert!(set_tf32(&Device::Cpu, false).is_ok());
        let e = set_tf32(&Device::Cpu, true).unwrap_err().to_string();
        assert!(
            e.contains("TF32") && e.contains("CPU") && !e.contains("--"),
            "{e}"
        );
    }

    #[test]
    fn cuda_out_of_memory_becomes_a_clear_error() {
        let oom: Result<()> = Err(candle_core::Error::Msg(
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".into(),
        )
        .into());
        let e = on_oom(oom, &Device::Cpu, || ("allocating x".into(), Some(3 << 30))).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{msg}");
        assert!(
            msg.contains("allocating x") && msg.contains("3.00 GiB requested"),
            "{msg}"
        );
        assert!(!msg.contains("--"), "no flag advice in the library: {msg}");
        // Other errors pass through untouched.
        let other: Result<()> = Err(Error::Invalid("bad".into()));
        let e = on_oom(other, &Device::Cpu, || ("y".into(), None)).unwrap_err();
        assert_eq!(e.to_string(), "bad");
    }
}
