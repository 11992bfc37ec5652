//! Device names from Python: `"auto"`, `"cpu"`, `"cuda"`, `"cuda:N"`.

use crate::arrays::value_error;
use crate::errors::to_py;
use candle_core::Device;
use pyo3::PyResult;

/// The device `name` names, opened and prepared as the examples prepare theirs.
pub(crate) fn parse_device(name: &str) -> PyResult<Device> {
    let lower = name.trim().to_ascii_lowercase();
    let ordinal = match lower.as_str() {
        "cpu" => return Ok(Device::Cpu),
        "auto" => return gnn_train::pick_device(false).map_err(to_py),
        "cuda" | "gpu" => 0,
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => {
                return Err(value_error(format!(
                    "device {name:?}: expected \"cpu\", \"cuda\", \"cuda:N\" or \"auto\""
                )))
            }
        },
    };
    if !cfg!(feature = "cuda") {
        return Err(value_error(format!(
            "device {name:?}: this build of gnn has no CUDA support; reinstall it with \
             `pip install ./crates/python --config-settings=build-args=\"--features cuda\"`"
        )));
    }
    let device = Device::new_cuda(ordinal).map_err(|e| to_py(e.into()))?;
    gnn_train::prepare_device(&device).map_err(to_py)?;
    Ok(device)
}
