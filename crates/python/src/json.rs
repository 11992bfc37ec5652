//! serde_json values as Python objects (dicts, lists, floats, ints, strings, None).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;
use serde_json::Value;

/// `v` as the Python object `json.loads` would give.
pub(crate) fn to_python<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_bound_py_any(py)?,
            (None, Some(u)) => u.into_bound_py_any(py)?,
            _ => n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?,
        },
        Value::String(s) => s.into_bound_py_any(py)?,
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(to_python(py, x)?)?;
            }
            l.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, to_python(py, x)?)?;
            }
            d.into_any()
        }
    })
}
