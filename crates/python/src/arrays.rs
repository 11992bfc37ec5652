//! NumPy arrays in: dtype and shape checks and the conversion into the engine's host types.
//! Every problem is a `TypeError` (wrong kind of array) or a `ValueError` (wrong shape or
//! value) whose message names the array, and for a bad value its index and the value.

use gnn_graph::DenseMatrix;
use numpy::ndarray::{ArrayViewD, Axis};
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A `ValueError` with `msg`.
pub(crate) fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// A `TypeError` with `msg`.
pub(crate) fn type_error(msg: impl Into<String>) -> PyErr {
    PyTypeError::new_err(msg.into())
}

/// `obj` as a NumPy array; anything `numpy.asarray` converts (a list, a CPU tensor exposing
/// `__array__`) is converted first.
pub(crate) fn as_array<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return Ok(a.clone());
    }
    let kind = obj
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    let converted = obj
        .py()
        .import("numpy")?
        .call_method1("asarray", (obj,))
        .map_err(|e| {
            type_error(format!(
                "{name} must be a NumPy array (or something numpy.asarray converts); got {kind}: \
                 {e}"
            ))
        })?;
    converted
        .cast_into::<PyUntypedArray>()
        .map_err(|_| type_error(format!("{name} must be a NumPy array; got {kind}")))
}

/// The array's shape as Python writes it, `(2, 10556)`.
pub(crate) fn shape_str(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The dtype's name (`int64`, `float32`).
fn dtype_name(a: &Bound<'_, PyUntypedArray>) -> String {
    a.dtype().to_string()
}

/// Integer element types accepted for node ids, row pointers and labels.
pub(crate) trait IntElem: Element + Copy {
    /// The value, widened so that every source type fits.
    fn wide(self) -> i128;
}

macro_rules! int_elems {
    ($($t:ty),*) => {$(
        impl IntElem for $t {
            fn wide(self) -> i128 {
                self as i128
            }
        }
    )*};
}
int_elems!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Calls `$body` with `$v` bound to a read-only view of `$a` for its integer dtype, or
/// returns a `TypeError` naming `$name` for any other dtype.
macro_rules! with_int_view {
    ($a:expr, $name:expr, |$v:ident| $body:expr) => {{
        let a = $a;
        let py = a.py();
        let d = a.dtype();
        macro_rules! try_type {
            ($t:ty) => {
                if d.is_equiv_to(&numpy::dtype::<$t>(py)) {
                    let r = a.cast::<PyArrayDyn<$t>>()?.readonly();
                    let $v = r.as_array();
                    return $body;
                }
            };
        }
        (|| -> PyResult<_> {
            try_type!(i64);
            try_type!(i32);
            try_type!(u32);
            try_type!(u64);
            try_type!(i16);
            try_type!(u16);
            try_type!(i8);
            try_type!(u8);
            Err(type_error(format!(
                "{} has dtype {}; it must be an integer array (int32 or int64)",
                $name,
                dtype_name(a)
            )))
        })()
    }};
}

/// Node ids of `view` (any shape, read in row-major order) checked to lie in `0..n`; `at`
/// formats the index of the `k`-th element for messages, `nodes` says where `n` comes from.
fn node_ids<T: IntElem>(
    view: ArrayViewD<'_, T>,
    n: usize,
    at: impl Fn(usize) -> String,
    nodes: &str,
) -> PyResult<Vec<u32>> {
    let mut out = Vec::with_capacity(view.len());
    for (k, &v) in view.iter().enumerate() {
        let w = v.wide();
        if w < 0 || w >= n as i128 {
            let why = if w < 0 {
                "negative".to_string()
            } else {
                format!("out of range: node ids are 0..{n} ({nodes})")
            };
            return Err(value_error(format!("{} = {w} is {why}", at(k))));
        }
        out.push(w as u32);
    }
    Ok(out)
}

/// `edge_index` of shape `(2, E)`: row 0 the sources, row 1 the targets (PyG's layout), each
/// id in `0..n`. Returns `(src, dst)`.
pub(crate) fn edge_index(
    obj: &Bound<'_, PyAny>,
    n: usize,
    nodes: &str,
) -> PyResult<(Vec<u32>, Vec<u32>)> {
    let a = as_array(obj, "edge_index")?;
    let shape = a.shape().to_vec();
    if shape.len() != 2 || shape[0] != 2 {
        let hint = if shape.len() == 2 && shape[1] == 2 {
            " (an (E, 2) edge list: pass its transpose)"
        } else {
            ""
        };
        return Err(value_error(format!(
            "edge_index has shape {}, expected (2, E): row 0 the source nodes, row 1 the \
             targets{hint}",
            shape_str(&shape)
        )));
    }
    with_int_view!(&a, "edge_index", |v| {
        let row = |r: usize| {
            node_ids(
                v.index_axis(Axis(0), r),
                n,
                |k| format!("edge_index[{r}, {k}]"),
                nodes,
            )
        };
        Ok((row(0)?, row(1)?))
    })
}

/// A CSR adjacency `(indptr, indices)` of `n` rows, row `i` listing the nodes node `i`
/// aggregates from (row = target, PyG's `adj_t`). Returns `(src, dst)` edge lists.
pub(crate) fn csr_edges(
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    n: usize,
    nodes: &str,
) -> PyResult<(Vec<u32>, Vec<u32>)> {
    let p = as_array(indptr, "indptr")?;
    if p.shape() != [n + 1] {
        return Err(value_error(format!(
            "indptr has shape {}, expected ({},): one entry per node plus one ({nodes})",
            shape_str(p.shape()),
            n + 1
        )));
    }
    let ptr: Vec<u64> = with_int_view!(&p, "indptr", |v| {
        let mut out = Vec::with_capacity(v.len());
        let mut prev = 0i128;
        for (k, &x) in v.iter().enumerate() {
            let w = x.wide();
            if k == 0 && w != 0 {
                return Err(value_error(format!("indptr[0] = {w}, expected 0")));
            }
            if w < prev {
                return Err(value_error(format!(
                    "indptr[{k}] = {w} is below indptr[{}] = {prev}: row pointers must not \
                     decrease",
                    k - 1
                )));
            }
            prev = w;
            out.push(w as u64);
        }
        Ok(out)
    })?;
    let i = as_array(indices, "indices")?;
    if i.ndim() != 1 {
        return Err(value_error(format!(
            "indices has shape {}, expected (nnz,)",
            shape_str(i.shape())
        )));
    }
    let nnz = i.shape()[0] as u64;
    if ptr[n] != nnz {
        return Err(value_error(format!(
            "indptr[{n}] = {} but indices has {nnz} entries: the last row pointer is the \
             number of entries",
            ptr[n]
        )));
    }
    if nnz >= u32::MAX as u64 {
        return Err(value_error(format!(
            "indices has {nnz} entries, beyond the engine's 32-bit offsets"
        )));
    }
    let src = with_int_view!(&i, "indices", |v| node_ids(
        v,
        n,
        |k| format!("indices[{k}]"),
        nodes
    ))?;
    let mut dst = Vec::with_capacity(src.len());
    for (row, w) in ptr.windows(2).enumerate() {
        dst.extend(std::iter::repeat_n(row as u32, (w[1] - w[0]) as usize));
    }
    Ok((src, dst))
}

/// Labels `y` of shape `(n,)` or `(n, 1)`: class ids from 0, `-1` for an unlabeled node.
pub(crate) fn labels(obj: &Bound<'_, PyAny>, n: usize, nodes: &str) -> PyResult<Vec<i32>> {
    let a = as_array(obj, "y")?;
    let shape = a.shape().to_vec();
    let ok = shape == [n] || shape == [n, 1];
    if !ok {
        let what = if shape.first() != Some(&n) && matches!(shape.len(), 1 | 2) {
            format!(
                "y has {} entries for {n} nodes ({nodes})",
                shape.first().copied().unwrap_or(0)
            )
        } else {
            format!(
                "y has shape {}, expected ({n},): one class id per node (multi-label targets \
                 are not supported)",
                shape_str(&shape)
            )
        };
        return Err(value_error(what));
    }
    if a.dtype().is_equiv_to(&numpy::dtype::<bool>(a.py())) || a.dtype().kind() == b'f' {
        return Err(type_error(format!(
            "y has dtype {}; labels must be integer class ids (int64 or int32)",
            dtype_name(&a)
        )));
    }
    with_int_view!(&a, "y", |v| {
        let mut out = Vec::with_capacity(n);
        for (k, &x) in v.iter().enumerate() {
            let w = x.wide();
            if w < -1 || w > i32::MAX as i128 {
                return Err(value_error(format!(
                    "y[{k}] = {w}: labels are class ids from 0, or -1 for an unlabeled node"
                )));
            }
            out.push(w as i32);
        }
        Ok(out)
    })
}

/// One split part: a boolean mask of length `n` (PyG's `train_mask`) or an array of node ids.
pub(crate) fn split_part(obj: &Bound<'_, PyAny>, name: &str, n: usize) -> PyResult<Vec<u32>> {
    let a = as_array(obj, name)?;
    let py = a.py();
    if a.dtype().is_equiv_to(&numpy::dtype::<bool>(py)) {
        if a.shape() != [n] {
            return Err(value_error(format!(
                "{name} is a boolean mask of shape {}, expected ({n},): one entry per node",
                shape_str(a.shape())
            )));
        }
        let r = a.cast::<PyArrayDyn<bool>>()?.readonly();
        return Ok(r
            .as_array()
            .iter()
            .enumerate()
            .filter(|(_, &m)| m)
            .map(|(i, _)| i as u32)
            .collect());
    }
    if a.ndim() != 1 {
        return Err(value_error(format!(
            "{name} has shape {}: expected a boolean mask ({n},) or a 1-D array of node ids",
            shape_str(a.shape())
        )));
    }
    with_int_view!(&a, name, |v| node_ids(
        v,
        n,
        |k| format!("{name}[{k}]"),
        "one per row of x"
    ))
    .map_err(|e| {
        // A float array is neither a mask nor ids: say both.
        if e.is_instance_of::<PyTypeError>(py) {
            type_error(format!(
                "{name} has dtype {}; it must be a boolean mask or an integer array of node ids",
                dtype_name(&a)
            ))
        } else {
            e
        }
    })
}

/// Node features `x` of shape `(n, F)`: float32 (copied as is), float64 and float16 (converted),
/// or bfloat16 as its bits in a uint16 array (or an `ml_dtypes.bfloat16` array), converted to
/// float32 exactly.
pub(crate) fn features(obj: &Bound<'_, PyAny>) -> PyResult<DenseMatrix> {
    let mut a = as_array(obj, "x")?;
    let py = a.py();
    if a.shape().len() != 2 {
        return Err(value_error(format!(
            "x has shape {}, expected (nodes, features)",
            shape_str(a.shape())
        )));
    }
    let (rows, cols) = (a.shape()[0], a.shape()[1]);
    if rows == 0 {
        return Err(value_error(
            "empty graph: x has 0 rows (one row of features per node)",
        ));
    }
    if cols == 0 {
        return Err(value_error(format!(
            "x has shape {}: every node needs at least one feature",
            shape_str(a.shape())
        )));
    }
    if dtype_name(&a) == "bfloat16" && a.dtype().itemsize() == 2 {
        a = a
            .call_method1("view", ("uint16",))?
            .cast_into::<PyUntypedArray>()
            .map_err(|_| type_error("x: a bfloat16 array that cannot be viewed as uint16"))?;
    }
    let d = a.dtype();
    fn read<T: Element + Copy>(
        a: &Bound<'_, PyUntypedArray>,
        f: impl Fn(T) -> f32,
    ) -> PyResult<Vec<f32>> {
        let r = a.cast::<PyArrayDyn<T>>()?.readonly();
        let v = r.as_array();
        Ok(match v.as_slice() {
            Some(s) => s.iter().map(|&x| f(x)).collect(),
            None => v.iter().map(|&x| f(x)).collect(),
        })
    }
    let data = if d.is_equiv_to(&numpy::dtype::<f32>(py)) {
        read::<f32>(&a, |x| x)?
    } else if d.is_equiv_to(&numpy::dtype::<f64>(py)) {
        read::<f64>(&a, |x| x as f32)?
    } else if d.is_equiv_to(&numpy::dtype::<half::f16>(py)) {
        read::<half::f16>(&a, half::f16::to_f32)?
    } else if d.is_equiv_to(&numpy::dtype::<u16>(py)) {
        read::<u16>(&a, |b| half::bf16::from_bits(b).to_f32())?
    } else {
        return Err(type_error(format!(
            "x has dtype {}; features must be float32, float16, float64, or bfloat16 (its bits \
             as uint16)",
            dtype_name(&a)
        )));
    };
    DenseMatrix::new(rows, cols, data).map_err(|e| value_error(format!("x: {e}")))
}
