// A window of a row-major matrix in another dtype (src/ops/cast_pad.rs):
//   out[r, c] = r < xr && c < xc ? x[r, c] : 0   for r < rows, c < cols,
// converted through fp32 (exact for every widening; f32 to bf16 / f16 rounds to nearest even,
// as candle's cast does). Zero padding (rows >= xr, cols >= xc: a parameter cast to the
// activations' dtype and padded to aligned widths, in one pass where a cast, a zero fill and
// a concatenation's copies took three to five) and cropping back (a gradient narrowed to the
// parameter's shape and widened to f32).
#include "common.cuh"

template <typename X, typename T>
__device__ void window(const X* __restrict__ x, uint32_t xr, uint32_t xc, T* __restrict__ out, uint32_t rows,
                       uint32_t cols) {
    const uint64_t n = (uint64_t)rows * cols;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t r = (uint32_t)(i / cols), c = (uint32_t)(i % cols);
        out[i] = from_f32<T>(r < xr && c < xc ? to_f32(x[(uint64_t)r * xc + c]) : 0.f);
    }
}

#define CAST_PAD(X, XN, T, TN)                                                                                \
    extern "C" __global__ void cast_pad_##XN##_##TN(const X* x, uint32_t xr, uint32_t xc, T* out, uint32_t rows, \
                                                    uint32_t cols) {                                          \
        window<X, T>(x, xr, xc, out, rows, cols);                                                             \
    }
#define CAST_PAD_FROM(X, XN)            \
    CAST_PAD(X, XN, float, f32)         \
    CAST_PAD(X, XN, __nv_bfloat16, bf16) \
    CAST_PAD(X, XN, __half, f16)
CAST_PAD_FROM(float, f32)
CAST_PAD_FROM(__nv_bfloat16, bf16)
CAST_PAD_FROM(__half, f16)
