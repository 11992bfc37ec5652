//! The CUDA side of a [`DeviceGraph`]: its device copy of the structure and the row
//! schedules the kernels walk, built on first use under the graph's policy.

use super::{timed_setup, DeviceGraph, Schedule};
use crate::schedule::RowSchedule;
use candle_core::Device;
use std::sync::Arc;

impl DeviceGraph {
    /// The device copy of the structure (CUDA graphs only).
    pub(crate) fn cuda_csr(&self) -> candle_core::Result<&crate::cuda::CudaCsr> {
        self.inner.cuda.as_ref().ok_or_else(|| {
            candle_core::Error::Msg(format!(
                "graph lives on {:?}, not on a CUDA device",
                self.inner.device.location()
            ))
        })
    }

    /// The device copy of the graph's [`RowSchedule`] and its item count and edge-group
    /// length. Normally groups of [`crate::schedule::CHUNK`] edges (long rows split, their
    /// partial sums added atomically); under a deterministic policy
    /// ([`crate::KernelPolicy::deterministic`]) one group per row,
    /// so every output row is written once, in a fixed order. Built on first use.
    pub(crate) fn cuda_schedule(
        &self,
    ) -> candle_core::Result<(
        &candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
        usize,
        usize,
    )> {
        let det = self.policy.deterministic;
        let slot = &self.inner.schedule[det as usize];
        if slot.get().is_none() {
            let chunk = if det {
                self.inner
                    .csr
                    .row_degrees()
                    .into_iter()
                    .max()
                    .unwrap_or(1)
                    .max(1) as usize
            } else {
                crate::schedule::CHUNK
            };
            let (buf, len) = timed_setup(|| -> candle_core::Result<_> {
                let indptr = self
                    .inner
                    .csr
                    .kernel_indptr("the graph")
                    .map_err(candle_core::Error::wrap)?;
                let s = RowSchedule::build(&indptr, chunk);
                Ok((self.upload_items(&s.items, 2)?, s.len()))
            })?;
            let _ = slot.set((buf, len, chunk));
        }
        let (b, n, c) = slot.get().expect("set above");
        Ok((b, *n, *c))
    }

    /// The device copy of [`crate::schedule::rows_longest_first`] (the non-empty rows, longest
    /// first) and its length. Built on first use.
    pub(crate) fn cuda_rows_longest_first(
        &self,
    ) -> candle_core::Result<(
        &candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
        usize,
    )> {
        let slot = &self.inner.longest_first;
        if slot.get().is_none() {
            let built = timed_setup(|| -> candle_core::Result<_> {
                let indptr = self
                    .inner
                    .csr
                    .kernel_indptr("the graph")
                    .map_err(candle_core::Error::wrap)?;
                let order = crate::schedule::rows_longest_first(&indptr);
                Ok((self.upload_items(&order, 1)?, order.len()))
            })?;
            let _ = slot.set(built);
        }
        let (b, n) = slot.get().expect("set above");
        Ok((b, *n))
    }

    /// The device copy of the graph's [`crate::schedule::ColumnBlockedSchedule`] over blocks
    /// of `block` columns, with its item count; `None` where the graph has at most one block,
    /// under a deterministic policy (its items meet through atomics) or when a row's
    /// columns are unsorted. Built on first use for a width (its columns are read back from
    /// the host copy) and kept.
    pub(crate) fn cuda_blocked_schedule(
        &self,
        block: usize,
    ) -> candle_core::Result<Option<Arc<Schedule>>> {
        if block == 0 || self.n_cols() <= block || self.policy.deterministic {
            return Ok(None);
        }
        let mut slot = self.inner.blocked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((b, s)) = &*slot {
            if *b == block {
                return Ok(s.clone());
            }
        }
        let csr = &self.inner.csr;
        let built = timed_setup(|| -> candle_core::Result<_> {
            let indptr = csr
                .kernel_indptr("the graph")
                .map_err(candle_core::Error::wrap)?;
            // Refused before the build when even its segments are too many (the items can only
            // be more): the host build would hold 12 bytes per segment first.
            let segments =
                crate::schedule::ColumnBlockedSchedule::segments(&indptr, csr.indices(), block);
            if segments.saturating_mul(crate::schedule::BLOCKED_MIN_EDGES_PER_ITEM) > csr.nnz() {
                return Ok(None);
            }
            let Some(s) = crate::schedule::ColumnBlockedSchedule::build(
                &indptr,
                csr.indices(),
                csr.n_cols(),
                block,
                crate::schedule::CHUNK,
            ) else {
                return Ok(None);
            };
            // Too few edges per item (a sparse graph over many blocks): the row schedule.
            if !s.worthwhile(csr.nnz()) {
                return Ok(None);
            }
            Ok(Some(Arc::new((
                self.upload_items(&s.items, 4)?,
                s.len(),
                s.chunk,
            ))))
        })?;
        *slot = Some((block, built.clone()));
        Ok(built)
    }

    /// A schedule's `items` on the graph's CUDA device; a zeroed item of `width` words when
    /// there are none (a launch needs a valid pointer, and reads no item).
    fn upload_items(
        &self,
        items: &[u32],
        width: usize,
    ) -> candle_core::Result<candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>> {
        let Device::Cuda(dev) = &self.inner.device else {
            candle_core::bail!(
                "graph lives on {:?}, not on a CUDA device",
                self.inner.device.location()
            );
        };
        if items.is_empty() {
            dev.alloc_zeros::<u32>(width)
        } else {
            dev.clone_htod(items)
        }
    }

    /// Device buffers `(indptr, indices)` of a CUDA graph, for interop with other libraries
    /// (e.g. building a cuSPARSE descriptor over the same structure).
    pub fn cuda_buffers(
        &self,
    ) -> candle_core::Result<(
        &candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
        &candle_core::cuda_backend::cudarc::driver::CudaSlice<u32>,
    )> {
        let c = self.cuda_csr()?;
        Ok((&c.indptr, &c.indices))
    }
}
