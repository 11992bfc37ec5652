// Fused masked cross-entropy: per row i with weight w_i > 0 and label y_i,
//   loss_i = w_i * (logsumexp(x_i) - x_i[y_i])                                  (forward)
//   dx_i   = g_i * w_i * (softmax(x_i) - onehot(y_i))                            (backward)
// One warp per row; the row's maximum and sum of exponentials in fp32 (logits may be stored
// as bf16 / f16). Rows with w_i = 0 (not in the training split) give 0 and no gradient. The
// backward recomputes the row's logsumexp (one more read of the logits) instead of keeping a
// [N, C] softmax from the forward.
#include "common.cuh"

__device__ __forceinline__ float ld(const float* p) { return __ldg(p); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float ld(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void st(__half* p, float v) { *p = __float2half(v); }

// logsumexp of row `x` (c entries), every lane gets it.
template <typename T>
__device__ __forceinline__ float row_lse(const T* __restrict__ x, int c, int lane) {
    float m = -INFINITY;
    for (int j = lane; j < c; j += 32) m = fmaxf(m, ld(x + j));
    m = warp_max(m);
    float s = 0.f;
    for (int j = lane; j < c; j += 32) s += expf(ld(x + j) - m);
    return m + logf(warp_sum(s));
}

template <typename T>
__device__ void xent_fwd(const T* __restrict__ x, const uint32_t* __restrict__ y, const float* __restrict__ w,
                         float* __restrict__ loss, int n, int c) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    const float wr = w[row];
    if (wr == 0.f) {
        if (lane == 0) loss[row] = 0.f;
        return;
    }
    const T* xr = x + (size_t)row * c;
    const float lse = row_lse(xr, c, lane);
    const uint32_t yr = y[row];
    if (lane == 0) loss[row] = yr < (uint32_t)c ? wr * (lse - ld(xr + yr)) : NAN;
}

// `w` here is the row weight already multiplied by the upstream gradient g_i (on the host).
template <typename T>
__device__ void xent_bwd(const T* __restrict__ x, const uint32_t* __restrict__ y, const float* __restrict__ w,
                         T* __restrict__ dx, int n, int c) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    const float wr = w[row];
    T* dr = dx + (size_t)row * c;
    if (wr == 0.f) {
        for (int j = lane; j < c; j += 32) st(dr + j, 0.f);
        return;
    }
    const T* xr = x + (size_t)row * c;
    const float lse = row_lse(xr, c, lane);
    const uint32_t yr = y[row];  // a label >= c matches no column (its loss was NaN)
    for (int j = lane; j < c; j += 32) st(dr + j, wr * (expf(ld(xr + j) - lse) - ((uint32_t)j == yr ? 1.f : 0.f)));
}

#define XENT(TY, NAME)                                                                                    \
    extern "C" __global__ void xent_fwd_##NAME(const TY* x, const uint32_t* y, const float* w, float* loss, \
                                               int n, int c) {                                            \
        xent_fwd<TY>(x, y, w, loss, n, c);                                                                \
    }                                                                                                     \
    extern "C" __global__ void xent_bwd_##NAME(const TY* x, const uint32_t* y, const float* w, TY* dx,     \
                                               int n, int c) {                                            \
        xent_bwd<TY>(x, y, w, dx, n, c);                                                                  \
    }
XENT(float, f32) XENT(__nv_bfloat16, bf16) XENT(__half, f16)
