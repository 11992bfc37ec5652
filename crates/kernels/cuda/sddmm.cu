// SDDMM on a CSR pattern: e[p] = <a[i], b[col_p]> for every edge p of row i.
// One warp per row; lanes split the feature dimension, a shuffle tree reduces each dot
// product, lane 0 writes it. a's row is re-read per edge from L1.

#include "common.cuh"


extern "C" __global__ void sddmm_rows(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                      const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ e, int n_rows, int k) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const float* __restrict__ ar = a + (size_t)row * k;
    for (uint32_t p = indptr[row]; p < indptr[row + 1]; ++p) {
        const float* __restrict__ br = b + (size_t)__ldg(indices + p) * k;
        float s = 0.f;
        for (int t = lane; t < k; t += 32) s = fmaf(__ldg(ar + t), __ldg(br + t), s);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(FULL, s, o);
        if (lane == 0) e[p] = s;
    }
}
