// GAT's whole aggregation on the graph itself (no head-expanded copy), FlashAttention-style:
//   z = s_dst[i,h] + s_src[j,h],  e = LeakyReLU(z),  lse[i,h] = log sum_j exp(e),
//   alpha = exp(e - lse) * mask / (1 - p),   out[i, h*F + f] = sum_j alpha * xs[j, h*F + f].
// Only lse (one float per row and head) is kept; alpha is recomputed where it is needed.
// Backward (D[i,h] = sum_f dout[i,hF+f] out[i,hF+f], the softmax's row term, which the rows
// pass computes from the stored output and writes for the columns pass):
//   dalpha = mask / (1 - p) * <dout[i,h], xs[j,h]>,  ds = alpha (dalpha - D) LeakyReLU'(z)
//   ds_dst[i,h] = sum_j ds (rows pass),  ds_src[j,h] = sum_i ds and
//   dxs[j] = sum_i alpha * mask / (1 - p) * dout[i] (columns pass, over the transpose).
// The dropout mask of edge p, head h is the dropout hash (dropout_hash.cuh) of element p * H + h
// (edge-major), as the dropout op's mask of an [nnz, H] tensor.
// out and dxs are written in the features' storage type T (fp32 sums rounded once); lse, D and
// the score gradients in fp32.
//
// Launch order: warp w takes row order[w], the graph's non-empty rows longest first
// (schedule::rows_longest_first), so that the longest rows start first. In row order they can
// fall late and run on alone: ncu measured SM active cycles at 67-80 % of elapsed on the
// gat-sparse files in row order (sessions 20 and 21). This order took GAT 2x64's epoch there from 11.07 to 8.40 ms
// (bf16) and 16.84 to 11.71 ms (f32) on an H200. Each row's own edge order is unchanged, so
// results are bit-identical. Empty rows get no warp: every output and gradient buffer starts
// zeroed.
// Layout: one warp per row, split into 32 / G groups of G lanes; each group takes one edge at a
// time (the warp E = 32 / G edges at once), each lane V adjacent columns of the neighbour's row
// (16 bytes where the rows are aligned: VEC), all in one head (the host checks F % V == 0 with
// several heads), so a head's L = F / V lanes are adjacent in a group and reduce a per-head dot
// product with log2(L) shuffles (none where a lane holds a whole head). Edges go in batches of
// 32: lane e computes edge e's coefficients for every head (H <= 8) into the warp's shared
// memory, then the groups walk the batch; at the row's end the groups' partial sums meet.

#include "common.cuh"
#include "dropout_hash.cuh"

#define GAT_WARPS 2
#define MAX_HEADS 8
#define CS 33  // a head's coefficient row in the stage: 32 edges + 1 (no bank conflicts)
#define GAT_RESCALE 8.f  // the forward's lazy rescale: weights below e^8 against the reference

struct GatArgs {
    int H, F, HF, L;   // heads, head width, columns, lanes per head in a group (G with one head)
    int lg;            // log2 G, lanes per edge group
    int vh;            // per-head rows load as float4 (H % 4 == 0, 16-byte aligned score buffers)
    float slope;       // LeakyReLU's negative slope
    int drop;          // whether a dropout mask applies
    uint64_t seed, threshold;
    float scale;       // 1 / (1 - p)
};

__device__ __forceinline__ float leaky_f(float z, float slope) { return z > 0.f ? z : z * slope; }

#define GOLDEN 0x9E3779B97F4A7C15ULL

// The hash argument of edge p's head 0: keep(seed, p H + h) hashes seed + (p H + h) golden,
// this plus h golden (a constant where h is an unrolled index).
__device__ __forceinline__ uint64_t drop_base(const GatArgs& a, uint64_t p) {
    return a.seed + p * (uint64_t)a.H * GOLDEN;
}

__device__ __forceinline__ float drop_factor(const GatArgs& a, uint64_t base, int h) {
    return a.drop ? ((mix64(base + (uint64_t)h * GOLDEN) >> 40) >= a.threshold ? a.scale : 0.f) : 1.f;
}

// Sum over the L adjacent lanes of a head (every lane of the head gets it).
__device__ __forceinline__ float head_sum(float v, int L) {
    for (int o = L >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// Sum over the warp's edge groups (lanes l, l + G, l + 2G, ...; every lane gets its column's).
__device__ __forceinline__ float groups_sum(float v, int lg) {
    for (int o = 1 << lg; o < 32; o <<= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// A lane's place: its edge group (slot), its first column, its columns' head.
struct Lane {
    int lane, slot, c0, hl;
    bool writes_head;  // the lane that writes its head's per-row value (slot 0, first of the head)
};

template <int V>
__device__ __forceinline__ Lane lane_of(const GatArgs& a) {
    Lane l;
    l.lane = threadIdx.x & 31;
    l.slot = l.lane >> a.lg;
    const int sub = l.lane & ((1 << a.lg) - 1);
    l.c0 = sub * V;
    l.hl = a.H == 1 ? 0 : min(l.c0 / a.F, a.H - 1);
    l.writes_head = l.slot == 0 && (sub & (a.L - 1)) == 0 && l.c0 < a.HF;
    return l;
}

// Rows aligned for vector loads: the edge walks load GAT_UNROLL neighbour rows before they use
// any (each lane's loads are independent, so the warp has GAT_UNROLL in flight). A walk with
// the load inside a branch per edge kept one load in flight per warp and stalled on each (ncu,
// session 20: the loads' waits were half the forward's stall samples; with the walks below the
// hidden layer's forward, backward rows and columns passes went from 1.88 / 1.72 / 2.63 ms to
// 1.50 / 1.33 / 1.70 on the gat-sparse files, records/gat-sparse/h200-2026-11-28/walks-h200).
// Element loads keep the one-edge walk: V registers per row held over the unroll cost more
// occupancy than the loads in flight gained (the 41-column output layer's forward went from
// 1.36 to 1.73 ms).
#define GAT_UNROLL 4

// A lane's V columns of one row as loaded, before conversion.
template <typename T, int V>
union RawCols {
    uint4 q[V * sizeof(T) >= 16 ? V * sizeof(T) / 16 : 1];
    uint2 d;
    unsigned int w;
    unsigned short s;
    T t[V];
};

// Loads columns c0 .. c0 + V - 1 of a row aligned for vectors, without a branch: `c0` must be
// a column of the row (callers clamp idle lanes to 0).
template <typename T, int V>
__device__ __forceinline__ void fetch_cols(const T* __restrict__ row, int c0, RawCols<T, V>& b) {
    constexpr int BYTES = V * (int)sizeof(T);
    if (BYTES >= 16) {
#pragma unroll
        for (int k = 0; k < BYTES / 16; ++k) b.q[k] = __ldg(reinterpret_cast<const uint4*>(row + c0) + k);
    } else if (BYTES == 8) {
        b.d = __ldg(reinterpret_cast<const uint2*>(row + c0));
    } else if (BYTES == 4) {
        b.w = __ldg(reinterpret_cast<const unsigned int*>(row + c0));
    } else {
        b.s = __ldg(reinterpret_cast<const unsigned short*>(row + c0));
    }
}

// The loaded columns as fp32, zero on an idle lane (!live).
template <typename T, int V>
__device__ __forceinline__ void cols_f32(const RawCols<T, V>& b, bool live, float (&r)[V]) {
#pragma unroll
    for (int v = 0; v < V; ++v) r[v] = live ? to_f32(b.t[v]) : 0.f;
}

// The aligned edge walk over a batch of `cnt` edges (neighbour ids in `ids`): the lane's group
// takes edges e0 + u E + slot; GAT_UNROLL rows of `rows` load before any is used, then
// `edge(e, x)` runs for each in turn on every lane (the heads' shuffles need the whole warp),
// x the lane's columns as fp32 (zeros where !live). `edge` skips e >= cnt, a slot past the
// batch (which loaded the batch's first row).
template <typename T, int V, typename F>
__device__ __forceinline__ void aligned_walk(const T* __restrict__ rows, const uint32_t* ids, int HF, int cnt,
                                             int E, int slot, int c0, bool live, F edge) {
    for (int e0 = 0; e0 < cnt; e0 += GAT_UNROLL * E) {
        RawCols<T, V> b[GAT_UNROLL];
#pragma unroll
        for (int u = 0; u < GAT_UNROLL; ++u) {
            const int e = e0 + u * E + slot;
            fetch_cols<T, V>(rows + (size_t)ids[e < cnt ? e : 0] * HF, c0, b[u]);
        }
#pragma unroll
        for (int u = 0; u < GAT_UNROLL; ++u) {
            float x[V];
            cols_f32<T, V>(b[u], live, x);
            edge(e0 + u * E + slot, x);
        }
    }
}

// Columns c0 .. c0 + V - 1 of a row as fp32 (0 past HF). VEC: one aligned vector load (the
// host checked HF % V == 0 and the buffers' alignment), else V element loads.
template <typename T, int V, bool VEC>
__device__ __forceinline__ void load_cols(const T* __restrict__ row, int c0, int HF, float (&r)[V]) {
    if (VEC) {
        RawCols<T, V> b;
        if (c0 < HF) {
            fetch_cols<T, V>(row, c0, b);
            cols_f32<T, V>(b, true, r);
        } else {
#pragma unroll
            for (int v = 0; v < V; ++v) r[v] = 0.f;
        }
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) r[v] = (c0 + v < HF) ? to_f32(__ldg(row + c0 + v)) : 0.f;
    }
}

// Loads row `id`'s columns c0 .. c0 + V - 1 of `rows` into r (zeros where !ok) and returns
// their dot product with w over the lane's head (every lane of the head gets it). The whole
// warp calls it together: the head's shuffles need every lane.
template <typename T, int V, bool VEC>
__device__ __forceinline__ float head_dot(const T* __restrict__ rows, uint32_t id, bool ok, const Lane& ln,
                                          const GatArgs& a, const float (&w)[V], float (&r)[V]) {
    load_cols<T, V, VEC>(rows + (size_t)id * a.HF, ln.c0, ok ? a.HF : 0, r);
    float d = 0.f;
#pragma unroll
    for (int v = 0; v < V; ++v) d = fmaf(w[v], r[v], d);
    return head_sum(d, a.L);
}

// Per-row values of every head (h < H) into registers; `vec`: as float4 loads (H % 4 == 0 and
// the buffer 16-byte aligned, which the host checks).
__device__ __forceinline__ void heads_of(const float* __restrict__ p, size_t row, int H, bool vec,
                                         float (&r)[MAX_HEADS]) {
    if (vec) {
#pragma unroll
        for (int k = 0; k < MAX_HEADS / 4; ++k) {
            const float4 v = 4 * k < H ? __ldg(reinterpret_cast<const float4*>(p + row * H) + k)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
            r[4 * k] = v.x, r[4 * k + 1] = v.y, r[4 * k + 2] = v.z, r[4 * k + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int h = 0; h < MAX_HEADS; ++h) r[h] = h < H ? __ldg(p + row * H + h) : 0.f;
    }
}

// The warp's shared memory: a batch's 32 neighbour ids, up to three coefficients per
// (head, edge), a head's 32 edges at stride CS, and up to three per-head constants of the
// warp's row (hv: read by broadcast where needed instead of held in registers across the
// edge loop, which kept the passes at 64-95 registers with spills).
struct Stage {
    uint32_t* id;
    float* c0;
    float* c1;
    float* c2;
    float* hv;
};

__device__ __forceinline__ Stage stage_of() {
    __shared__ uint32_t ids[GAT_WARPS][32];
    __shared__ float coef[GAT_WARPS][3][MAX_HEADS * CS];
    __shared__ float heads[GAT_WARPS][3 * MAX_HEADS];
    const int w = threadIdx.x >> 5;
    return Stage{ids[w], coef[w][0], coef[w][1], coef[w][2], heads[w]};
}

// Lanes h < H copy the row's value of head h from `p` (`[rows, H]`) into `dst[h]`.
__device__ __forceinline__ void stage_heads(const float* __restrict__ p, size_t row, int H, int lane,
                                            float* dst) {
    if (lane < H) dst[lane] = p[row * H + lane];
}

// Forward: out (f32, n_rows x HF) and lse (n_rows x H; 0 for an empty row, which no edge
// reads), in one pass as online softmax: the aggregation weights are exp(e - m) against a
// per-head reference m, raised (and the running sums rescaled) only when a batch's score
// passes it by more than GAT_RESCALE, and the row's output is divided by the sum of its
// exponentials at the end (the dropout factors weigh the aggregation, not the sum).
template <typename T, int V, bool VEC>
__device__ void gat_fwd_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                             const T* __restrict__ xs, const float* __restrict__ s_dst,
                             const float* __restrict__ s_src, T* __restrict__ out, float* __restrict__ lse,
                             const uint32_t* __restrict__ order, int n_items, GatArgs a) {
    const int w = blockIdx.x * GAT_WARPS + (threadIdx.x >> 5);
    if (w >= n_items) return;
    const int row = (int)__ldg(order + w);
    const Lane ln = lane_of<V>(a);
    const Stage st = stage_of();
    const uint32_t start = indptr[row], end = indptr[row + 1];
    const int E = 32 >> a.lg;
    float m[MAX_HEADS], l[MAX_HEADS];
    float* const sd = st.hv;  // the row's s_dst per head, in the stage
    stage_heads(s_dst, row, a.H, ln.lane, sd);
    __syncwarp();
#pragma unroll
    for (int h = 0; h < MAX_HEADS; ++h) m[h] = -INFINITY, l[h] = 0.f;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    const int c0 = ln.c0 < a.HF ? ln.c0 : 0;  // an idle lane loads column 0 and writes nothing
    // Each batch's neighbour ids are loaded one batch ahead.
    uint32_t next = start + ln.lane < end ? __ldg(indices + start + ln.lane) : 0;
    for (uint32_t base = start; base < end; base += 32) {
        const int cnt = min(32u, end - base);
        const uint32_t j = next;
        if (base + 32 + ln.lane < end) next = __ldg(indices + base + 32 + ln.lane);
        float ev[MAX_HEADS];
        if (ln.lane < cnt) {
            st.id[ln.lane] = j;
            float s[MAX_HEADS];
            heads_of(s_src, j, a.H, a.vh, s);
#pragma unroll
            for (int h = 0; h < MAX_HEADS; ++h) ev[h] = leaky_f(sd[h] + s[h], a.slope);
        } else {
#pragma unroll
            for (int h = 0; h < MAX_HEADS; ++h) ev[h] = -INFINITY;
        }
        // The reference maximum m moves only when some score passes it by more than
        // GAT_RESCALE (always on the first batch, m = -inf): weights stay below e^GAT_RESCALE
        // and most batches of a long row skip the per-head warp maxima and the rescale.
        bool grow = false;
#pragma unroll
        for (int h = 0; h < MAX_HEADS; ++h) grow |= h < a.H && ev[h] > m[h] + GAT_RESCALE;
        if (__any_sync(FULL, grow)) {
            float rescale = 1.f;  // this lane's columns' head's
#pragma unroll
            for (int h = 0; h < MAX_HEADS; ++h) {
                if (h < a.H) {
                    const float mn = fmaxf(m[h], warp_max(ev[h]));  // finite: the batch has an edge
                    const float sc = expf(m[h] - mn);               // 0 on the first batch
                    l[h] *= sc;
                    m[h] = mn;
                    if (h == ln.hl) rescale = sc;
                }
            }
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] *= rescale;
        }
        const uint64_t db = drop_base(a, base + ln.lane);
#pragma unroll
        for (int h = 0; h < MAX_HEADS; ++h) {
            if (h < a.H && ln.lane < cnt) {
                const float w = expf(ev[h] - m[h]);
                l[h] += w;
                st.c0[h * CS + ln.lane] = w * drop_factor(a, db, h);
            }
        }
        __syncwarp();
        if constexpr (VEC) {
            aligned_walk<T, V>(xs, st.id, a.HF, cnt, E, ln.slot, c0, true, [&](int e, const float(&x)[V]) {
                if (e < cnt) {
                    const float w = st.c0[ln.hl * CS + e];
#pragma unroll
                    for (int v = 0; v < V; ++v) acc[v] = fmaf(w, x[v], acc[v]);
                }
            });
        } else {
#pragma unroll 4
            for (int e = ln.slot; e < cnt; e += E) {
                const float w = st.c0[ln.hl * CS + e];
                float x[V];
                load_cols<T, V, VEC>(xs + (size_t)st.id[e] * a.HF, ln.c0, a.HF, x);
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] = fmaf(w, x[v], acc[v]);
            }
        }
        __syncwarp();
    }
    float total = 0.f;  // this lane's columns' head's sum of exponentials
#pragma unroll
    for (int h = 0; h < MAX_HEADS; ++h) {
        if (h < a.H) {
            const float lh = warp_sum(l[h]);
            if (h == ln.hl) total = lh;
            if (ln.lane == h) lse[(size_t)row * a.H + h] = end > start ? m[h] + logf(lh) : 0.f;
        }
    }
    const float inv = total > 0.f ? 1.f / total : 0.f;
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = groups_sum(acc[v], a.lg) * inv;
    if (ln.slot == 0) {
#pragma unroll
        for (int v = 0; v < V; ++v)
            if (ln.c0 + v < a.HF) out[(size_t)row * a.HF + ln.c0 + v] = from_f32<T>(acc[v]);
    }
}

// Backward, rows pass: D[i,h] = <dout[i,h], out[i,h]> (written to dterm for the columns
// pass) and ds_dst[i,h] = sum_j ds.
template <typename T, int V, bool VEC>
__device__ void gat_bwd_rows_impl(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                  const T* __restrict__ xs, const float* __restrict__ s_dst,
                                  const float* __restrict__ s_src, const float* __restrict__ lse,
                                  const T* __restrict__ outp, float* __restrict__ dterm,
                                  const T* __restrict__ dout, float* __restrict__ ds_dst,
                                  const uint32_t* __restrict__ order, int n_items, GatArgs a) {
    const int w = blockIdx.x * GAT_WARPS + (threadIdx.x >> 5);
    if (w >= n_items) return;
    const int row = (int)__ldg(order + w);
    const Lane ln = lane_of<V>(a);
    const Stage st = stage_of();
    const uint32_t start = indptr[row], end = indptr[row + 1];
    const int E = 32 >> a.lg;
    // The row's per-head constants in the stage: D, s_dst, lse.
    float* const dd = st.hv;
    float* const sd = st.hv + MAX_HEADS;
    float* const ls = st.hv + 2 * MAX_HEADS;
    stage_heads(s_dst, row, a.H, ln.lane, sd);
    stage_heads(lse, row, a.H, ln.lane, ls);
    float g[V];
    load_cols<T, V, VEC>(dout + (size_t)row * a.HF, ln.c0, a.HF, g);
    {
        // D of the lane's head from the row's dout and out (every group holds the whole row).
        float o[V];
        const float d = head_dot<T, V, VEC>(outp, row, true, ln, a, g, o);
        if (ln.writes_head) {
            dd[ln.hl] = d;
            dterm[(size_t)row * a.H + ln.hl] = d;
        }
    }
    __syncwarp();
    float acc = 0.f;
    const bool live = ln.c0 < a.HF;
    const int c0 = live ? ln.c0 : 0;  // an idle lane loads column 0 and adds zeros
    uint32_t next = start + ln.lane < end ? __ldg(indices + start + ln.lane) : 0;
    for (uint32_t base = start; base < end; base += 32) {
        const int cnt = min(32u, end - base);
        const uint32_t j = next;
        if (base + 32 + ln.lane < end) next = __ldg(indices + base + 32 + ln.lane);
        if (ln.lane < cnt) {
            st.id[ln.lane] = j;
            float s[MAX_HEADS];
            heads_of(s_src, j, a.H, a.vh, s);
            const uint64_t db = drop_base(a, base + ln.lane);
#pragma unroll
            for (int h = 0; h < MAX_HEADS; ++h) {
                if (h < a.H) {
                    const float z = sd[h] + s[h];
                    const float pz = expf(leaky_f(z, a.slope) - ls[h]) * (z > 0.f ? 1.f : a.slope);
                    st.c0[h * CS + ln.lane] = pz * drop_factor(a, db, h);  // ds = c0 dot - c1
                    st.c1[h * CS + ln.lane] = pz * dd[h];
                }
            }
        }
        __syncwarp();
        // Every lane steps together (the head's shuffles need the whole warp); a group past the
        // batch's end loads nothing and adds nothing.
        if constexpr (VEC) {
            aligned_walk<T, V>(xs, st.id, a.HF, cnt, E, ln.slot, c0, live, [&](int e, const float(&x)[V]) {
                float d = 0.f;
#pragma unroll
                for (int v = 0; v < V; ++v) d = fmaf(g[v], x[v], d);
                d = head_sum(d, a.L);
                if (e < cnt) acc += st.c0[ln.hl * CS + e] * d - st.c1[ln.hl * CS + e];
            });
        } else {
#pragma unroll 4
            for (int e0 = 0; e0 < cnt; e0 += E) {
                const int e = e0 + ln.slot;
                const bool ok = e < cnt;
                float x[V];
                const float d = head_dot<T, V, VEC>(xs, st.id[e], ok, ln, a, g, x);
                if (ok) acc += st.c0[ln.hl * CS + e] * d - st.c1[ln.hl * CS + e];
            }
        }
        __syncwarp();
    }
    acc = groups_sum(acc, a.lg);
    if (ln.writes_head) ds_dst[(size_t)row * a.H + ln.hl] = acc;
}

// Backward, columns pass over the transpose (t_indptr/t_rows, t_pos the edge's position in
// the graph): dxs[j] and ds_src[j,h] for every column j.
template <typename T, int V, bool VEC>
__device__ void gat_bwd_cols_impl(const uint32_t* __restrict__ t_indptr, const uint32_t* __restrict__ t_rows,
                                  const uint32_t* __restrict__ t_pos, const T* __restrict__ xs,
                                  const float* __restrict__ s_dst, const float* __restrict__ s_src,
                                  const float* __restrict__ lse, const float* __restrict__ dterm,
                                  const T* __restrict__ dout, T* __restrict__ dxs, float* __restrict__ ds_src,
                                  const uint32_t* __restrict__ order, int n_items, GatArgs a) {
    const int w = blockIdx.x * GAT_WARPS + (threadIdx.x >> 5);
    if (w >= n_items) return;
    const int col = (int)__ldg(order + w);
    const Lane ln = lane_of<V>(a);
    const Stage st = stage_of();
    const uint32_t start = t_indptr[col], end = t_indptr[col + 1];
    const int E = 32 >> a.lg;
    float* const ss = st.hv;  // the column's s_src per head, in the stage
    stage_heads(s_src, col, a.H, ln.lane, ss);
    __syncwarp();
    float x[V], dx[V];
    load_cols<T, V, VEC>(xs + (size_t)col * a.HF, ln.c0, a.HF, x);
#pragma unroll
    for (int v = 0; v < V; ++v) dx[v] = 0.f;
    float acc = 0.f;
    const bool live = ln.c0 < a.HF;
    const int c0 = live ? ln.c0 : 0;  // an idle lane loads column 0 and adds zeros
    const bool first = start + ln.lane < end;
    uint32_t next_i = first ? __ldg(t_rows + start + ln.lane) : 0;
    uint32_t next_p = first ? __ldg(t_pos + start + ln.lane) : 0;
    for (uint32_t base = start; base < end; base += 32) {
        const int cnt = min(32u, end - base);
        const uint32_t i = next_i, p = next_p;
        if (base + 32 + ln.lane < end) {
            next_i = __ldg(t_rows + base + 32 + ln.lane);
            next_p = __ldg(t_pos + base + 32 + ln.lane);
        }
        if (ln.lane < cnt) {
            st.id[ln.lane] = i;
            const uint64_t db = drop_base(a, p);
            float sd[MAX_HEADS], ls[MAX_HEADS], dd[MAX_HEADS];
            heads_of(s_dst, i, a.H, a.vh, sd);
            heads_of(lse, i, a.H, a.vh, ls);
            heads_of(dterm, i, a.H, a.vh, dd);
#pragma unroll
            for (int h = 0; h < MAX_HEADS; ++h) {
                if (h < a.H) {
                    const float z = sd[h] + ss[h];
                    const float al = expf(leaky_f(z, a.slope) - ls[h]);
                    const float pz = al * (z > 0.f ? 1.f : a.slope);
                    const float mk = drop_factor(a, db, h);
                    st.c0[h * CS + ln.lane] = al * mk;  // dxs += c0 dout[i]
                    st.c1[h * CS + ln.lane] = pz * mk;  // ds = c1 dot - c2
                    st.c2[h * CS + ln.lane] = pz * dd[h];
                }
            }
        }
        __syncwarp();
        // As in the rows pass: the warp steps together, a group past the end adds nothing.
        if constexpr (VEC) {
            aligned_walk<T, V>(dout, st.id, a.HF, cnt, E, ln.slot, c0, live, [&](int e, const float(&g)[V]) {
                float d = 0.f;
#pragma unroll
                for (int v = 0; v < V; ++v) d = fmaf(x[v], g[v], d);
                d = head_sum(d, a.L);
                if (e < cnt) {
                    const int k = ln.hl * CS + e;
                    acc += st.c1[k] * d - st.c2[k];
                    const float w = st.c0[k];
#pragma unroll
                    for (int v = 0; v < V; ++v) dx[v] = fmaf(w, g[v], dx[v]);
                }
            });
        } else {
#pragma unroll 4
            for (int e0 = 0; e0 < cnt; e0 += E) {
                const int e = e0 + ln.slot;
                const bool ok = e < cnt;
                float g[V];
                const float d = head_dot<T, V, VEC>(dout, st.id[e], ok, ln, a, x, g);
                if (ok) {
                    const int k = ln.hl * CS + e;
                    acc += st.c1[k] * d - st.c2[k];
                    const float w = st.c0[k];
#pragma unroll
                    for (int v = 0; v < V; ++v) dx[v] = fmaf(w, g[v], dx[v]);
                }
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int v = 0; v < V; ++v) dx[v] = groups_sum(dx[v], a.lg);
    acc = groups_sum(acc, a.lg);
    if (ln.slot == 0) {
#pragma unroll
        for (int v = 0; v < V; ++v)
            if (ln.c0 + v < a.HF) dxs[(size_t)col * a.HF + ln.c0 + v] = from_f32<T>(dx[v]);
    }
    if (ln.writes_head) ds_src[(size_t)col * a.H + ln.hl] = acc;
}

#define GAT_KERNELS(PREFIX, T, V, VEC, SUFFIX)                                                                 \
    extern "C" __global__ void __launch_bounds__(32 * GAT_WARPS)                                             \
        gat_fwd_##PREFIX##v##V##SUFFIX(const uint32_t* indptr, const uint32_t* indices, const T* xs,          \
                                       const float* s_dst, const float* s_src, T* out, float* lse,              \
                                       const uint32_t* order, int n_items, GatArgs a) {                         \
        gat_fwd_impl<T, V, VEC>(indptr, indices, xs, s_dst, s_src, out, lse, order, n_items, a);               \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * GAT_WARPS) gat_bwd_rows_##PREFIX##v##V##SUFFIX(          \
        const uint32_t* indptr, const uint32_t* indices, const T* xs, const float* s_dst, const float* s_src,  \
        const float* lse, const T* outp, float* dterm, const T* dout, float* ds_dst, const uint32_t* order,    \
        int n_items, GatArgs a) {                                                                              \
        gat_bwd_rows_impl<T, V, VEC>(indptr, indices, xs, s_dst, s_src, lse, outp, dterm, dout, ds_dst, order, \
                                     n_items, a);                                                              \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * GAT_WARPS) gat_bwd_cols_##PREFIX##v##V##SUFFIX(          \
        const uint32_t* t_indptr, const uint32_t* t_rows, const uint32_t* t_pos, const T* xs,                  \
        const float* s_dst, const float* s_src, const float* lse, const float* dterm, const T* dout,           \
        T* dxs, float* ds_src, const uint32_t* order, int n_items, GatArgs a) {                                \
        gat_bwd_cols_impl<T, V, VEC>(t_indptr, t_rows, t_pos, xs, s_dst, s_src, lse, dterm, dout, dxs, ds_src, \
                                     order, n_items, a);                                                       \
    }

#define GAT_WIDTHS(PREFIX, T)                                                                  \
    GAT_KERNELS(PREFIX, T, 1, false, ) GAT_KERNELS(PREFIX, T, 2, false, )                      \
    GAT_KERNELS(PREFIX, T, 4, false, ) GAT_KERNELS(PREFIX, T, 8, false, )                      \
    GAT_KERNELS(PREFIX, T, 1, true, _a) GAT_KERNELS(PREFIX, T, 2, true, _a)                    \
    GAT_KERNELS(PREFIX, T, 4, true, _a) GAT_KERNELS(PREFIX, T, 8, true, _a)

GAT_WIDTHS(, float)
GAT_WIDTHS(bf16_, __nv_bfloat16)
GAT_WIDTHS(f16_, __half)
