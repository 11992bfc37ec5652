//! Decoding the parsed values Planetoid files hold: numpy arrays and scipy CSR matrices.

use super::Value;

/// The `BUILD` state of the object `v` (a `what`, for the error).
fn state_of<'a>(v: &'a Value, what: &str) -> Result<&'a Value, String> {
    match v {
        Value::Object {
            state: Some(state), ..
        } => Ok(state.as_ref()),
        _ => Err(format!("{what} without state")),
    }
}

/// A numeric numpy array decoded from a pickle.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// Shape.
    pub shape: Vec<usize>,
    /// Values converted to f64 (exact for the integer and float dtypes Planetoid uses).
    pub data: Vec<f64>,
}

/// Interprets a value as a numpy `ndarray` (`numpy.core.multiarray._reconstruct` + BUILD
/// state `(version, shape, dtype, is_fortran, raw)`).
pub fn to_ndarray(v: &Value) -> Result<NdArray, String> {
    match v.class_name() {
        Some((_, "_reconstruct")) => {}
        Some((m, n)) => return Err(format!("expected a numpy array, found {m}.{n}")),
        None => return Err("expected a numpy array, found a plain value".into()),
    }
    let state = state_of(v, "numpy array")?;
    let Value::Tuple(st) = state else {
        return Err("numpy array state is not a tuple".into());
    };
    if st.len() != 5 {
        return Err(format!(
            "numpy array state has {} items, expected 5",
            st.len()
        ));
    }
    let shape: Vec<usize> = match &st[1] {
        Value::Tuple(s) => s
            .iter()
            .map(|d| d.as_int().filter(|&x| x >= 0).map(|x| x as usize))
            .collect::<Option<_>>()
            .ok_or("numpy array shape has a non-integer entry")?,
        _ => return Err("numpy array shape is not a tuple".into()),
    };
    let fortran = st[3].as_int().unwrap_or(0) != 0;
    let (kind, size, little) = dtype_of(&st[2])?;
    let Value::Bytes(raw) = &st[4] else {
        return Err(
            "numpy array data is not a byte string (object arrays are not supported)".into(),
        );
    };
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|c| c.checked_mul(size).is_some())
        .ok_or_else(|| format!("numpy array shape {shape:?} overflows"))?;
    if raw.len() != count * size {
        return Err(format!(
            "numpy array of shape {shape:?} and {size}-byte items needs {} bytes, found {}",
            count * size,
            raw.len()
        ));
    }
    let mut data = Vec::with_capacity(count);
    for c in raw.chunks_exact(size) {
        let mut b = [0u8; 8];
        b[..size].copy_from_slice(c);
        if !little {
            b[..size].reverse();
        }
        let x = match (kind, size) {
            ('f', 4) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            ('f', 8) => f64::from_le_bytes(b),
            ('i', 1) => b[0] as i8 as f64,
            ('i', 2) => i16::from_le_bytes([b[0], b[1]]) as f64,
            ('i', 4) => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            ('i', 8) => i64::from_le_bytes(b) as f64,
            ('u' | 'b', _) => u64::from_le_bytes(b) as f64,
            _ => return Err(format!("numpy dtype {kind}{size} is not supported")),
        };
        data.push(x);
    }
    if fortran && shape.len() == 2 {
        let (r, c) = (shape[0], shape[1]);
        let mut t = vec![0f64; data.len()];
        for i in 0..r {
            for j in 0..c {
                t[i * c + j] = data[j * r + i];
            }
        }
        data = t;
    }
    Ok(NdArray { shape, data })
}

/// `(kind, itemsize, little_endian)` of a pickled `numpy.dtype`.
fn dtype_of(v: &Value) -> Result<(char, usize, bool), String> {
    let Value::Object { args, state, .. } = v else {
        return Err("numpy dtype is not an object".into());
    };
    let Value::Tuple(a) = args.as_ref() else {
        return Err("numpy dtype arguments are not a tuple".into());
    };
    let code = a
        .first()
        .and_then(Value::as_text)
        .ok_or("numpy dtype has no type code")?;
    let mut chars = code.chars();
    let kind = chars.next().ok_or("empty numpy dtype code")?;
    let size: usize = chars
        .as_str()
        .parse()
        .map_err(|_| format!("numpy dtype code `{code}` has no size"))?;
    if !(1..=8).contains(&size) {
        return Err(format!("numpy dtype `{code}` is not supported"));
    }
    let order = match state.as_deref() {
        Some(Value::Tuple(s)) => s.get(1).and_then(Value::as_text).unwrap_or_default(),
        _ => String::new(),
    };
    Ok((kind, size, order != ">"))
}

/// A scipy sparse CSR matrix decoded from a pickle.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrMatrix {
    /// `(rows, cols)`.
    pub shape: (usize, usize),
    /// Row pointers.
    pub indptr: Vec<u64>,
    /// Column indices.
    pub indices: Vec<u64>,
    /// Values.
    pub data: Vec<f64>,
}

/// Interprets a value as `scipy.sparse.csr_matrix` (or `csr_array`).
pub fn to_csr_matrix(v: &Value) -> Result<CsrMatrix, String> {
    match v.class_name() {
        Some((m, n)) if m.starts_with("scipy.sparse") && n.starts_with("csr_") => {}
        Some((m, n)) => return Err(format!("expected a scipy CSR matrix, found {m}.{n}")),
        None => return Err("expected a scipy CSR matrix, found a plain value".into()),
    }
    let state = state_of(v, "scipy matrix")?;
    let get = |k: &str| {
        state
            .dict_get(k)
            .ok_or_else(|| format!("scipy matrix has no `{k}`"))
    };
    let dim = |v: &Value| {
        v.as_int()
            .filter(|&d| (0..u32::MAX as i64).contains(&d))
            .map(|d| d as usize)
            .ok_or_else(|| format!("scipy matrix `_shape` entry {v:?} is not a 32-bit size"))
    };
    let shape = match get("_shape")? {
        Value::Tuple(s) if s.len() == 2 => (dim(&s[0])?, dim(&s[1])?),
        _ => return Err("scipy matrix `_shape` is not a pair".into()),
    };
    let ints = |k: &str| -> Result<Vec<u64>, String> {
        let a = to_ndarray(get(k)?).map_err(|e| format!("`{k}`: {e}"))?;
        a.data
            .iter()
            .map(|&x| {
                if x >= 0.0 && x.fract() == 0.0 {
                    Ok(x as u64)
                } else {
                    Err(format!("`{k}` holds {x}"))
                }
            })
            .collect()
    };
    let indptr = ints("indptr")?;
    let indices = ints("indices")?;
    let data = to_ndarray(get("data")?)
        .map_err(|e| format!("`data`: {e}"))?
        .data;
    if indptr.len() != shape.0 + 1 {
        return Err(format!(
            "`indptr` has {} entries for {} rows",
            indptr.len(),
            shape.0
        ));
    }
    if indices.len() != data.len() {
        return Err(format!(
            "{} indices but {} values",
            indices.len(),
            data.len()
        ));
    }
    // The CSR invariants, checked once here so that readers can slice rows without checks.
    if indptr[0] != 0 {
        return Err(format!("`indptr` starts at {}, expected 0", indptr[0]));
    }
    if let Some(r) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!(
            "`indptr` decreases at row {r}: {} > {}",
            indptr[r],
            indptr[r + 1]
        ));
    }
    if indptr[shape.0] != indices.len() as u64 {
        return Err(format!(
            "`indptr` ends at {} but there are {} indices",
            indptr[shape.0],
            indices.len()
        ));
    }
    if let Some(p) = indices.iter().position(|&c| c >= shape.1 as u64) {
        return Err(format!(
            "`indices` entry {p} = {} is outside 0..{} columns",
            indices[p], shape.1
        ));
    }
    Ok(CsrMatrix {
        shape,
        indptr,
        indices,
        data,
    })
}
