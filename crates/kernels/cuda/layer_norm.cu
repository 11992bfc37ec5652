// LayerNorm over the rows of x [n, d] (torch's, biased variance):
//   mean_i = sum_j x_ij / d,  var_i = sum_j (x_ij - mean_i)^2 / d,  rstd_i = 1 / sqrt(var_i + eps)
//   xhat_ij = (x_ij - mean_i) rstd_i,  y_ij = xhat_ij w_j + b_j
// One warp per row; lane l holds columns l, l + 32, ... (CPL of them, d <= 32 CPL) in fp32
// registers, so the row is read once and the variance is a second pass over registers (no
// E[x^2] - mean^2 cancellation). T: the storage type of x, y, dy, dx (float, or
// __nv_bfloat16 / __half under half precision); w, b, the statistics and dw / db are fp32.
//
// Backward, with g_ij = dy_ij w_j:
//   dx_ij = rstd_i (g_ij - mean_j g_ij - xhat_ij mean_j (g_ij xhat_ij))
//   dw_j = sum_i dy_ij xhat_ij,  db_j = sum_i dy_ij
// layer_norm_bwd writes dx; layer_norm_param_grads writes one [2, d] partial (dw; db) per
// block (its warps' rows in a fixed order, no atomics), which the host sums.

#include "common.cuh"

template <typename T, int CPL>
__device__ __forceinline__ void load_row(const T* __restrict__ r, int d, int lane, float (&v)[CPL]) {
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        const int j = lane + 32 * c;
        v[c] = j < d ? to_f32(r[j]) : 0.f;
    }
}

// mean and rstd of the row in v (zeros past d).
template <int CPL>
__device__ __forceinline__ void row_stats(const float (&v)[CPL], int d, int lane, float eps, float& mean,
                                          float& rstd) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CPL; ++c) s += v[c];
    mean = warp_sum(s) / (float)d;
    float q = 0.f;
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        const int j = lane + 32 * c;
        const float t = j < d ? v[c] - mean : 0.f;
        q = fmaf(t, t, q);
    }
    rstd = 1.f / sqrtf(warp_sum(q) / (float)d + eps);
}

template <typename T, int CPL>
__device__ __forceinline__ void ln_fwd(const T* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ b, T* __restrict__ y, int n, int d, float eps) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    float v[CPL];
    load_row<T, CPL>(x + (size_t)row * d, d, lane, v);
    float mean, rstd;
    row_stats<CPL>(v, d, lane, eps, mean, rstd);
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        const int j = lane + 32 * c;
        if (j < d) y[(size_t)row * d + j] = from_f32<T>(fmaf((v[c] - mean) * rstd, w[j], b[j]));
    }
}

template <typename T, int CPL>
__device__ __forceinline__ void ln_bwd(const T* __restrict__ x, const float* __restrict__ w,
                                       const T* __restrict__ dy, T* __restrict__ dx, int n, int d, float eps) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n) return;
    float v[CPL], g[CPL];
    load_row<T, CPL>(x + (size_t)row * d, d, lane, v);
    load_row<T, CPL>(dy + (size_t)row * d, d, lane, g);
    float mean, rstd;
    row_stats<CPL>(v, d, lane, eps, mean, rstd);
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        const int j = lane + 32 * c;
        if (j < d) {
            v[c] = (v[c] - mean) * rstd;  // xhat
            g[c] *= w[j];
            sg += g[c];
            sgx = fmaf(g[c], v[c], sgx);
        }
    }
    const float mg = warp_sum(sg) / (float)d, mgx = warp_sum(sgx) / (float)d;
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        const int j = lane + 32 * c;
        if (j < d) dx[(size_t)row * d + j] = from_f32<T>(rstd * (g[c] - mg - v[c] * mgx));
    }
}

// Block `blockIdx.x` sums rows blockIdx.x * rows_per_block .. (+ rows_per_block) into
// part[blockIdx.x] = (dw; db) [2, d]: each warp takes every WARPS-th row of the block's range
// and keeps its columns' sums in registers, then the warps add theirs in warp order.
#define LN_WARPS 8
template <typename T, int CPL>
__device__ __forceinline__ void ln_param_grads(const T* __restrict__ x, const T* __restrict__ dy,
                                               float* __restrict__ part, int n, int d, float eps,
                                               int rows_per_block) {
    __shared__ float acc[2][32 * 32];  // d <= 1024
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    const int first = blockIdx.x * rows_per_block;
    const int last = min(first + rows_per_block, n);
    float sw[CPL], sb[CPL];
#pragma unroll
    for (int c = 0; c < CPL; ++c) sw[c] = sb[c] = 0.f;
    for (int row = first + wid; row < last; row += LN_WARPS) {
        float v[CPL], g[CPL];
        load_row<T, CPL>(x + (size_t)row * d, d, lane, v);
        load_row<T, CPL>(dy + (size_t)row * d, d, lane, g);
        float mean, rstd;
        row_stats<CPL>(v, d, lane, eps, mean, rstd);
#pragma unroll
        for (int c = 0; c < CPL; ++c) {
            sw[c] = fmaf(g[c], (v[c] - mean) * rstd, sw[c]);
            sb[c] += g[c];
        }
    }
    for (int k = 0; k < LN_WARPS; ++k) {
        if (wid == k) {
#pragma unroll
            for (int c = 0; c < CPL; ++c) {
                const int j = lane + 32 * c;
                if (j < d) {
                    acc[0][j] = k == 0 ? sw[c] : acc[0][j] + sw[c];
                    acc[1][j] = k == 0 ? sb[c] : acc[1][j] + sb[c];
                }
            }
        }
        __syncthreads();
    }
    float* out = part + (size_t)blockIdx.x * 2 * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        out[j] = acc[0][j];
        out[d + j] = acc[1][j];
    }
}

#define LN_KERNELS(TY, PRE, CPL)                                                                               \
    extern "C" __global__ void PRE##layer_norm_fwd_c##CPL(const TY* __restrict__ x, const float* __restrict__ w, \
                                                          const float* __restrict__ b, TY* __restrict__ y, int n,  \
                                                          int d, float eps) {                                    \
        ln_fwd<TY, CPL>(x, w, b, y, n, d, eps);                                                                 \
    }                                                                                                           \
    extern "C" __global__ void PRE##layer_norm_bwd_c##CPL(const TY* __restrict__ x, const float* __restrict__ w, \
                                                          const TY* __restrict__ dy, TY* __restrict__ dx, int n,  \
                                                          int d, float eps) {                                    \
        ln_bwd<TY, CPL>(x, w, dy, dx, n, d, eps);                                                               \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * LN_WARPS) PRE##layer_norm_param_grads_c##CPL(             \
        const TY* __restrict__ x, const TY* __restrict__ dy, float* __restrict__ part, int n, int d, float eps,   \
        int rows_per_block) {                                                                                   \
        ln_param_grads<TY, CPL>(x, dy, part, n, d, eps, rows_per_block);                                        \
    }
#define LN_WIDTHS(TY, PRE) \
    LN_KERNELS(TY, PRE, 1) LN_KERNELS(TY, PRE, 2) LN_KERNELS(TY, PRE, 4) LN_KERNELS(TY, PRE, 8) \
    LN_KERNELS(TY, PRE, 16) LN_KERNELS(TY, PRE, 32)
LN_WIDTHS(float, ) LN_WIDTHS(__nv_bfloat16, bf16_) LN_WIDTHS(__half, f16_)
