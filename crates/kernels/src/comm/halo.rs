//! The halo exchange of a 1-D partitioned graph, differentiable: the forward appends the halo
//! rows received from their owners to this rank's rows; the backward returns the halo rows'
//! gradients to their owners, who add them to the rows they sent.

use super::Communicator;
use crate::device_graph::DeviceGraph;
use crate::error::{Error, Result};
use crate::ops::maxk::Cbsr;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Device, Layout, Shape, Tensor};
use gnn_graph::LocalGraph;
use std::sync::Arc;

/// One rank's exchange plan (from its [`LocalGraph`]) and communicator, with the send lists on
/// the device.
#[derive(Debug, Clone)]
pub struct HaloExchange(Arc<Plan>);

#[derive(Debug)]
struct Plan {
    comm: Arc<dyn Communicator>,
    n_local: usize,
    /// Local rows to send to each rank (`u32`, on the device); `None` where empty.
    send: Vec<Option<Tensor>>,
    /// The backward's scatter-add as a sparse matrix: row `r` (a local row) lists the
    /// positions of `r` in the concatenated send lists, so `dx = S · back` sums the gradients
    /// coming back for each sent row with the SpMM kernel (row-parallel, no atomics; candle's
    /// CUDA `index_add` walks the indices serially). `None` when nothing is sent.
    scatter: Option<DeviceGraph>,
    send_counts: Vec<usize>,
    recv_counts: Vec<usize>,
}

impl HaloExchange {
    /// The plan of `local` for the rank `comm` runs, its index lists uploaded to `device`.
    pub fn new(local: &LocalGraph, comm: Arc<dyn Communicator>, device: &Device) -> Result<Self> {
        if comm.rank() != local.rank || comm.world() != local.send.len() {
            return Err(Error::Shape {
                op: "halo",
                what: format!(
                    "local graph of rank {} of {} used by rank {} of {}",
                    local.rank,
                    local.send.len(),
                    comm.rank(),
                    comm.world()
                ),
            });
        }
        let upload = |v: &[u32]| -> Result<Option<Tensor>> {
            Ok((!v.is_empty())
                .then(|| Tensor::from_slice(v, v.len(), device))
                .transpose()?)
        };
        let send = local
            .send
            .iter()
            .map(|s| upload(s))
            .collect::<Result<Vec<_>>>()?;
        let all: Vec<u32> = local.send.iter().flatten().copied().collect();
        let scatter = if all.is_empty() {
            None
        } else {
            let n = local.n_local();
            let mut indptr = vec![0u32; n + 1];
            for &r in &all {
                indptr[r as usize + 1] += 1;
            }
            for i in 0..n {
                indptr[i + 1] += indptr[i];
            }
            let mut fill = indptr.clone();
            let mut cols = vec![0u32; all.len()];
            for (q, &r) in all.iter().enumerate() {
                cols[fill[r as usize] as usize] = q as u32;
                fill[r as usize] += 1;
            }
            let csr = gnn_graph::Csr::new_checked(n, all.len(), indptr, cols)?;
            Some(DeviceGraph::upload(&csr, device)?)
        };
        Ok(Self(Arc::new(Plan {
            comm,
            n_local: local.n_local(),
            scatter,
            send_counts: local.send.iter().map(Vec::len).collect(),
            recv_counts: local.recv_counts.clone(),
            send,
        })))
    }

    /// The communicator.
    pub fn comm(&self) -> &Arc<dyn Communicator> {
        &self.0.comm
    }

    /// Rows received per exchange.
    pub fn halo_rows(&self) -> usize {
        self.0.recv_counts.iter().sum()
    }

    /// `[n_local, d]` -> `[n_local + halo, d]`: this rank's rows, then the halo rows in the
    /// local graph's column order. Differentiable in `x` (the backward is collective too).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let halo = self.0.gather_exchange(x)?;
        // Attaches the backward (halo gradients home) when x carries one; a copy otherwise.
        let halo = x.apply_op2(&halo, HaloGrad(self.0.clone()))?;
        Ok(Tensor::cat(&[x, &halo], 0)?)
    }

    /// [`Self::forward`] for MaxK features: the halo rows' kept values (differentiable) and
    /// their columns.
    pub fn forward_cbsr(&self, c: &Cbsr) -> Result<Cbsr> {
        let data = self.forward(c.data())?;
        let index = Tensor::cat(&[c.index(), &self.0.gather_exchange(c.index())?], 0)?;
        Ok(Cbsr::from_rows_unchecked(data, index, c.dim()))
    }
}

impl Plan {
    /// The halo rows `[halo, d]` received for `x`'s rows (no gradient).
    fn gather_exchange(&self, x: &Tensor) -> Result<Tensor> {
        let (n, d) = x.dims2()?;
        if n != self.n_local {
            return Err(Error::Shape {
                op: "halo",
                what: format!("x has {n} rows, this rank owns {}", self.n_local),
            });
        }
        let x = x.detach().contiguous()?;
        let empty = Tensor::zeros((0, d), x.dtype(), x.device())?;
        let sends = self
            .send
            .iter()
            .map(|s| match s {
                Some(idx) => Ok(x.index_select(idx, 0)?),
                None => Ok(empty.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let got = self.comm.exchange(&sends, &self.recv_counts)?;
        Ok(Tensor::cat(&got, 0)?)
    }
}

/// `(x, halo) -> halo` whose backward sends `d halo` to the owners and adds what comes back
/// onto `x`'s sent rows.
struct HaloGrad(Arc<Plan>);

fn copy<S: BackendStorage>(s: &S, l: &Layout) -> candle_core::Result<(S, Shape)> {
    if !l.is_contiguous() || l.start_offset() != 0 {
        candle_core::bail!("halo: the received rows must be a fresh contiguous tensor");
    }
    Ok((s.try_clone(l)?, l.shape().clone()))
}

impl CustomOp2 for HaloGrad {
    fn name(&self) -> &'static str {
        "halo_exchange"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        s: &CpuStorage,
        l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        copy(s, l)
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        copy(s, l)
    }
    fn bwd(
        &self,
        x: &Tensor,
        _halo: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let p = &self.0;
        let d = dy.dim(1)?;
        let dy = dy.contiguous()?;
        // Split d halo by owner (the halo groups are contiguous, in rank order).
        let mut at = 0;
        let sends = p
            .recv_counts
            .iter()
            .map(|&c| {
                let t = dy.narrow(0, at, c)?;
                at += c;
                Ok(t)
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        let back = p.comm.exchange(&sends, &p.send_counts)?;
        let dx = match &p.scatter {
            Some(s) => crate::spmm(s, &Tensor::cat(&back, 0)?, crate::Reduce::Sum)?,
            None => Tensor::zeros((p.n_local, d), dy.dtype(), dy.device())?,
        };
        Ok((x.track_op().then_some(dx), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::LocalComm;
    use crate::{spmm, spmm_weighted, DeviceGraph, Reduce};
    use candle_core::{DType, Var};
    use gnn_graph::{BuildOptions, Coo, Csr, RowPartition, SelfLoops};

    fn graph(n: usize, m: usize, seed: u64) -> Csr {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as u32
        };
        // A hub (row 0 reaches a third of the nodes) plus random edges, and isolated nodes
        // (no edges beyond the self loop) at the end.
        let mut src: Vec<u32> = (1..n as u32 / 3).collect();
        let mut dst = vec![0u32; src.len()];
        for _ in 0..m {
            let (a, b) = (next(), next());
            if (a as usize) < n - 5 && (b as usize) < n - 5 {
                src.push(a);
                dst.push(b);
            }
        }
        Coo::new(n, src, dst)
            .unwrap()
            .to_csr(BuildOptions {
                symmetrize: true,
                dedup: true,
                self_loops: SelfLoops::Add,
            })
            .unwrap()
    }

    /// Runs `f(rank, local graph, exchange)` on `parts` threads and returns the results.
    fn on_ranks<R: Send>(
        g: &Csr,
        parts: usize,
        f: impl Fn(&LocalGraph, &HaloExchange) -> R + Sync,
    ) -> Vec<R> {
        let part = RowPartition::balanced_by_nnz(g, parts).unwrap();
        std::thread::scope(|s| {
            let hs: Vec<_> = LocalComm::group(parts)
                .into_iter()
                .map(|c| {
                    let (part, f) = (&part, &f);
                    s.spawn(move || {
                        let local = LocalGraph::build(g, part, c.rank()).unwrap();
                        let comm: Arc<dyn Communicator> = Arc::new(c);
                        let h = HaloExchange::new(&local, comm, &Device::Cpu).unwrap();
                        f(&local, &h)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    }

    #[test]
    fn partitioned_spmm_and_its_gradient_match_the_whole_graph() {
        let (n, d) = (120, 37);
        let g = graph(n, 500, 3);
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let w = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let vals = Tensor::randn(0f32, 1.0, g.nnz(), &dev).unwrap();
        let whole = DeviceGraph::upload(&g, &dev).unwrap();
        for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Max] {
            for weighted in [false, true] {
                let xv = Var::from_tensor(&x).unwrap();
                let y = if weighted {
                    spmm_weighted(&whole, &xv, &vals, reduce).unwrap()
                } else {
                    spmm(&whole, &xv, reduce).unwrap()
                };
                let dx = (&y * &w).unwrap().sum_all().unwrap().backward().unwrap();
                let dx = dx.get(&xv).unwrap().clone();
                for parts in 1..=4 {
                    let got = on_ranks(&g, parts, |local, h| {
                        let r = local.rows.clone();
                        let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
                        let lg = DeviceGraph::upload(&local.csr, &dev).unwrap();
                        let full = h.forward(&xl).unwrap();
                        let y = if weighted {
                            let v = vals
                                .narrow(0, local.edges.start, local.edges.len())
                                .unwrap();
                            spmm_weighted(&lg, &full, &v, reduce).unwrap()
                        } else {
                            spmm(&lg, &full, reduce).unwrap()
                        };
                        let wl = w.narrow(0, r.start, r.len()).unwrap();
                        let grads = (&y * &wl).unwrap().sum_all().unwrap().backward().unwrap();
                        let dx = grads.get(&xl).unwrap().clone();
                        (r, y, dx)
                    });
                    for (r, y_l, dx_l) in got {
                        let what = format!("{reduce:?} weighted={weighted} P={parts} rows {r:?}");
                        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                        close(
                            &flat(&y_l),
                            &flat(&y.narrow(0, r.start, r.len()).unwrap()),
                            &what,
                        );
                        close(
                            &flat(&dx_l),
                            &flat(&dx.narrow(0, r.start, r.len()).unwrap()),
                            &what,
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn cbsr_rows_travel_with_their_columns() {
        let (n, d, k) = (90, 40, 7);
        let g = graph(n, 300, 5);
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (n, d), &dev).unwrap();
        let whole = DeviceGraph::upload(&g, &dev).unwrap();
        let xv = Var::from_tensor(&x).unwrap();
        let y = crate::spgemm(&whole, &crate::maxk(&xv, k).unwrap(), None, Reduce::Sum).unwrap();
        let dx = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let dx = dx.get(&xv).unwrap().clone();
        let got = on_ranks(&g, 3, |local, h| {
            let r = local.rows.clone();
            let xl = Var::from_tensor(&x.narrow(0, r.start, r.len()).unwrap()).unwrap();
            let lg = DeviceGraph::upload(&local.csr, &dev).unwrap();
            let c = h.forward_cbsr(&crate::maxk(&xl, k).unwrap()).unwrap();
            assert_eq!(c.rows(), local.csr.n_cols());
            assert_eq!(c.index().dtype(), DType::U8);
            let y = crate::spgemm(&lg, &c, None, Reduce::Sum).unwrap();
            let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
            (r, y, grads.get(&xl).unwrap().clone())
        });
        for (r, y_l, dx_l) in got {
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            close(
                &flat(&y_l),
                &flat(&y.narrow(0, r.start, r.len()).unwrap()),
                "spgemm",
            );
            close(
                &flat(&dx_l),
                &flat(&dx.narrow(0, r.start, r.len()).unwrap()),
                "dx",
            );
        }
    }
}
