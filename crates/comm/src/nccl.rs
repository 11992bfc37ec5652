//! NCCL communicator (feature `nccl`): the library PyTorch and DGL use, through cudarc's
//! bindings. Collectives run on a stream of their own, ordered with candle's stream by events
//! on both sides of every call (nothing synchronises the host), so that
//! [`Communicator::shift_overlapped`] can run local kernels on candle's stream while a
//! transfer is in flight.
//!
//! The communicator handle is held here (`RawComm`) rather than through cudarc's `Comm`,
//! which keeps it private: a [`crate::Watchdog`] must be able to abort it
//! (`ncclCommAbort`) and poll its asynchronous error (`ncclCommGetAsyncError`) from another
//! thread.

use super::{check_exchange, ring_peers, Communicator, Counter};
use crate::error::{Error, Result};
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::{DType, Device, Storage, Tensor};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use cudarc::nccl::result::{self as nccl_result, NcclError};
use cudarc::nccl::safe::{group_end, group_start, Id, NcclType};
use cudarc::nccl::sys;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, TryLockError};

fn nccl(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Comm(format!(
        "NCCL {what}: {e:?} (NCCL_DEBUG=INFO prints NCCL's reason)"
    ))
}

/// [`nccl`] for NCCL's own errors, naming the result code (cudarc's `Debug` does not).
fn nccl_code(what: &str, e: NcclError) -> Error {
    nccl(what, e.0)
}

/// An NCCL unique id: made by rank 0, handed to every rank before [`NcclComm::new`] (in one
/// process, by value; across processes or hosts, through a file every rank can read or
/// over TCP, [`crate::TcpRendezvous`]).
#[derive(Debug, Clone, Copy)]
pub struct NcclId(Id);

impl NcclId {
    /// A fresh id (rank 0).
    pub fn new() -> Result<Self> {
        Ok(Self(Id::new().map_err(|e| nccl_code("unique id", e))?))
    }

    /// The id's 128 bytes.
    pub fn to_bytes(&self) -> [u8; crate::rendezvous::ID_BYTES] {
        self.0.internal().map(|c| c as u8)
    }

    /// The id of 128 bytes [`Self::to_bytes`] gave.
    pub fn from_bytes(bytes: [u8; crate::rendezvous::ID_BYTES]) -> Self {
        Self(Id::uninit(bytes.map(|b| b as std::ffi::c_char)))
    }

    /// Writes the id's 128 bytes to `path` (rank 0 of a multi-process run).
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_bytes())
            .map_err(|e| Error::Comm(format!("{}: cannot write the NCCL id: {e}", path.display())))
    }

    /// Reads an id [`Self::write`] wrote.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Comm(format!("{}: cannot read the NCCL id: {e}", path.display()))
        })?;
        let arr: [u8; 128] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| Error::InvalidArgument {
                op: "nccl id",
                what: format!(
                    "{}: an NCCL id is 128 bytes, the file holds {}",
                    path.display(),
                    bytes.len()
                ),
            })?;
        Ok(Self::from_bytes(arr))
    }
}

/// An NCCL communicator handle and the stream its collectives go on.
///
/// Every use of the handle holds a read guard of `live`, which is `false` once the handle
/// is aborted (and freed). [`Self::abort`] takes the write guard only when no use holds a
/// read guard: it never frees the handle under a call. A call that NCCL keeps inside an
/// enqueue (a group end connecting to a dead peer) therefore keeps the abort from happening;
/// the watchdog's stuck hook is for that case.
struct RawComm {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
    live: RwLock<bool>,
    /// Why it was aborted.
    reason: Mutex<String>,
}

impl RawComm {
    /// Joins rank `rank` of `world` to the communicator of `id`, its collectives on `stream`
    /// (collective: blocks until every rank has joined).
    fn join(stream: Arc<CudaStream>, rank: usize, world: usize, id: &NcclId) -> Result<Self> {
        let bad = |what: &str| Error::InvalidArgument {
            op: "nccl",
            what: format!("{what} does not fit NCCL's int"),
        };
        let nranks = i32::try_from(world).map_err(|_| bad("the world size"))?;
        let r = i32::try_from(rank).map_err(|_| bad("the rank"))?;
        let mut comm = std::mem::MaybeUninit::uninit();
        let uid = sys::ncclUniqueId {
            internal: *id.0.internal(),
        };
        // SAFETY: `comm` is a valid place for the handle, which NCCL writes on success (and
        // only then is it read).
        let comm = unsafe {
            nccl_result::comm_init_rank(comm.as_mut_ptr(), nranks, uid, r)
                .map_err(|e| nccl_code("init", e))?;
            comm.assume_init()
        };
        Ok(Self {
            comm,
            stream,
            live: RwLock::new(true),
            reason: Mutex::new(String::new()),
        })
    }

    /// A read guard of the live handle, or the error saying why it was aborted.
    fn use_handle(&self, rank: usize) -> Result<RwLockReadGuard<'_, bool>> {
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        if !*live {
            return Err(Error::Comm(format!(
                "rank {rank}: the NCCL communicator was aborted ({})",
                self.reason.lock().unwrap_or_else(|e| e.into_inner())
            )));
        }
        Ok(live)
    }

    /// Aborts the handle unless a call is using it; returns whether it is aborted now.
    fn abort(&self, reason: &str) -> bool {
        let mut live = match self.live.try_write() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(g)) => g.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        if *live {
            *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason.to_string();
            // SAFETY: the write guard excludes every other use of the handle, and `live`
            // false keeps every later one away. The result is ignored: the handle is gone
            // either way.
            let _ = unsafe { nccl_result::comm_abort(self.comm) };
            *live = false;
        }
        true
    }

    /// NCCL's asynchronous error of the handle, or that it was aborted; `None` while a call
    /// is aborting it.
    fn async_error(&self) -> Option<String> {
        let live = match self.live.try_read() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(g)) => g.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        if !*live {
            return Some(format!(
                "the NCCL communicator was aborted ({})",
                self.reason.lock().unwrap_or_else(|e| e.into_inner())
            ));
        }
        let mut code = sys::ncclResult_t::ncclSuccess;
        // SAFETY: the handle is live while the read guard is held; NCCL allows this query
        // from any thread, concurrently with the handle's other calls.
        let queried = unsafe { sys::ncclCommGetAsyncError(self.comm, &mut code) };
        match (queried.result(), code.result()) {
            (Ok(_), Ok(_)) => None,
            (Ok(_), Err(e)) => Some(format!(
                "NCCL asynchronous error {:?} (NCCL_DEBUG=INFO prints NCCL's reason)",
                e.0
            )),
            (Err(e), _) => Some(format!("ncclCommGetAsyncError failed: {:?}", e.0)),
        }
    }
}

impl Drop for RawComm {
    fn drop(&mut self) {
        let live = self.live.get_mut().unwrap_or_else(|e| e.into_inner());
        if *live {
            // SAFETY: the last use of the handle (`&mut self`). Aborted rather than
            // destroyed, as cudarc's `Comm` does: destroying waits for work a failed run may
            // never finish.
            let _ = unsafe { nccl_result::comm_abort(self.comm) };
            *live = false;
        }
    }
}

/// The right to enqueue collectives: the call mutex (calls do not overlap) and a read
/// guard of the live handle. Its methods mirror cudarc's `Comm`'s.
struct Enqueue<'a> {
    raw: &'a RawComm,
    _call: MutexGuard<'a, ()>,
    _live: RwLockReadGuard<'a, bool>,
}

impl Enqueue<'_> {
    fn stream(&self) -> sys::cudaStream_t {
        self.raw.stream.cu_stream() as sys::cudaStream_t
    }

    fn send<T: NcclType, S: DevicePtr<T>>(&self, data: &S, peer: usize) -> Result<()> {
        let (src, _record) = data.device_ptr(&self.raw.stream);
        // SAFETY: `src` holds `data.len()` elements of `T` on this rank's device; the handle
        // is live (the read guard) and the stream is the communicator's.
        unsafe {
            nccl_result::send(
                src as _,
                data.len(),
                T::as_nccl_type(),
                peer as i32,
                self.raw.comm,
                self.stream(),
            )
        }
        .map_err(|e| nccl_code("send", e))?;
        Ok(())
    }

    fn recv<T: NcclType, R: DevicePtrMut<T>>(&self, buf: &mut R, peer: usize) -> Result<()> {
        let count = buf.len();
        let (dst, _record) = buf.device_ptr_mut(&self.raw.stream);
        // SAFETY: `dst` holds `count` elements of `T`; as in `send`.
        unsafe {
            nccl_result::recv(
                dst as _,
                count,
                T::as_nccl_type(),
                peer as i32,
                self.raw.comm,
                self.stream(),
            )
        }
        .map_err(|e| nccl_code("recv", e))?;
        Ok(())
    }

    fn all_reduce_sum<T: NcclType, S: DevicePtr<T>, R: DevicePtrMut<T>>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        let count = send.len();
        let (src, _r1) = send.device_ptr(&self.raw.stream);
        let (dst, _r2) = recv.device_ptr_mut(&self.raw.stream);
        // SAFETY: both buffers hold `count` elements of `T`; as in `send`.
        unsafe {
            nccl_result::all_reduce(
                src as _,
                dst as _,
                count,
                T::as_nccl_type(),
                sys::ncclRedOp_t::ncclSum,
                self.raw.comm,
                self.stream(),
            )
        }
        .map_err(|e| nccl_code("all-reduce", e))?;
        Ok(())
    }

    fn all_gather<T: NcclType, S: DevicePtr<T>, R: DevicePtrMut<T>>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        let count = send.len();
        let (src, _r1) = send.device_ptr(&self.raw.stream);
        let (dst, _r2) = recv.device_ptr_mut(&self.raw.stream);
        // SAFETY: `send` holds `count` elements of `T` and `recv` world x `count` (the
        // callers allocate it so); as in `send`.
        unsafe {
            nccl_result::all_gather(
                src as _,
                dst as _,
                count,
                T::as_nccl_type(),
                self.raw.comm,
                self.stream(),
            )
        }
        .map_err(|e| nccl_code("all-gather", e))?;
        Ok(())
    }

    fn reduce_scatter_sum<T: NcclType, S: DevicePtr<T>, R: DevicePtrMut<T>>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        let count = recv.len();
        let (src, _r1) = send.device_ptr(&self.raw.stream);
        let (dst, _r2) = recv.device_ptr_mut(&self.raw.stream);
        // SAFETY: `recv` holds `count` elements of `T` and `send` world x `count` (checked by
        // the caller); as in `send`.
        unsafe {
            nccl_result::reduce_scatter(
                src as _,
                dst as _,
                count,
                T::as_nccl_type(),
                sys::ncclRedOp_t::ncclSum,
                self.raw.comm,
                self.stream(),
            )
        }
        .map_err(|e| nccl_code("reduce-scatter", e))?;
        Ok(())
    }
}

/// One rank of an NCCL communicator on one CUDA device.
pub struct NcclComm {
    /// The handle, used by one call at a time (`calls`), from the rank's own thread; aborted
    /// from any.
    comm: RawComm,
    calls: Mutex<()>,
    device: CudaDevice,
    /// The stream NCCL runs on (forked from candle's): it waits for candle's stream before
    /// every collective, and candle's waits for it after (see [`Self::lock`]).
    stream: Arc<CudaStream>,
    rank: usize,
    world: usize,
    counter: Counter,
    /// Synchronise the stream around each call, so `time_spent` is the transfers' time (not
    /// just their launch): for profiling runs.
    timed: bool,
    /// Run [`Communicator::shift_overlapped`]'s local work while the transfer is in
    /// flight (default); off, it runs first and the transfer after, as the trait's default.
    overlap: bool,
}

// SAFETY: `RawComm` holds a raw `ncclComm_t`, which NCCL allows to be used from any thread as
// long as calls on it do not overlap: every enqueue goes through the `calls` mutex; the
// abort and the asynchronous-error query, which NCCL allows from another thread, go through
// `RawComm::live` so that neither touches a freed handle.
unsafe impl Send for NcclComm {}
unsafe impl Sync for NcclComm {}

impl std::fmt::Debug for NcclComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclComm(rank {} of {})", self.rank, self.world)
    }
}

/// The error of a tensor NCCL cannot move: `what` is not in CUDA memory.
fn off_gpu(op: &'static str, what: String) -> Error {
    Error::Unsupported {
        op,
        what: format!("{what} is not on the GPU"),
    }
}

/// Runs `$body` with `$T` bound to the element type of a candle CUDA dtype.
macro_rules! with_cuda_type {
    ($dt:expr, |$T:ident| $body:expr) => {
        with_cuda_type!(@each $dt, $T, $body, U8 u8, I16 i16, U32 u32, BF16 half::bf16,
            F16 half::f16, F32 f32, F64 f64)
    };
    (@each $dt:expr, $T:ident, $body:expr, $($v:ident $t:ty),*) => {
        match $dt {
            $(DType::$v => {
                type $T = $t;
                $body
            })*
            other => Err(Error::Unsupported {
                op: "nccl",
                what: format!("{other:?} tensors"),
            }),
        }
    };
}

impl NcclComm {
    /// Joins rank `rank` of `world` on `device` (a CUDA device) to the communicator of `id`.
    /// Collective: blocks until every rank has joined. `timed`: synchronise the stream before
    /// and after every call, so [`Communicator::time_spent`] measures the transfers (for
    /// profiling; otherwise calls only enqueue work and return).
    pub fn new(
        id: &NcclId,
        rank: usize,
        world: usize,
        device: &Device,
        timed: bool,
    ) -> Result<Self> {
        let Device::Cuda(dev) = device else {
            return Err(Error::Unsupported {
                op: "nccl",
                what: format!(
                    "rank {rank} on {:?}: NCCL needs a CUDA device",
                    device.location()
                ),
            });
        };
        // NCCL joins the rank on the calling thread's current device, and cudarc's
        // `from_rank` does not make the stream's context current: without this, every rank
        // thread of a process would join on GPU 0 ("Duplicate GPU detected").
        let main = dev.cuda_stream();
        main.context()
            .bind_to_thread()
            .map_err(|e| nccl("binding the rank's device", e))?;
        // A second stream puts cudarc in its multi-stream mode, where every buffer use records
        // and waits on events unless tracking is off: a few microseconds on each of the
        // epoch's thousands of launches. The order is kept by hand instead: the NCCL stream
        // waits for candle's before a collective and candle's for it after, so every buffer
        // a collective touches is ready before it and not freed (freeing is ordered on
        // candle's stream) until after it.
        // SAFETY: the only other stream of this context is the one made here, and every use
        // of it is bracketed by those waits (`lock` and `leave`).
        unsafe { dev.disable_event_tracking() };
        let stream = main.fork().map_err(|e| nccl("NCCL stream", e))?;
        let comm = RawComm::join(stream.clone(), rank, world, id)?;
        Ok(Self {
            comm,
            calls: Mutex::new(()),
            device: dev.clone(),
            stream,
            rank,
            world,
            counter: Counter::default(),
            timed,
            overlap: true,
        })
    }

    /// With `on` false, [`Communicator::shift_overlapped`] runs its local work before the
    /// transfer instead of during it (to measure what the overlap gains).
    pub fn with_overlap(mut self, on: bool) -> Self {
        self.overlap = on;
        self
    }

    /// The communicator, with the NCCL stream made to wait for everything enqueued on
    /// candle's stream so far (the inputs, and the outputs' allocation): call it after
    /// allocating and before enqueuing the collective. An error once aborted.
    fn lock(&self) -> Result<Enqueue<'_>> {
        let call = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let live = self.comm.use_handle(self.rank)?;
        self.stream
            .join(&self.device.cuda_stream())
            .map_err(|e| nccl("ordering the NCCL stream after candle's", e))?;
        Ok(Enqueue {
            raw: &self.comm,
            _call: call,
            _live: live,
        })
    }

    /// Candle's stream waits for the collectives enqueued so far.
    fn leave(&self) -> Result<()> {
        self.device
            .cuda_stream()
            .join(&self.stream)
            .map_err(|e| nccl("ordering candle's stream after NCCL's", e))
    }

    /// Synchronises candle's stream when `timed`.
    fn sync(&self) -> Result<()> {
        if self.timed {
            self.device
                .cuda_stream()
                .synchronize()
                .map_err(|e| nccl("synchronize", e))?;
        }
        Ok(())
    }

    /// Counts what an all-gather of `x` sends from this rank: its block, to each of the other
    /// ranks (as the point-to-point count would be; a ring forwards other blocks too, which
    /// is NCCL's business).
    fn count_gather(&self, x: &Tensor) {
        for _ in 1..self.world {
            self.counter.add(x);
        }
    }

    /// Makes this rank's device current (a thread may have touched another since).
    fn bind(&self) -> Result<()> {
        self.device
            .cuda_stream()
            .context()
            .bind_to_thread()
            .map_err(|e| nccl("binding the rank's device", e))
    }

    /// `f` (which enqueues collectives) under the timer, candle's stream waiting for it
    /// after, and synchronised around it when `timed`.
    fn timed<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        self.bind()?;
        self.sync()?;
        self.counter.timed(|| {
            let r = f();
            // Also after a failure: buffers the NCCL stream may still use are freed on
            // candle's.
            self.leave()?;
            let r = r?;
            self.sync()?;
            Ok(r)
        })
    }

    fn exchange_typed<T>(
        &self,
        sends: &[Tensor],
        recv_rows: &[usize],
        d: usize,
    ) -> Result<Vec<Tensor>>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits,
    {
        let stream = self.device.cuda_stream();
        let sends: Vec<Tensor> = sends
            .iter()
            .map(|t| t.contiguous())
            .collect::<candle_core::Result<_>>()?;
        let guards: Vec<_> = sends.iter().map(|t| t.storage_and_layout()).collect();
        let mut recv: Vec<CudaSlice<T>> = recv_rows
            .iter()
            .map(|&r| stream.alloc_zeros::<T>(r * d))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| nccl("receive buffer", e))?;
        let comm = self.lock()?;
        group_start().map_err(|e| nccl_code("group start", e))?;
        for (p, (st, l)) in guards.iter().enumerate() {
            let len = l.shape().elem_count();
            if p == self.rank || len == 0 {
                continue;
            }
            let Storage::Cuda(cs) = &**st else {
                return Err(off_gpu("nccl exchange", format!("the send to rank {p}")));
            };
            let src = cs.as_cuda_slice::<T>()?;
            let view = src.slice(l.start_offset()..l.start_offset() + len);
            // As bytes: NCCL has no 16-bit integer type (the MaxK column index).
            // SAFETY: the view holds `len` elements of `T`, i.e. `len * size_of::<T>()` bytes.
            let bytes = unsafe { view.transmute::<u8>(len * std::mem::size_of::<T>()) }
                .ok_or_else(|| Error::Comm("byte view of a send buffer".into()))?;
            comm.send(&bytes, p)?;
        }
        for (p, buf) in recv.iter_mut().enumerate() {
            let len = buf.len();
            if p == self.rank || len == 0 {
                continue;
            }
            // SAFETY: the buffer holds `len` elements of `T`.
            let mut bytes = unsafe { buf.transmute_mut::<u8>(len * std::mem::size_of::<T>()) }
                .ok_or_else(|| Error::Comm("byte view of a receive buffer".into()))?;
            comm.recv(&mut bytes, p)?;
        }
        group_end().map_err(|e| nccl_code("group end", e))?;
        drop(comm);
        drop(guards);
        Ok(recv
            .into_iter()
            .zip(recv_rows)
            .map(|(buf, &r)| {
                let st = Storage::Cuda(CudaStorage::wrap_cuda_slice(buf, self.device.clone()));
                Tensor::from_storage(st, (r, d), BackpropOp::none(), false)
            })
            .collect())
    }

    fn all_reduce_typed<T>(&self, t: &Tensor) -> Result<Tensor>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits + NcclType,
    {
        let t = t.contiguous()?;
        let n = t.elem_count();
        let stream = self.device.cuda_stream();
        let mut out = stream
            .alloc_zeros::<T>(n)
            .map_err(|e| nccl("reduce buffer", e))?;
        {
            let (st, l) = t.storage_and_layout();
            let Storage::Cuda(cs) = &*st else {
                return Err(off_gpu("nccl all_reduce", "the tensor".into()));
            };
            let src = cs.as_cuda_slice::<T>()?;
            let view = src.slice(l.start_offset()..l.start_offset() + n);
            let comm = self.lock()?;
            comm.all_reduce_sum(&view, &mut out)?;
        }
        let st = Storage::Cuda(CudaStorage::wrap_cuda_slice(out, self.device.clone()));
        Ok(Tensor::from_storage(
            st,
            t.shape().clone(),
            BackpropOp::none(),
            false,
        ))
    }
}

impl NcclComm {
    /// A tensor over a fresh device buffer of `T`.
    fn wrap<T: CudaDType + DeviceRepr>(&self, buf: CudaSlice<T>, shape: (usize, usize)) -> Tensor {
        let st = Storage::Cuda(CudaStorage::wrap_cuda_slice(buf, self.device.clone()));
        Tensor::from_storage(st, shape, BackpropOp::none(), false)
    }

    fn all_gather_typed<T>(&self, x: &Tensor) -> Result<Tensor>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits,
    {
        let (m, d) = x.dims2()?;
        let x = x.contiguous()?;
        let n = m * d;
        // SAFETY: the all-gather writes every element (an empty gather has none to read).
        let mut out = unsafe { self.device.cuda_stream().alloc::<T>(self.world * n) }
            .map_err(|e| nccl("all-gather buffer", e))?;
        if n > 0 {
            let (st, l) = x.storage_and_layout();
            let Storage::Cuda(cs) = &*st else {
                return Err(off_gpu("nccl all_gather", "the tensor".into()));
            };
            let src = cs.as_cuda_slice::<T>()?;
            let view = src.slice(l.start_offset()..l.start_offset() + n);
            let bytes = n * std::mem::size_of::<T>();
            // As bytes (any dtype; an all-gather only moves them).
            // SAFETY: both views hold exactly the elements of `T` they claim, as bytes.
            let send = unsafe { view.transmute::<u8>(bytes) }
                .ok_or_else(|| Error::Comm("byte view of an all-gather input".into()))?;
            let mut recv = unsafe { out.transmute_mut::<u8>(self.world * bytes) }
                .ok_or_else(|| Error::Comm("byte view of an all-gather output".into()))?;
            let comm = self.lock()?;
            comm.all_gather(&send, &mut recv)?;
        }
        Ok(self.wrap(out, (self.world * m, d)))
    }

    /// `enqueue` (which puts a transfer of `x` on the NCCL stream and returns its output)
    /// with `local`'s kernels going onto candle's stream meanwhile; candle's stream then waits
    /// for the transfer. Timed: the launch, and what the transfer adds once the local work is
    /// done (its exposed time).
    fn overlapped(
        &self,
        x: &Tensor,
        enqueue: impl FnOnce(&Tensor) -> Result<Tensor>,
        local: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Tensor> {
        self.bind()?;
        // Held until candle's stream has joined NCCL's: a copy made and dropped inside the
        // transfer would be freed on candle's stream, where `local`'s outputs could reuse it
        // while NCCL still reads it.
        let x = x.contiguous()?;
        self.sync()?;
        let t = std::time::Instant::now();
        let out = enqueue(&x);
        let launched = t.elapsed();
        let done = out.and_then(|out| {
            local()?;
            Ok(out)
        });
        let r = self.sync();
        let t = std::time::Instant::now();
        self.leave()?;
        drop(x);
        let (out, ()) = (done?, r?);
        self.sync()?;
        self.counter.add_time(launched + t.elapsed());
        Ok(out)
    }

    /// Sends contiguous `x` to rank `dst` and receives `[recv_rows, d]` from rank `src`, on
    /// the NCCL stream (one group: the ring's pairs cannot deadlock).
    fn shift_typed<T>(&self, x: &Tensor, dst: usize, src: usize, recv_rows: usize) -> Result<Tensor>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits,
    {
        let (_, d) = x.dims2()?;
        let n = x.elem_count();
        // SAFETY: the receive writes every element (an empty one has none to read).
        let mut out = unsafe { self.device.cuda_stream().alloc::<T>(recv_rows * d) }
            .map_err(|e| nccl("shift receive buffer", e))?;
        let (st, l) = x.storage_and_layout();
        let Storage::Cuda(cs) = &*st else {
            return Err(off_gpu("nccl shift", "the tensor".into()));
        };
        let view = cs
            .as_cuda_slice::<T>()?
            .slice(l.start_offset()..l.start_offset() + n);
        let size = std::mem::size_of::<T>();
        let comm = self.lock()?;
        group_start().map_err(|e| nccl_code("group start", e))?;
        if n > 0 {
            // As bytes (any dtype; a shift only moves them).
            // SAFETY: the view holds `n` elements of `T`, i.e. `n * size` bytes.
            let bytes = unsafe { view.transmute::<u8>(n * size) }
                .ok_or_else(|| Error::Comm("byte view of a shift input".into()))?;
            comm.send(&bytes, dst)?;
        }
        if recv_rows * d > 0 {
            // SAFETY: the buffer holds `recv_rows * d` elements of `T`.
            let mut bytes = unsafe { out.transmute_mut::<u8>(recv_rows * d * size) }
                .ok_or_else(|| Error::Comm("byte view of a shift output".into()))?;
            comm.recv(&mut bytes, src)?;
        }
        group_end().map_err(|e| nccl_code("group end", e))?;
        Ok(self.wrap(out, (recv_rows, d)))
    }

    fn reduce_scatter_typed<T>(&self, t: &Tensor) -> Result<Tensor>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits + NcclType,
    {
        let (rows, d) = t.dims2()?;
        if rows % self.world != 0 {
            return Err(Error::Shape {
                op: "nccl reduce_scatter",
                what: format!("{rows} rows do not split into {} equal blocks", self.world),
            });
        }
        let m = rows / self.world;
        let t = t.contiguous()?;
        let mut out = self
            .device
            .cuda_stream()
            .alloc_zeros::<T>(m * d)
            .map_err(|e| nccl("reduce-scatter buffer", e))?;
        if m * d > 0 {
            let (st, l) = t.storage_and_layout();
            let Storage::Cuda(cs) = &*st else {
                return Err(off_gpu("nccl reduce_scatter", "the tensor".into()));
            };
            let src = cs.as_cuda_slice::<T>()?;
            let view = src.slice(l.start_offset()..l.start_offset() + rows * d);
            let comm = self.lock()?;
            comm.reduce_scatter_sum(&view, &mut out)?;
        }
        Ok(self.wrap(out, (m, d)))
    }
}

impl Communicator for NcclComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn exchange(&self, sends: &[Tensor], recv_rows: &[usize]) -> Result<Vec<Tensor>> {
        let d = check_exchange("nccl exchange", self.rank, self.world, sends, recv_rows)?;
        for (p, s) in sends.iter().enumerate() {
            if p != self.rank {
                self.counter.add(s);
            }
        }
        let dt = sends[self.rank].dtype();
        self.timed(|| with_cuda_type!(dt, |T| self.exchange_typed::<T>(sends, recv_rows, d)))
    }

    fn all_reduce_sum(&self, t: &Tensor) -> Result<Tensor> {
        self.counter.add(t);
        self.timed(|| match t.dtype() {
            DType::F32 => self.all_reduce_typed::<f32>(t),
            DType::F64 => self.all_reduce_typed::<f64>(t),
            other => Err(Error::Unsupported {
                op: "nccl all_reduce",
                what: format!("{other:?} tensors (f32 and f64 are supported)"),
            }),
        })
    }

    fn all_gather(&self, x: &Tensor) -> Result<Tensor> {
        self.count_gather(x);
        let dt = x.dtype();
        self.timed(|| with_cuda_type!(dt, |T| self.all_gather_typed::<T>(x)))
    }

    fn shift_overlapped(
        &self,
        x: &Tensor,
        k: usize,
        recv_rows: usize,
        local: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Tensor> {
        let (dst, src) = ring_peers("nccl shift", self.rank, self.world, k)?;
        x.dims2()?;
        self.counter.add(x);
        let dt = x.dtype();
        let shift =
            |x: &Tensor| with_cuda_type!(dt, |T| self.shift_typed::<T>(x, dst, src, recv_rows));
        if !self.overlap {
            local()?;
            let x = x.contiguous()?;
            return self.timed(|| shift(&x));
        }
        self.overlapped(x, shift, local)
    }

    fn reduce_scatter_sum(&self, t: &Tensor) -> Result<Tensor> {
        // Every block but this rank's goes to its owner.
        let share = t.elem_count() * t.dtype().size_in_bytes() / self.world;
        self.counter.add_bytes((share * (self.world - 1)) as u64);
        self.timed(|| match t.dtype() {
            DType::F32 => self.reduce_scatter_typed::<f32>(t),
            DType::BF16 => self.reduce_scatter_typed::<half::bf16>(t),
            DType::F16 => self.reduce_scatter_typed::<half::f16>(t),
            DType::F64 => self.reduce_scatter_typed::<f64>(t),
            other => Err(Error::Unsupported {
                op: "nccl reduce_scatter",
                what: format!("{other:?} tensors (f32, bf16, f16 and f64 are supported)"),
            }),
        })
    }

    fn bytes_sent(&self) -> u64 {
        self.counter.get()
    }

    fn time_spent(&self) -> std::time::Duration {
        self.counter.time()
    }

    /// `ncclCommAbort` on this rank's handle, unless a call is inside an enqueue (which an
    /// abort must not free the handle under; the watchdog's stuck hook ends such a process).
    /// The kernels of collectives in flight stop, so a thread waiting for them returns.
    fn abort(&self, reason: &str) {
        self.comm.abort(reason);
    }

    /// `ncclCommGetAsyncError` (a network peer gone, say), or the abort.
    fn async_error(&self) -> Option<Error> {
        self.comm
            .async_error()
            .map(|t| Error::Comm(format!("rank {}: {t}", self.rank)))
    }
}
