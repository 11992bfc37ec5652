//! Device choice and device-memory readings.

use crate::error::Result;
use candle_core::Device;

/// The first CUDA device when built with `cuda` and one is present (unless `force_cpu`),
/// else the CPU.
pub fn pick_device(force_cpu: bool) -> Result<Device> {
    if force_cpu {
        return Ok(Device::Cpu);
    }
    Ok(Device::cuda_if_available(0)?)
}

/// Bytes of device memory in use (total minus free, as the driver reports it: includes the
/// CUDA context and memory held by the stream-ordered allocator's pool). `None` on the CPU.
pub fn device_memory_in_use(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    if device.is_cuda() {
        use candle_core::cuda_backend::cudarc::driver::result::mem_get_info;
        return mem_get_info()
            .ok()
            .map(|(free, total)| (total - free) as u64);
    }
    let _ = device;
    None
}

/// A short name for reports (`cpu`, `cuda:0`).
pub fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        other => format!("{other:?}"),
    }
}
