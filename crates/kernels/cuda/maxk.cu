// MaxK-GNN kernels: MaxK selection into CBSR, CBSR gather/scatter, the forward SpGEMM
// (Algorithm 1: CSR x CBSR -> dense, partial sums in a per-warp shared-memory row, written back
// coalesced) and the backward SSpMM (Algorithm 2: the dense gradient row prefetched to shared
// memory, sampled at the CBSR indices of each neighbour and accumulated atomically).
//
// Index types: uint8_t (D <= 256) or int16_t read as uint16 (D <= 1024).
// Value types T (the features, CBSR data and gradients): float, or __nv_bfloat16 / __half under
// --precision bf16/f16. Keys, partial sums and atomics are fp32 in every case; the SpGEMM and
// SSpMM write fp32 outputs that the host narrows to T once.

#include "common.cuh"


__device__ __forceinline__ int col_of(uint8_t v) { return v; }
__device__ __forceinline__ int col_of(int16_t v) { return (uint16_t)v; }

// Order-preserving map of an f32's bits to uint32 (IEEE total order, as the CPU's total_cmp).
__device__ __forceinline__ uint32_t fkey(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Inverse of fkey.
__device__ __forceinline__ float unkey(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// One warp per row; element e = j * 32 + lane lives in lane `lane`, slot j (j < 32, D <= 1024).
// The threshold T (the k-th largest key) is found by bisection over key values: with G(x) the
// warp-wide count of keys >= x, the interval [lo, up] keeps G(lo) >= k > G(up + 1). It starts
// at [a lower bound, max key]: for k <= 32 the smallest of the lanes' largest keys (every lane
// has a key at or above it, so G >= 32 >= k), else the smallest key. Each pass counts keys at
// the midpoint (V compares per lane and one warp reduction) and stops as soon as G(mid) == k,
// when the kept set is exactly the keys >= mid. Bisecting between the data's own bounds skips
// the sign and exponent bits that all the row's large keys share, where a most-significant-bit
// radix pass decides nothing: about 8 passes on Gaussian-like rows of 256 against 16. If the
// interval closes without an exact count, lo is the k-th largest key and the keys equal to it
// are ties: the lowest columns among them fill the remaining places.
// A final pass in column order writes the kept columns and, when `vals` is given, their
// values (the CBSR gather fused in).
// V = keys per lane (a power of two, 32 * V >= d), a template parameter so that the loops over
// a lane's keys are fully unrolled without dead iterations.
template <typename T, typename IDX, int V>
__device__ __forceinline__ void maxk_select_impl(const T* __restrict__ h, IDX* __restrict__ out,
                                                 T* __restrict__ vals, int n, int d, int k) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    const T* hr = h + (size_t)row * d;
    uint32_t key[V];
    uint32_t kmax = 0, kmin = 0xffffffffu;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = j * 32 + lane;
        // Padding slots get key 0, which no midpoint (always >= 1) counts.
        key[j] = e < d ? fkey(to_f32(__ldg(hr + e))) : 0u;
        kmax = max(kmax, key[j]);
        if (e < d) kmin = min(kmin, key[j]);
    }
    // Lanes without keys (d < 32) hold kmax = 0, which keeps the bound valid.
    uint32_t lo = k <= 32 ? __reduce_min_sync(FULL, kmax) : __reduce_min_sync(FULL, kmin);
    uint32_t up = __reduce_max_sync(FULL, kmax); // T <= up: G(up + 1) = 0 < k
    int g_hi = 0;                                 // G(up + 1)
    bool exact = false;
    while (lo < up) {
        const uint32_t mid = lo + ((up - lo) >> 1) + 1; // in (lo, up]
        uint32_t m = 0; // bit j: key j counts (a mask and one popc, no serial add chain)
#pragma unroll
        for (int j = 0; j < V; ++j) m |= (key[j] >= mid ? 1u : 0u) << j;
        const int c = __reduce_add_sync(FULL, __popc(m));
        if (c >= k) {
            lo = mid;
            if (c == k) {
                exact = true;
                break;
            }
        } else {
            up = mid - 1;
            g_hi = c;
        }
    }
    const uint32_t t = lo;
    const int need = k - g_hi; // ties at t to keep (unused when exact)
    const uint32_t lower = (1u << lane) - 1u;
    int taken = 0, ties = 0;
    IDX* o = out + (size_t)row * k;
    T* ov = vals ? vals + (size_t)row * k : nullptr;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = j * 32 + lane;
        const bool valid = e < d;
        bool take;
        if (exact) {
            take = valid && key[j] >= t;
        } else {
            const bool eq = valid && key[j] == t;
            const uint32_t eqm = __ballot_sync(FULL, eq);
            const int rank = ties + __popc(eqm & lower);
            ties += __popc(eqm);
            take = valid && (key[j] > t || (eq && rank < need));
        }
        const uint32_t tm = __ballot_sync(FULL, take);
        if (take) {
            const int pos = taken + __popc(tm & lower);
            o[pos] = (IDX)e;
            if (ov) ov[pos] = from_f32<T>(unkey(key[j])); // exact: the key came from a T
        }
        taken += __popc(tm);
    }
}

template <typename T, typename IDX>
__device__ __forceinline__ void gather_impl(const T* __restrict__ h, const IDX* __restrict__ idx,
                                            T* __restrict__ out, uint64_t total, int k, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[e] = h[(e / k) * d + col_of(idx[e])];
    }
}

template <typename T, typename IDX>
__device__ __forceinline__ void scatter_impl(const T* __restrict__ data, const IDX* __restrict__ idx,
                                             T* __restrict__ out, uint64_t total, int k, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[(e / k) * d + col_of(idx[e])] = data[e];
    }
}

// Edge groups: with k <= 32 a warp step covers `per = 32 / k` edges, lane -> (edge lane / k,
// slot lane % k); with k > 32 one edge per step and a slot loop. UNROLL steps issue their loads
// before the shared-memory atomics.
#define UNROLL 4

// Four consecutive CBSR indices of one lane, kept packed (one register for u8, two for i16) so
// that the unrolled edge loop holds fewer live registers.
template <typename IDX>
struct Idx4;
template <>
struct Idx4<uint8_t> {
    using W = uint32_t;
    __device__ static W load(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
    __device__ static int col(W w, int e) { return (w >> (8 * e)) & 0xffu; }
};
template <>
struct Idx4<int16_t> {
    using W = uint2;
    __device__ static W load(const int16_t* p) { return *reinterpret_cast<const uint2*>(p); }
    __device__ static int col(W w, int e) { return ((e < 2 ? w.x : w.y) >> (16 * (e & 1))) & 0xffffu; }
};

// The work item of warp `w` of this block, or false past the last of `n_items`.
__device__ __forceinline__ bool warp_item(const uint32_t* __restrict__ indptr, const uint2* __restrict__ items,
                                          int n_items, int chunk, int w, Item* item) {
    const int i = blockIdx.x * (blockDim.x >> 5) + w;
    if (i >= n_items) return false;
    *item = item_of(indptr, items, i, chunk);
    return true;
}

// Forward SpGEMM, one warp per work item (Algorithm 1 with its warp-level edge groups: rows
// longer than `chunk` edges are cut into groups of `chunk`, longest items first). Lanes own VEC
// consecutive CBSR slots of an edge (VEC = 4: one float4 data load and one 4-index load), so an
// edge takes L = min(32, k / VEC) lanes and a warp step covers `per` edges side by side, each
// sub-group accumulating into its own D-float shared row: one edge's slots are distinct
// columns, so no two lanes of a sub-group touch one address in a step. Steps are separated by
// __syncwarp, so plain read-modify-writes suffice (shared-memory float atomics would be a
// compare-and-swap loop). The sub-rows are summed at the coalesced write-back, which adds
// atomically into the zeroed output when the row is split (with a fused bias the output starts
// as the bias in every row, and unsplit rows add it at the write-back). Edge indices and values are
// streamed (evict-first) so that they do not push the CBSR rows out of L2.
template <typename T, typename IDX, int VEC>
__device__ __forceinline__ void spgemm_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                            const float* __restrict__ vals, const T* __restrict__ data,
                                            const IDX* __restrict__ idx, float* __restrict__ out,
                                            const float* __restrict__ bias, const uint2* __restrict__ items,
                                            int n_items, int chunk, int d, int k, int per, int weighted, int mean) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    Item item;
    if (!warp_item(indptr, items, n_items, chunk, w, &item)) return;
    float* buf = smem + (size_t)w * per * d;
    for (int c = lane; c < per * d; c += 32) buf[c] = 0.f;
    __syncwarp();
    const uint32_t start = item.start, end = item.end;
    const int groups = k / VEC;                  // VEC-slot groups per edge
    const int lanes = groups < 32 ? groups : 32; // lanes per edge
    const int sub = lane / lanes, g0 = lane % lanes;
    const bool active = sub < per;
    float* mine = buf + (active ? sub : 0) * d;
    const int iters = (groups + lanes - 1) / lanes; // warp-uniform (one unless groups > 32)
    for (uint32_t base = start; base < end; base += per * UNROLL) {
        for (int it = 0; it < iters; ++it) {
            const int gq = g0 + it * lanes;
            float val[UNROLL][VEC];
            typename Idx4<IDX>::W cw[UNROLL];
            int col[UNROLL];
            bool on[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const uint32_t p = base + u * per + sub;
                on[u] = active && p < end && gq < groups;
                if (on[u]) {
                    const uint32_t j = __ldcs(indices + p);
                    const float a = weighted ? __ldcs(vals + p) : 1.f;
                    const size_t q = (size_t)j * k + (size_t)gq * VEC;
                    load_vec<VEC>(data + q, val[u]); // float4, or 4 halves in 8 bytes
#pragma unroll
                    for (int e = 0; e < VEC; ++e) val[u][e] *= a;
                    if (VEC == 4) {
                        cw[u] = Idx4<IDX>::load(idx + q);
                    } else {
                        col[u] = col_of(idx[q]);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (on[u]) {
                    if (VEC == 4) {
#pragma unroll
                        for (int e = 0; e < VEC; ++e) mine[Idx4<IDX>::col(cw[u], e)] += val[u][e];
                    } else {
                        mine[col[u]] += val[u][0];
                    }
                }
                __syncwarp();
            }
        }
    }
    __syncwarp();
    const float scale = mean ? 1.f / (float)item.deg : 1.f;
    float* o = out + (size_t)item.row * d;
    for (int c = lane; c < d; c += 32) {
        float acc = 0.f;
        for (int q = 0; q < per; ++q) acc += buf[q * d + c];
        if (item.split) {
            atomicAdd(o + c, acc * scale); // onto the pre-filled output (zeros or the bias)
        } else {
            o[c] = bias ? acc * scale + o[c] : acc * scale; // onto the pre-filled bias (+ residual)
        }
    }
}

// The unrolled edge steps of one warp over edges [start, end): the lanes of group `sub` (of
// `per`, active if sub < per) take edge base + u * per + sub of each step of UNROLL; `edge(j, a)`
// runs for each with its column j and value a (1 unweighted).
template <typename F>
__device__ __forceinline__ void unrolled_edges(const uint32_t* __restrict__ indices, const float* __restrict__ vals,
                                               int weighted, uint32_t start, uint32_t end, int per, int sub,
                                               bool active, F edge) {
    for (uint32_t base = start; base < end; base += per * UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const uint32_t p = base + u * per + sub;
            if (active && p < end) {
                const uint32_t j = __ldcs(indices + p);
                const float a = weighted ? __ldcs(vals + p) : 1.f;
                edge(j, a);
            }
        }
    }
}

// Backward SSpMM, one warp per work item of forward row i (the same schedule as the SpGEMM):
// the gradient row dOut[i, :] (times 1/deg for means) is prefetched into shared memory, then for
// every edge (i, j) of the item the CBSR slots of j are sampled from it and added to dx[j, :]
// with global atomics. With k a multiple of 4 each lane owns 4 consecutive slots (one 128-bit
// index/atomic access: sm_90 float4 atomicAdd), k/4 lanes per edge and 32/(k/4) edges per step;
// otherwise one slot per lane.
template <typename T, typename IDX>
__device__ __forceinline__ void sspmm_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                           const float* __restrict__ vals, const T* __restrict__ dout,
                                           const IDX* __restrict__ idx, float* __restrict__ dx,
                                           const uint2* __restrict__ items, int n_items, int chunk, int d, int k,
                                           int vec, int weighted, int mean) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    Item item;
    if (!warp_item(indptr, items, n_items, chunk, w, &item)) return;
    const uint32_t start = item.start, end = item.end;
    float* buf = smem + (size_t)w * d;
    const float scale = mean ? 1.f / (float)item.deg : 1.f;
    const T* g = dout + (size_t)item.row * d;
    for (int c = lane; c < d; c += 32) buf[c] = to_f32(__ldg(g + c)) * scale;
    __syncwarp();
    if (vec && (k & 3) == 0) {
        const int groups = k >> 2;                       // 4-slot groups per edge
        const int lanes = groups < 32 ? groups : 32;     // lanes per edge
        const int per = 32 / lanes;                      // edges per step
        const int sub = lane / lanes, grp0 = lane % lanes;
        const bool active = sub < per;
        unrolled_edges(indices, vals, weighted, start, end, per, sub, active, [&](uint32_t j, float a) {
            for (int gq = grp0; gq < groups; gq += lanes) {
                const size_t q = (size_t)j * k + 4 * gq;
                const typename Idx4<IDX>::W cw = Idx4<IDX>::load(idx + q);
                const float4 v = make_float4(a * buf[Idx4<IDX>::col(cw, 0)], a * buf[Idx4<IDX>::col(cw, 1)],
                                             a * buf[Idx4<IDX>::col(cw, 2)], a * buf[Idx4<IDX>::col(cw, 3)]);
                atomicAdd(reinterpret_cast<float4*>(dx + q), v);
            }
        });
    } else if (k <= 32) {
        const int per = 32 / k;
        const int sub = lane / k, slot = lane % k;
        const bool active = sub < per;
        unrolled_edges(indices, vals, weighted, start, end, per, sub, active, [&](uint32_t j, float a) {
            const size_t q = (size_t)j * k + slot;
            atomicAdd(dx + q, a * buf[col_of(idx[q])]);
        });
    } else {
        for (uint32_t p = start; p < end; ++p) {
            const uint32_t j = __ldcs(indices + p);
            const float a = weighted ? __ldcs(vals + p) : 1.f;
            for (int s = lane; s < k; s += 32) {
                const size_t q = (size_t)j * k + s;
                atomicAdd(dx + q, a * buf[col_of(idx[q])]);
            }
        }
    }
}

// Kernel names: <op>_<idx>[_v<V>] for f32 values, <op>_<bf16|f16>_<idx>[_v<V>] for half values.
#define SELECT(T, PRE, IDX, SUF, V)                                                                             \
    extern "C" __global__ void maxk_select_##PRE##SUF##_v##V(const T* __restrict__ h, IDX* __restrict__ out,       \
                                                             T* __restrict__ vals, int n, int d, int k) {          \
        maxk_select_impl<T, IDX, V>(h, out, vals, n, d, k);                                                        \
    }

#define SPGEMM(T, PRE, IDX, SUF, VEC)                                                                           \
    extern "C" __global__ void spgemm_##PRE##SUF##_v##VEC(                                                          \
        const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices, const float* __restrict__ vals,  \
        const T* __restrict__ data, const IDX* __restrict__ idx, float* __restrict__ out,                           \
        const float* __restrict__ bias, const uint2* __restrict__ items, int n_items, int chunk, int d, int k,      \
        int per, int weighted, int mean) {                                                                          \
        spgemm_impl<T, IDX, VEC>(indptr, indices, vals, data, idx, out, bias, items, n_items, chunk, d, k, per,     \
                                 weighted, mean);                                                                   \
    }

// out[r, c] = bias[c]: the SpGEMM output's initial value when a bias is fused (rows without
// edges keep it, split rows add onto it atomically, unsplit rows add onto it at the write-back).
extern "C" __global__ void bias_fill(const float* __restrict__ bias, float* __restrict__ out, uint64_t total, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[e] = __ldg(bias + e % d);
    }
}

// out[r, c] = bias[c] + res[r, c]: the initial value when a residual (the layer's input, added to
// its output) is fused as well, so the separate add and its gradient accumulation go.
template <typename T>
__device__ __forceinline__ void bias_residual_fill_impl(const float* __restrict__ bias, const T* __restrict__ res,
                                                        float* __restrict__ out, uint64_t total, int d) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        out[e] = __ldg(bias + e % d) + to_f32(res[e]);
    }
}
#define BIAS_RESIDUAL_FILL(T, NAME)                                                                             \
    extern "C" __global__ void bias_residual_fill_##NAME(const float* __restrict__ bias, const T* __restrict__ res, \
                                                         float* __restrict__ out, uint64_t total, int d) {           \
        bias_residual_fill_impl<T>(bias, res, out, total, d);                                                      \
    }
BIAS_RESIDUAL_FILL(float, f32) BIAS_RESIDUAL_FILL(__nv_bfloat16, bf16) BIAS_RESIDUAL_FILL(__half, f16)

#define MAXK_KERNELS(T, PRE, IDX, SUF)                                                                              \
    SELECT(T, PRE, IDX, SUF, 1) SELECT(T, PRE, IDX, SUF, 2) SELECT(T, PRE, IDX, SUF, 4)                           \
    SELECT(T, PRE, IDX, SUF, 8) SELECT(T, PRE, IDX, SUF, 16) SELECT(T, PRE, IDX, SUF, 32)                         \
    extern "C" __global__ void cbsr_gather_##PRE##SUF(const T* __restrict__ h, const IDX* __restrict__ idx,         \
                                                      T* __restrict__ out, uint64_t total, int k, int d) {          \
        gather_impl<T, IDX>(h, idx, out, total, k, d);                                                             \
    }                                                                                                               \
    extern "C" __global__ void cbsr_scatter_##PRE##SUF(const T* __restrict__ data, const IDX* __restrict__ idx,     \
                                                       T* __restrict__ out, uint64_t total, int k, int d) {         \
        scatter_impl<T, IDX>(data, idx, out, total, k, d);                                                         \
    }                                                                                                               \
    SPGEMM(T, PRE, IDX, SUF, 1) SPGEMM(T, PRE, IDX, SUF, 4)                                                        \
    extern "C" __global__ void sspmm_##PRE##SUF(const uint32_t* __restrict__ indptr,                                \
                                                const uint32_t* __restrict__ indices, const float* __restrict__ vals, \
                                                const T* __restrict__ dout, const IDX* __restrict__ idx,            \
                                                float* __restrict__ dx, const uint2* __restrict__ items,            \
                                                int n_items, int chunk, int d, int k, int vec, int weighted,        \
                                                int mean) {                                                         \
        sspmm_impl<T, IDX>(indptr, indices, vals, dout, idx, dx, items, n_items, chunk, d, k, vec, weighted, mean); \
    }

MAXK_KERNELS(float, , uint8_t, u8)
MAXK_KERNELS(float, , int16_t, i16)
MAXK_KERNELS(__nv_bfloat16, bf16_, uint8_t, u8)
MAXK_KERNELS(__nv_bfloat16, bf16_, int16_t, i16)
MAXK_KERNELS(__half, f16_, uint8_t, u8)
MAXK_KERNELS(__half, f16_, int16_t, i16)
