//! A small, safe Python pickle reader (protocols 0-2 as written by Python 2's `cPickle`),
//! enough to decode the Planetoid files: numpy arrays (`_reconstruct` + `BUILD`), scipy CSR
//! matrices (`NEWOBJ` + state dict) and `collections.defaultdict(list)`.
//!
//! Nothing is executed: globals become [`Value::Global`] names and calls become
//! [`Value::Object`] records that the Planetoid decoder interprets.

use std::rc::Rc;

mod ndarray;
mod writer;

pub use ndarray::{to_csr_matrix, to_ndarray, CsrMatrix, NdArray};
pub use writer::Writer;

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
                let k = r.memo_key(op, at)?;
                let (v, d) = stack.top()?;
                charge(v, at)?;
                memo.insert(k, (v.clone(), d));
            }
            b'h' | b'j' | b'g' => {
                let k = r.memo_key(op, at)?;
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
    /// The memo key of a PUT (`q`, `r`, `p`) or GET (`h`, `j`, `g`): one byte, four
    /// little-endian bytes or a decimal line (protocol 0), by the opcode.
    fn memo_key(&mut self, op: u8, at: usize) -> Result<u32, String> {
        match op {
            b'q' | b'h' => Ok(self.byte()? as u32),
            b'r' | b'j' => Ok(u32::from_le_bytes(self.array()?)),
            _ => {
                let what = if op == b'p' { "PUT" } else { "GET" };
                self.line()?
                    .parse()
                    .map_err(|_| format!("bad {what} at byte {at}"))
            }
        }
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
