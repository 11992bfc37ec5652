//! A protocol-2 pickle writer, the inverse of [`super::parse`] for Planetoid's objects.

/// A protocol-2 pickle writer for the objects Planetoid files hold (numpy arrays, scipy CSR
/// matrices, a `defaultdict(list)` of adjacency lists), the inverse of [`super::parse`]: tests and
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
