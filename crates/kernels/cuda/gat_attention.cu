// GAT's attention coefficients in one op (u_add_v, LeakyReLU and edge softmax fused):
//   z[p] = s_dst[i] + s_src[col_p],  e[p] = LeakyReLU_slope(z[p]),
//   alpha[p] = exp(e[p] - max_row e) / sum_row exp(e[q] - max_row e)          (p in row i)
// so only alpha is stored (one float per edge instead of the scores, the activation and its
// intermediates). One warp per row (a row of the head-expanded graph): a max pass, a sum pass
// and a write pass over the row's edges, each recomputing e from the two node vectors.
// Backward: t_i = sum_row alpha dalpha, dz[p] = alpha[p] (dalpha[p] - t_i) LeakyReLU'(z[p]),
// ds_dst[i] = sum_row dz (written here), ds_src = column sums of dz (the host adds them over
// the transpose).
// Also GAT's node scores s_src / s_dst from the projected features (gat_scores, at the end).

#include "common.cuh"

__device__ __forceinline__ float leaky(float z, float slope) { return z > 0.f ? z : z * slope; }

extern "C" __global__ void gat_attention_fwd(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                             const float* __restrict__ s_dst, const float* __restrict__ s_src,
                                             float* __restrict__ alpha, int n_rows, float slope) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const uint32_t start = indptr[row], end = indptr[row + 1];
    const float sd = __ldg(s_dst + row);
    float m = -INFINITY;
    for (uint32_t p = start + lane; p < end; p += 32) m = fmaxf(m, leaky(sd + __ldg(s_src + __ldg(indices + p)), slope));
    m = warp_max(m);
    float z = 0.f;
    for (uint32_t p = start + lane; p < end; p += 32) z += expf(leaky(sd + __ldg(s_src + __ldg(indices + p)), slope) - m);
    z = warp_sum(z);
    const float inv = 1.f / z;
    for (uint32_t p = start + lane; p < end; p += 32)
        alpha[p] = expf(leaky(sd + __ldg(s_src + __ldg(indices + p)), slope) - m) * inv;
}

extern "C" __global__ void gat_attention_bwd(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                             const float* __restrict__ s_dst, const float* __restrict__ s_src,
                                             const float* __restrict__ alpha, const float* __restrict__ dalpha,
                                             float* __restrict__ dz, float* __restrict__ ds_dst, int n_rows,
                                             float slope) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const uint32_t start = indptr[row], end = indptr[row + 1];
    const float t = warp_row_dot(alpha, dalpha, start, end, lane);
    const float sd = __ldg(s_dst + row);
    float acc = 0.f;
    for (uint32_t p = start + lane; p < end; p += 32) {
        const float zz = sd + __ldg(s_src + __ldg(indices + p));
        const float d = __ldg(alpha + p) * (__ldg(dalpha + p) - t) * (zz > 0.f ? 1.f : slope);
        dz[p] = d;
        acc += d;
    }
    acc = warp_sum(acc);
    if (lane == 0) ds_dst[row] = acc;
}

// GAT's node scores (gat_scores): s[0][r][k] = sum_f xs[r][k F + f] a_src[k F + f] and s[1][r][k]
// the same with a_dst (att = [a_src; a_dst], 2 H F floats), fp32 accumulation from the features'
// storage type T. One thread per (row, head): blockDim.x heads (from blockIdx.y * blockDim.x) by
// blockDim.y rows, striding over the rows by gridDim.x * blockDim.y (no 64-bit divisions).
template <typename T>
__device__ void gat_scores_fwd_impl(const T* __restrict__ xs, const float* __restrict__ att, float* __restrict__ s,
                                    int64_t n, int h, int f) {
    const int k = blockIdx.y * blockDim.x + threadIdx.x;
    if (k >= h) return;
    const int hf = h * f;
    const int64_t nh = n * h;
    const float* as = att + k * f;
    const float* ad = att + hf + k * f;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; r < n; r += (int64_t)gridDim.x * blockDim.y) {
        const T* x = xs + r * hf + k * f;
        float a = 0.f, d = 0.f;
        for (int c = 0; c < f; ++c) {
            const float v = to_f32(x[c]);
            a = fmaf(v, __ldg(as + c), a);
            d = fmaf(v, __ldg(ad + c), d);
        }
        s[r * h + k] = a;
        s[nh + r * h + k] = d;
    }
}

// Backward, the features' gradient: dxs[r][c] = ds[0][r][c / F] a_src[c] + ds[1][r][c / F] a_dst[c],
// rounded once to T. blockDim.x columns (from blockIdx.y * blockDim.x) by blockDim.y rows, as
// gat_scores_datt below.
template <typename T>
__device__ void gat_scores_dx_impl(const float* __restrict__ ds, const float* __restrict__ att, T* __restrict__ dxs,
                                   int64_t n, int h, int f) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    const int hf = h * f;
    if (c >= hf) return;
    const int k = c / f;
    const float as = __ldg(att + c), ad = __ldg(att + hf + c);
    const int64_t nh = n * h;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; r < n; r += (int64_t)gridDim.x * blockDim.y) {
        const int64_t j = r * h + k;
        dxs[r * hf + c] = from_f32<T>(fmaf(__ldg(ds + j), as, __ldg(ds + nh + j) * ad));
    }
}

// Backward, both attention vectors' gradients: da_side[c] = sum_r ds[side][r][c / F] xs[r][c]. A
// block is blockDim.x columns (from blockIdx.y * blockDim.x) by blockDim.y rows, striding over the
// rows by gridDim.x * blockDim.y; its column sums, added over its rows in a fixed order, go to
// partial[blockIdx.x][side H F + c], and the host sums the blocks: deterministic, no atomics.
template <typename T>
__device__ void gat_scores_datt_impl(const T* __restrict__ xs, const float* __restrict__ ds, float* __restrict__ partial,
                                     int64_t n, int h, int f) {
    extern __shared__ float red[];
    const int hf = h * f;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    const int64_t nh = n * h;
    float as = 0.f, ad = 0.f;
    if (c < hf) {
        const int k = c / f;
        for (int64_t r = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; r < n; r += (int64_t)gridDim.x * blockDim.y) {
            const float v = to_f32(xs[r * hf + c]);
            const int64_t j = r * h + k;
            as = fmaf(__ldg(ds + j), v, as);
            ad = fmaf(__ldg(ds + nh + j), v, ad);
        }
    }
    const int t = threadIdx.y * blockDim.x + threadIdx.x, tn = blockDim.x * blockDim.y;
    red[t] = as;
    red[tn + t] = ad;
    __syncthreads();
    if (threadIdx.y == 0 && c < hf) {
        float a = 0.f, d = 0.f;
        for (int y = 0; y < (int)blockDim.y; ++y) {
            a += red[y * blockDim.x + threadIdx.x];
            d += red[tn + y * blockDim.x + threadIdx.x];
        }
        partial[(int64_t)blockIdx.x * 2 * hf + c] = a;
        partial[(int64_t)blockIdx.x * 2 * hf + hf + c] = d;
    }
}

#define GAT_SCORES(T, NAME)                                                                                     \
    extern "C" __global__ void gat_scores_fwd_##NAME(const T* xs, const float* att, float* s, int64_t n, int h,    \
                                                     int f) {                                                   \
        gat_scores_fwd_impl<T>(xs, att, s, n, h, f);                                                            \
    }                                                                                                           \
    extern "C" __global__ void gat_scores_dx_##NAME(const float* ds, const float* att, T* dxs, int64_t n, int h,   \
                                                    int f) {                                                    \
        gat_scores_dx_impl<T>(ds, att, dxs, n, h, f);                                                           \
    }                                                                                                           \
    extern "C" __global__ void gat_scores_datt_##NAME(const T* xs, const float* ds, float* partial, int64_t n,      \
                                                      int h, int f) {                                           \
        gat_scores_datt_impl<T>(xs, ds, partial, n, h, f);                                                      \
    }
GAT_SCORES(float, f32)
GAT_SCORES(__nv_bfloat16, bf16)
GAT_SCORES(__half, f16)
