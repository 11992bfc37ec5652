//! A small, safe Python pickle reader (protocols 0-2 as written by Python 2's `cPickle`),
//! enough to decode the Planetoid files: numpy arrays (`_reconstruct` + `BUILD`), scipy CSR
//! matrices (`NEWOBJ` + state dict) and `collections.defaultdict(list)`.
//!
//! Nothing is executed: globals become [`Value::Global`] names and calls become
//! [`Value::Object`] records that the Planetoid decoder interprets.

use std::rc::Rc;

/// A decoded pickle value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer (Python `int`/`long` that fits in i64).
    Int(i64),
    /// A float.
    Float(f64),
    /// A byte string (Python 2 `str`, or `bytes`).
    Bytes(Rc<Vec<u8>>),
    /// A text string (`unicode`).
    Str(String),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A list.
    List(Vec<Value>),
    /// A dict, in insertion order.
    Dict(Vec<(Value, Value)>),
    /// A global name `module.name`.
    Global(String, String),
    /// The result of calling `class(*args)` (REDUCE / NEWOBJ), plus the state given by BUILD and
    /// items set on it (a `defaultdict` receives its items this way).
    Object {
        /// The callable.
        class: Box<Value>,
        /// Its arguments.
        args: Box<Value>,
        /// State from BUILD.
        state: Option<Box<Value>>,
        /// Items from SETITEM(S).
        items: Vec<(Value, Value)>,
    },
}

impl Value {
    /// The text of a `Bytes` or `Str` value.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
    /// The integer of an `Int` or `Bool`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }
    /// Looks a key up in a `Dict` (keys compared as text).
    pub fn dict_get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(items) => items
                .iter()
                .find(|(k, _)| k.as_text().as_deref() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
    /// `(module, name)` if this is an object created by calling a global.
    pub fn class_name(&self) -> Option<(&str, &str)> {
        match self {
            Value::Object { class, .. } => match class.as_ref() {
                Value::Global(m, n) => Some((m, n)),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Deepest nesting of containers a pickle may build (Planetoid's files need 5). Deeper values
/// would make the recursive `Drop`/`Clone` of [`Value`] overflow the thread's stack.
pub const MAX_DEPTH: u32 = 64;

/// The decoder's operand stack: each value with its nesting depth, so that building a
/// container checks [`MAX_DEPTH`] in constant time.
struct Stack {
    vals: Vec<Value>,
    depth: Vec<u32>,
}

impl Stack {
    fn push(&mut self, v: Value, d: u32, at: usize) -> Result<(), String> {
        if d > MAX_DEPTH {
            return Err(format!(
                "values nest deeper than {MAX_DEPTH} levels at byte {at}"
            ));
        }
        self.vals.push(v);
        self.depth.push(d);
        Ok(())
    }
    fn pop(&mut self, at: usize) -> Result<(Value, u32), String> {
        match (self.vals.pop(), self.depth.pop()) {
            (Some(v), Some(d)) => Ok((v, d)),
            _ => Err(format!("stack underflow at byte {at}")),
        }
    }
    fn split_off(&mut self, m: usize) -> (Vec<Value>, u32) {
        let d = self.depth.split_off(m).into_iter().max().unwrap_or(0);
        (self.vals.split_off(m), d)
    }
    /// The top value and its depth, raised to hold a child of depth `child`.
    fn top_for(&mut self, child: u32, at: usize) -> Result<&mut Value, String> {
        let d = self.depth.last_mut().ok_or("operation on an empty stack")?;
        *d = (*d).max(child + 1);
        if *d > MAX_DEPTH {
            return Err(format!(
                "values nest deeper than {MAX_DEPTH} levels at byte {at}"
            ));
        }
        Ok(self
            .vals
            .last_mut()
            .expect("depth and values have one entry each"))
    }
    fn top(&self) -> Result<(&Value, u32), String> {
        match (self.vals.last(), self.depth.last()) {
            (Some(v), Some(&d)) => Ok((v, d)),
            _ => Err("PUT/DUP on an empty stack".into()),
        }
    }
}

/// Number of values in `v` (itself and everything it holds; strings count by length), the
/// unit of [`parse`]'s copy budget.
fn weight(v: &Value) -> usize {
    1 + match v {
        Value::Str(s) => s.len() / 8,
        Value::Tuple(x) | Value::List(x) => x.iter().map(weight).sum(),
        Value::Dict(x) => x.iter().map(|(k, v)| weight(k) + weight(v)).sum(),
        Value::Object {
            class,
            args,
            state,
            items,
        } => {
            weight(class)
                + weight(args)
                + state.as_deref().map_or(0, weight)
                + items
                    .iter()
                    .map(|(k, v)| weight(k) + weight(v))
                    .sum::<usize>()
        }
        _ => 0,
    }
}

/// Decodes one pickle. Errors are plain messages; the caller adds file and field.
///
/// Memory is bounded by the input: values nest at most [`MAX_DEPTH`] deep, and the copies that
/// memo reads and `DUP` make (this decoder copies where Python shares) may add at most
/// `4 * data.len() + 2^20` values in all.
pub fn parse(data: &[u8]) -> Result<Value, String> {
    let mut r = Reader { data, pos: 0 };
    let mut stack = Stack {
        vals: Vec::new(),
        depth: Vec::new(),
    };
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: std::collections::HashMap<u32, (Value, u32)> = std::collections::HashMap::new();
    let mut budget = data.len().saturating_mul(4).saturating_add(1 << 20);
    let mut charge = |v: &Value, at: usize| -> Result<(), String> {
        budget = budget.checked_sub(weight(v)).ok_or_else(|| {
            format!("memo/DUP copies at byte {at} expand the pickle beyond its copy budget")
        })?;
        Ok(())
    };
    loop {
        let at = r.pos;
        let op = r.byte()?;
        let pop_mark =
            |stack: &mut Stack, marks: &mut Vec<usize>| -> Result<(Vec<Value>, u32), String> {
                let m = marks.pop().ok_or_else(|| format!("no MARK at byte {at}"))?;
                if m > stack.vals.len() {
                    return Err(format!("MARK beyond the stack at byte {at}"));
                }
                Ok(stack.split_off(m))
            };
        match op {
            0x80 => {
                let proto = r.byte()?;
                if proto > 2 {
                    return Err(format!(
                        "pickle protocol {proto} is not supported (0-2 are)"
                    ));
                }
            }
            b'.' => return Ok(stack.pop(at)?.0),
            b'(' => marks.push(stack.vals.len()),
            b'N' => stack.push(Value::None, 0, at)?,
            0x88 => stack.push(Value::Bool(true), 0, at)?,
            0x89 => stack.push(Value::Bool(false), 0, at)?,
            b'K' => stack.push(Value::Int(r.byte()? as i64), 0, at)?,
            b'M' => stack.push(Value::Int(u16::from_le_bytes(r.array()?) as i64), 0, at)?,
            b'J' => stack.push(Value::Int(i32::from_le_bytes(r.array()?) as i64), 0, at)?,
            0x8a => {
                let n = r.byte()? as usize;
                let b = r.take(n)?;
                if n > 8 {
                    return Err(format!(
                        "LONG1 of {n} bytes does not fit in i64 at byte {at}"
                    ));
                }
                let mut v: i64 = 0;
                for (k, &x) in b.iter().enumerate() {
                    v |= (x as i64) << (8 * k);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                stack.push(Value::Int(v), 0, at)?;
            }
            b'I' => {
                let line = r.line()?;
                let v = match line.as_str() {
                    "01" => Value::Bool(true),
                    "00" => Value::Bool(false),
                    s => Value::Int(
                        s.parse()
                            .map_err(|_| format!("bad INT `{s}` at byte {at}"))?,
                    ),
                };
                stack.push(v, 0, at)?;
            }
            b'L' => {
                let line = r.line()?;
                let s = line.trim_end_matches('L');
                let v = s
                    .parse()
                    .map_err(|_| format!("bad LONG `{s}` at byte {at}"))?;
                stack.push(Value::Int(v), 0, at)?;
            }
            b'G' => stack.push(Value::Float(f64::from_be_bytes(r.array()?)), 0, at)?,
            b'F' => {
                let line = r.line()?;
                let v = line
                    .parse()
                    .map_err(|_| format!("bad FLOAT `{line}` at byte {at}"))?;
                stack.push(Value::Float(v), 0, at)?;
            }
            b'U' => {
                let n = r.byte()? as usize;
                stack.push(Value::Bytes(Rc::new(r.take(n)?.to_vec())), 0, at)?;
            }
            b'T' => {
                let n = u32::from_le_bytes(r.array()?) as usize;
                stack.push(Value::Bytes(Rc::new(r.take(n)?.to_vec())), 0, at)?;
            }
            b'X' => {
                let n = u32::from_le_bytes(r.array()?) as usize;
                let s = std::str::from_utf8(r.take(n)?)
                    .map_err(|_| format!("bad UTF-8 at byte {at}"))?;
                stack.push(Value::Str(s.to_string()), 0, at)?;
            }
            b'S' => {
                let line = r.line()?;
                let s = line.trim_matches(|c| c == '\'' || c == '"');
                stack.push(Value::Bytes(Rc::new(s.as_bytes().to_vec())), 0, at)?;
            }
            b'V' => stack.push(Value::Str(r.line()?), 0, at)?,
            b')' => stack.push(Value::Tuple(Vec::new()), 1, at)?,
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                let mut d = 0;
                for _ in 0..n {
                    let (v, dv) = stack.pop(at)?;
                    items.push(v);
                    d = d.max(dv);
                }
                items.reverse();
                stack.push(Value::Tuple(items), d + 1, at)?;
            }
            b't' => {
                let (items, d) = pop_mark(&mut stack, &mut marks)?;
                stack.push(Value::Tuple(items), d + 1, at)?;
            }
            b']' => stack.push(Value::List(Vec::new()), 1, at)?,
            b'l' => {
                let (items, d) = pop_mark(&mut stack, &mut marks)?;
                stack.push(Value::List(items), d + 1, at)?;
            }
            b'}' => stack.push(Value::Dict(Vec::new()), 1, at)?,
            b'd' => {
                let (items, d) = pop_mark(&mut stack, &mut marks)?;
                stack.push(Value::Dict(pairs(items, at)?), d + 1, at)?;
            }
            b'a' => {
                let (v, d) = stack.pop(at)?;
                match stack.top_for(d, at)? {
                    Value::List(l) => l.push(v),
                    _ => return Err(format!("APPEND to a non-list at byte {at}")),
                }
            }
            b'e' => {
                let (items, d) = pop_mark(&mut stack, &mut marks)?;
                match stack.top_for(d, at)? {
                    Value::List(l) => l.extend(items),
                    _ => return Err(format!("APPENDS to a non-list at byte {at}")),
                }
            }
            b's' | b'u' => {
                let (items, d) = if op == b's' {
                    let (v, dv) = stack.pop(at)?;
                    let (k, dk) = stack.pop(at)?;
                    (vec![(k, v)], dv.max(dk))
                } else {
                    let (items, d) = pop_mark(&mut stack, &mut marks)?;
                    (pairs(items, at)?, d)
                };
                match stack.top_for(d, at)? {
                    Value::Dict(m) => m.extend(items),
                    Value::Object { items: m, .. } => m.extend(items),
                    _ => return Err(format!("SETITEM(S) on a non-dict at byte {at}")),
                }
            }
            b'c' => {
                let module = r.line()?;
                let name = r.line()?;
                stack.push(Value::Global(module, name), 0, at)?;
            }
            b'R' | 0x81 => {
                let (args, da) = stack.pop(at)?;
                let (class, dc) = stack.pop(at)?;
                let obj = Value::Object {
                    class: Box::new(class),
                    args: Box::new(args),
                    state: None,
                    items: Vec::new(),
                };
                stack.push(obj, da.max(dc) + 1, at)?;
            }
            b'b' => {
                let (st, d) = stack.pop(at)?;
                match stack.top_for(d, at)? {
                    Value::Object { state, .. } => *state = Some(Box::new(st)),
                    _ => return Err(format!("BUILD on a non-object at byte {at}")),
                }
            }
            b'q' | b'r' | b'p' => {
                let k = match op {
                    b'q' => r.byte()? as u32,
                    b'r' => u32::from_le_bytes(r.array()?),
                    _ => r
                        .line()?
                        .parse()
                        .map_err(|_| format!("bad PUT at byte {at}"))?,
                };
                let (v, d) = stack.top()?;
                charge(v, at)?;
                memo.insert(k, (v.clone(), d));
            }
            b'h' | b'j' | b'g' => {
                let k = match op {
                    b'h' => r.byte()? as u32,
                    b'j' => u32::from_le_bytes(r.array()?),
                    _ => r
                        .line()?
                        .parse()
                        .map_err(|_| format!("bad GET at byte {at}"))?,
                };
                let (v, d) = memo
                    .get(&k)
                    .ok_or_else(|| format!("memo key {k} unset at byte {at}"))?;
                charge(v, at)?;
                stack.push(v.clone(), *d, at)?;
            }
            b'0' => {
                stack.pop(at)?;
            }
            b'2' => {
                let (v, d) = stack.top()?;
                charge(v, at)?;
                let v = v.clone();
                stack.push(v, d, at)?;
            }
            other => {
                return Err(format!(
                    "unsupported pickle opcode 0x{other:02x} at byte {at}"
                ))
            }
        }
    }
}

fn pairs(items: Vec<Value>, at: usize) -> Result<Vec<(Value, Value)>, String> {
    if !items.len().is_multiple_of(2) {
        return Err(format!("odd number of dict items at byte {at}"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.data.len() - self.pos < n {
            return Err(format!(
                "truncated: needed {n} bytes at byte {}, file has {}",
                self.pos,
                self.data.len()
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn line(&mut self) -> Result<String, String> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| format!("truncated: unterminated line at byte {}", self.pos))?;
        self.pos += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
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
    let Value::Object {
        state: Some(state), ..
    } = v
    else {
        return Err("numpy array without state".into());
    };
    let Value::Tuple(st) = state.as_ref() else {
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
    let Value::Object {
        state: Some(state), ..
    } = v
    else {
        return Err("scipy matrix without state".into());
    };
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

/// A protocol-2 pickle writer for the objects Planetoid files hold (numpy arrays, scipy CSR
/// matrices, a `defaultdict(list)` of adjacency lists), the inverse of [`parse`]: tests and
/// tools use it to write Planetoid fixtures that Python's `pickle.load` reads as well.
pub struct Writer(Vec<u8>);

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    /// An empty protocol-2 pickle.
    pub fn new() -> Self {
        Writer(vec![0x80, 2])
    }
    /// GLOBAL `module.name`.
    pub fn global(&mut self, module: &str, name: &str) {
        self.0.push(b'c');
        self.0.extend(format!("{module}\n{name}\n").as_bytes());
    }
    /// BININT.
    pub fn int(&mut self, v: i32) {
        self.0.push(b'J');
        self.0.extend(v.to_le_bytes());
    }
    /// BINSTRING (a Python-2 `str`).
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.push(b'T');
        self.0.extend((b.len() as u32).to_le_bytes());
        self.0.extend(b);
    }
    /// One raw opcode.
    pub fn op(&mut self, o: u8) {
        self.0.push(o);
    }
    /// A numpy array: `numpy.core.multiarray._reconstruct(ndarray, (0,), 'b')` + BUILD state
    /// `(1, shape, dtype, False, raw)`; `dtype` is a numpy code such as `i4` or `f4`.
    pub fn ndarray(&mut self, shape: &[i32], dtype: &str, raw: &[u8]) {
        self.global("numpy.core.multiarray", "_reconstruct");
        self.global("numpy", "ndarray");
        self.int(0);
        self.op(0x85); // TUPLE1
        self.bytes(b"b");
        self.op(0x87); // TUPLE3
        self.op(b'R');
        self.op(b'(');
        self.int(1);
        self.op(b'(');
        for &d in shape {
            self.int(d);
        }
        self.op(b't');
        self.global("numpy", "dtype");
        self.bytes(dtype.as_bytes());
        self.int(0);
        self.int(1);
        self.op(0x87);
        self.op(b'R');
        self.op(b'(');
        self.int(3);
        self.bytes(b"<");
        self.op(b'N');
        self.op(b'N');
        self.op(b'N');
        self.int(-1);
        self.int(-1);
        self.int(0);
        self.op(b't');
        self.op(b'b'); // dtype BUILD
        self.op(0x89); // is_fortran = False
        self.bytes(raw);
        self.op(b't');
        self.op(b'b'); // array BUILD
    }
    /// Little-endian bytes of `v`.
    pub fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    /// Little-endian bytes of `v`.
    pub fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    /// scipy.sparse.csr.csr_matrix via NEWOBJ + state dict; `entries` are `(row, col, value)`.
    pub fn csr(&mut self, rows: usize, cols: usize, entries: &[(usize, i32, f32)]) {
        self.global("scipy.sparse.csr", "csr_matrix");
        self.op(b')');
        self.op(0x81); // NEWOBJ
        self.op(b'}');
        self.op(b'(');
        let mut indptr = vec![0i32];
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        for r in 0..rows {
            for &(er, c, v) in entries.iter().filter(|e| e.0 == r) {
                let _ = er;
                idx.push(c);
                val.push(v);
            }
            indptr.push(idx.len() as i32);
        }
        self.bytes(b"_shape");
        self.int(rows as i32);
        self.int(cols as i32);
        self.op(0x86);
        self.bytes(b"indptr");
        self.ndarray(&[indptr.len() as i32], "i4", &Self::i32s(&indptr));
        self.bytes(b"indices");
        self.ndarray(&[idx.len() as i32], "i4", &Self::i32s(&idx));
        self.bytes(b"data");
        self.ndarray(&[val.len() as i32], "f4", &Self::f32s(&val));
        self.bytes(b"format");
        self.bytes(b"csr");
        self.op(b'u'); // SETITEMS
        self.op(b'b'); // BUILD
    }
    /// A one-hot `[len, classes]` i4 label array.
    pub fn onehot(&mut self, labels: &[usize], classes: usize) {
        let mut v = vec![0i32; labels.len() * classes];
        for (i, &l) in labels.iter().enumerate() {
            v[i * classes + l] = 1;
        }
        self.ndarray(
            &[labels.len() as i32, classes as i32],
            "i4",
            &Self::i32s(&v),
        );
    }
    /// `collections.defaultdict(list)` with the given `(node, neighbours)` items.
    pub fn adjacency(&mut self, lists: &[(i32, Vec<i32>)]) {
        self.global("collections", "defaultdict");
        self.global("__builtin__", "list");
        self.op(0x85);
        self.op(b'R');
        self.op(b'(');
        for (u, nbrs) in lists {
            self.int(*u);
            self.op(b']');
            self.op(b'(');
            for &w in nbrs {
                self.int(w);
            }
            self.op(b'e');
        }
        self.op(b'u');
    }

    /// The finished pickle (STOP appended).
    pub fn finish(mut self) -> Vec<u8> {
        self.op(b'.');
        self.0
    }

    /// Writes the finished pickle to `path`.
    pub fn save(self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::write(path, self.finish())
    }
}
