// GAT's attention coefficients in one op (u_add_v, LeakyReLU and edge softmax fused):
//   z[p] = s_dst[i] + s_src[col_p],  e[p] = LeakyReLU_slope(z[p]),
//   alpha[p] = exp(e[p] - max_row e) / sum_row exp(e[q] - max_row e)          (p in row i)
// so only alpha is stored (one float per edge instead of the scores, the activation and its
// intermediates). One warp per row (a row of the head-expanded graph): a max pass, a sum pass
// and a write pass over the row's edges, each recomputing e from the two node vectors.
// Backward: t_i = sum_row alpha dalpha, dz[p] = alpha[p] (dalpha[p] - t_i) LeakyReLU'(z[p]),
// ds_dst[i] = sum_row dz (written here), ds_src = column sums of dz (the host adds them over
// the transpose).

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
