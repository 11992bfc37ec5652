// Edge softmax over CSR rows: alpha[p] = exp(s[p] - max_row) / sum_row exp(s[q] - max_row),
// the attention normalisation of GAT / graph transformers (per destination row; one head per
// row of a head-expanded graph). One warp per row: a max pass, a sum pass, a write pass, each
// a strided loop over the row's edges and a shuffle reduction; empty rows write nothing.
// Backward: ds[p] = alpha[p] * (dalpha[p] - sum_row alpha[q] dalpha[q]).

#include "common.cuh"

extern "C" __global__ void edge_softmax_fwd(const uint32_t* __restrict__ indptr, const float* __restrict__ s,
                                            float* __restrict__ alpha, int n_rows) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const uint32_t start = indptr[row], end = indptr[row + 1];
    float m = -INFINITY;
    for (uint32_t p = start + lane; p < end; p += 32) m = fmaxf(m, __ldg(s + p));
    m = warp_max(m);
    float z = 0.f;
    for (uint32_t p = start + lane; p < end; p += 32) z += expf(__ldg(s + p) - m);
    z = warp_sum(z);
    const float inv = 1.f / z;
    for (uint32_t p = start + lane; p < end; p += 32) alpha[p] = expf(__ldg(s + p) - m) * inv;
}

extern "C" __global__ void edge_softmax_bwd(const uint32_t* __restrict__ indptr, const float* __restrict__ alpha,
                                            const float* __restrict__ dalpha, float* __restrict__ ds, int n_rows) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const uint32_t start = indptr[row], end = indptr[row + 1];
    const float t = warp_row_dot(alpha, dalpha, start, end, lane);
    for (uint32_t p = start + lane; p < end; p += 32) ds[p] = __ldg(alpha + p) * (__ldg(dalpha + p) - t);
}
