// Stateless inverted dropout: element i of a call with seed s is kept iff
// (mix(s + i * golden) >> 40) >= threshold, threshold = round(p * 2^24); kept values are scaled.
// The same hash runs on the CPU (src/ops/dropout/cpu.rs), so masks are bit-identical on both
// devices and a mask is a function of (seed, index) alone: no generator state to save.
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "dropout_hash.cuh"

template <typename T>
__device__ void dropout_impl(const T* x, T* out, uint64_t n, uint64_t seed, uint64_t threshold, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        out[i] = keep(seed, i, threshold) ? x[i] * scale : T(0);
    }
}

extern "C" __global__ void dropout_f32(const float* x, float* out, uint64_t n, uint64_t seed, uint64_t threshold, float scale) {
    dropout_impl<float>(x, out, n, seed, threshold, scale);
}

extern "C" __global__ void dropout_f64(const double* x, double* out, uint64_t n, uint64_t seed, uint64_t threshold, double scale) {
    dropout_impl<double>(x, out, n, seed, threshold, scale);
}

// Half-precision storage (--precision bf16 / f16): the same mask, the scale applied in fp32.
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ void narrow(float v, __nv_bfloat16* o) { *o = __float2bfloat16(v); }
__device__ __forceinline__ void narrow(float v, __half* o) { *o = __float2half(v); }

template <typename H>
__device__ void dropout_half(const H* x, H* out, uint64_t n, uint64_t seed, uint64_t threshold, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        narrow(keep(seed, i, threshold) ? widen(x[i]) * scale : 0.f, out + i);
    }
}

extern "C" __global__ void dropout_bf16(const __nv_bfloat16* x, __nv_bfloat16* out, uint64_t n, uint64_t seed,
                                        uint64_t threshold, float scale) {
    dropout_half<__nv_bfloat16>(x, out, n, seed, threshold, scale);
}

extern "C" __global__ void dropout_f16(const __half* x, __half* out, uint64_t n, uint64_t seed, uint64_t threshold,
                                       float scale) {
    dropout_half<__half>(x, out, n, seed, threshold, scale);
}

// Fused ReLU + dropout (training's hidden activation): y = keep(i) ? max(x, 0) * scale : 0 with
// the dropout mask above (p = 0: threshold 0, every element kept, scale 1: plain ReLU), and its
// backward dx = y > 0 ? dy * scale : 0 (y > 0 exactly when the element was kept and x > 0).
template <typename T>
__device__ void relu_dropout_impl(const T* x, T* out, uint64_t n, uint64_t seed, uint64_t threshold, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const T v = x[i];
        out[i] = (keep(seed, i, threshold) && v > T(0)) ? v * scale : T(0);
    }
}

template <typename T>
__device__ void relu_dropout_bwd_impl(const T* y, const T* dy, T* dx, uint64_t n, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        dx[i] = y[i] > T(0) ? dy[i] * scale : T(0);
    }
}

template <typename H>
__device__ void relu_dropout_half(const H* x, H* out, uint64_t n, uint64_t seed, uint64_t threshold, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float v = widen(x[i]);
        narrow((keep(seed, i, threshold) && v > 0.f) ? v * scale : 0.f, out + i);
    }
}

template <typename H>
__device__ void relu_dropout_bwd_half(const H* y, const H* dy, H* dx, uint64_t n, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        narrow(widen(y[i]) > 0.f ? widen(dy[i]) * scale : 0.f, dx + i);
    }
}

#define RELU_DROPOUT(TY, NAME, ST, IMPL)                                                                    \
    extern "C" __global__ void relu_dropout_##NAME(const TY* x, TY* out, uint64_t n, uint64_t seed,           \
                                                   uint64_t threshold, ST scale) {                             \
        IMPL(x, out, n, seed, threshold, scale);                                                               \
    }                                                                                                          \
    extern "C" __global__ void relu_dropout_bwd_##NAME(const TY* y, const TY* dy, TY* dx, uint64_t n, ST scale) { \
        IMPL##_bwd_tail(y, dy, dx, n, scale);                                                                  \
    }
#define relu_dropout_impl_bwd_tail relu_dropout_bwd_impl
#define relu_dropout_half_bwd_tail relu_dropout_bwd_half
RELU_DROPOUT(float, f32, float, relu_dropout_impl)
RELU_DROPOUT(double, f64, double, relu_dropout_impl)
RELU_DROPOUT(__nv_bfloat16, bf16, float, relu_dropout_half)
RELU_DROPOUT(__half, f16, float, relu_dropout_half)

// Bias + ReLU + dropout in one pass (a hidden layer's epilogue): y = keep(i) && v > 0 ? v * scale
// : 0 with v = x[i] + b[i % d] (the bias row broadcast over [n / d, d]), the mask of `dropout`.
// Half storage adds and scales in fp32 and rounds once. The backward is relu_dropout_bwd's
// (y > 0 exactly when the element was kept and v > 0); the bias gradient is a column sum.
template <typename T>
__device__ void bias_relu_dropout_impl(const T* x, const T* b, T* out, uint64_t n, uint32_t d, uint64_t seed,
                                       uint64_t threshold, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const T v = x[i] + b[i % d];
        out[i] = (keep(seed, i, threshold) && v > T(0)) ? v * scale : T(0);
    }
}

template <typename H>
__device__ void bias_relu_dropout_half(const H* x, const H* b, H* out, uint64_t n, uint32_t d, uint64_t seed,
                                       uint64_t threshold, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float v = widen(x[i]) + widen(b[i % d]);
        narrow((keep(seed, i, threshold) && v > 0.f) ? v * scale : 0.f, out + i);
    }
}

#define BIAS_RELU_DROPOUT(TY, NAME, ST, IMPL)                                                               \
    extern "C" __global__ void bias_relu_dropout_##NAME(const TY* x, const TY* b, TY* out, uint64_t n,        \
                                                        uint32_t d, uint64_t seed, uint64_t threshold,        \
                                                        ST scale) {                                           \
        IMPL(x, b, out, n, d, seed, threshold, scale);                                                         \
    }
BIAS_RELU_DROPOUT(float, f32, float, bias_relu_dropout_impl)
BIAS_RELU_DROPOUT(double, f64, double, bias_relu_dropout_impl)
BIAS_RELU_DROPOUT(__nv_bfloat16, bf16, float, bias_relu_dropout_half)
BIAS_RELU_DROPOUT(__half, f16, float, bias_relu_dropout_half)

// Bias + ReLU + dropout that also writes its mask as bits, with an optional residual: a hidden
// layer's epilogue when the op keeps the mask for its backward instead of the output (the output
// then carries the residual, so `y > 0` no longer tells the mask). y = keep(i) && v > 0 ?
// v * scale : 0 with v = x[i] + b[i % d], as bias_relu_dropout; out[i] = y + r[i] (r null: y),
// the sum rounded once more in half storage (as a separate add would). With `pre`, r is added
// before the activation instead, x[i] + r[i] rounded to the storage type first (as a separate
// add would: GraphSAGE's two products), and out[i] = y. Bit i % 32 of
// bits[i / 32] is set iff the element passed (kept and v > 0). One warp per 32 consecutive
// elements (a ballot writes the word), so the block size must be a multiple of 32.
// The warp loop of the bits kernels: `elem(i)` writes element i < n and says whether it passed;
// lane 0 of each warp writes the ballot of its 32 elements into bits[i / 32].
template <typename F>
__device__ __forceinline__ void ballot_bits(uint32_t* bits, uint64_t n, F elem) {
    const uint64_t lane = threadIdx.x & 31;
    const uint64_t n_warps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    for (uint64_t w = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5; w * 32 < n; w += n_warps) {
        const uint64_t i = w * 32 + lane;
        const bool on = i < n && elem(i);
        const uint32_t word = __ballot_sync(0xffffffffu, on);
        if (lane == 0) bits[w] = word;
    }
}

template <typename T>
__device__ void bias_relu_dropout_bits_impl(const T* x, const T* b, const T* r, T* out, uint32_t* bits, uint64_t n,
                                            uint32_t d, uint64_t seed, uint64_t threshold, T scale, int pre) {
    ballot_bits(bits, n, [&](uint64_t i) {
        const T xi = (r && pre) ? T(x[i] + r[i]) : x[i];
        const T v = xi + b[i % d];
        const bool on = keep(seed, i, threshold) && v > T(0);
        const T y = on ? v * scale : T(0);
        out[i] = (r && !pre) ? y + r[i] : y;
        return on;
    });
}

template <typename H>
__device__ void bias_relu_dropout_bits_half(const H* x, const H* b, const H* r, H* out, uint32_t* bits, uint64_t n,
                                            uint32_t d, uint64_t seed, uint64_t threshold, float scale, int pre) {
    ballot_bits(bits, n, [&](uint64_t i) {
        H xi = x[i];
        if (r && pre) narrow(widen(x[i]) + widen(r[i]), &xi);
        const float v = widen(xi) + widen(b[i % d]);
        const bool on = keep(seed, i, threshold) && v > 0.f;
        H y;
        narrow(on ? v * scale : 0.f, &y);
        if (r && !pre) {
            narrow(widen(y) + widen(r[i]), out + i);
        } else {
            out[i] = y;
        }
        return on;
    });
}

// Its backward: dx[i] = bit i ? dy[i] * scale : 0.
template <typename T>
__device__ void mask_bits_bwd_impl(const uint32_t* bits, const T* dy, T* dx, uint64_t n, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        dx[i] = ((bits[i >> 5] >> (i & 31)) & 1u) ? dy[i] * scale : T(0);
    }
}

template <typename H>
__device__ void mask_bits_bwd_half(const uint32_t* bits, const H* dy, H* dx, uint64_t n, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        narrow(((bits[i >> 5] >> (i & 31)) & 1u) ? widen(dy[i]) * scale : 0.f, dx + i);
    }
}

// The same two kernels, 8 consecutive elements a thread: one 16-byte (bf16/f16) or two (f32)
// vector loads of x and r, the bias chunk at the chunk's column, one store, and the chunk's 8
// bits as byte c of the mask (bit i % 8 of byte i / 8 is bit i % 32 of word i / 32 on this
// little-endian device). The host takes these only where d % 8 == 0 (a chunk stays in one row),
// n % 32 == 0 (every mask word is written whole) and every operand is 16-byte aligned.
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ void narrow(float v, float* o) { *o = v; }

template <typename T>
union Chunk8 {
    uint4 q[sizeof(T) / 2];
    T v[8];
};

template <typename T>
__device__ __forceinline__ void load8(const T* p, Chunk8<T>& c) {
#pragma unroll
    for (int k = 0; k < (int)sizeof(T) / 2; ++k) c.q[k] = reinterpret_cast<const uint4*>(p)[k];
}

template <typename T>
__device__ __forceinline__ void store8(T* p, const Chunk8<T>& c) {
#pragma unroll
    for (int k = 0; k < (int)sizeof(T) / 2; ++k) reinterpret_cast<uint4*>(p)[k] = c.q[k];
}

template <typename T>
__device__ void bias_relu_dropout_bits_v8(const T* x, const T* b, const T* r, T* out, uint8_t* bits, uint64_t n8,
                                          uint32_t d, uint64_t seed, uint64_t threshold, float scale, int pre) {
    for (uint64_t c = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; c < n8;
         c += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t i0 = c * 8;
        const uint32_t col = (uint32_t)(i0 % d);
        Chunk8<T> xv, bv, rv, ov;
        load8(x + i0, xv);
        load8(b + col, bv);
        if (r) load8(r + i0, rv);
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            T xj = xv.v[j];
            if (r && pre) narrow(widen(xv.v[j]) + widen(rv.v[j]), &xj);
            const float v = widen(xj) + widen(bv.v[j]);
            const bool on = keep(seed, i0 + j, threshold) && v > 0.f;
            T y;
            narrow(on ? v * scale : 0.f, &y);
            if (r && !pre) {
                narrow(widen(y) + widen(rv.v[j]), &ov.v[j]);
            } else {
                ov.v[j] = y;
            }
            m |= (uint32_t)on << j;
        }
        store8(out + i0, ov);
        bits[c] = (uint8_t)m;
    }
}

template <typename T>
__device__ void mask_bits_bwd_v8(const uint8_t* bits, const T* dy, T* dx, uint64_t n8, float scale) {
    for (uint64_t c = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; c < n8;
         c += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t m = bits[c];
        Chunk8<T> g, o;
        load8(dy + c * 8, g);
#pragma unroll
        for (int j = 0; j < 8; ++j) narrow((m >> j) & 1u ? widen(g.v[j]) * scale : 0.f, &o.v[j]);
        store8(dx + c * 8, o);
    }
}

#define MASK_BITS_V8(TY, NAME)                                                                              \
    extern "C" __global__ void bias_relu_dropout_bits_v8_##NAME(const TY* x, const TY* b, const TY* r,       \
                                                                TY* out, uint8_t* bits, uint64_t n8,         \
                                                                uint32_t d, uint64_t seed,                   \
                                                                uint64_t threshold, float scale, int pre) {  \
        bias_relu_dropout_bits_v8<TY>(x, b, r, out, bits, n8, d, seed, threshold, scale, pre);                \
    }                                                                                                          \
    extern "C" __global__ void mask_bits_bwd_v8_##NAME(const uint8_t* bits, const TY* dy, TY* dx, uint64_t n8, \
                                                       float scale) {                                         \
        mask_bits_bwd_v8<TY>(bits, dy, dx, n8, scale);                                                         \
    }
MASK_BITS_V8(float, f32)
MASK_BITS_V8(__nv_bfloat16, bf16)
MASK_BITS_V8(__half, f16)

#define MASK_BITS(TY, NAME, ST, FWD, BWD)                                                                   \
    extern "C" __global__ void bias_relu_dropout_bits_##NAME(const TY* x, const TY* b, const TY* r, TY* out,  \
                                                             uint32_t* bits, uint64_t n, uint32_t d,          \
                                                             uint64_t seed, uint64_t threshold, ST scale,     \
                                                             int pre) {                                       \
        FWD(x, b, r, out, bits, n, d, seed, threshold, scale, pre);                                            \
    }                                                                                                          \
    extern "C" __global__ void mask_bits_bwd_##NAME(const uint32_t* bits, const TY* dy, TY* dx, uint64_t n,   \
                                                    ST scale) {                                               \
        BWD(bits, dy, dx, n, scale);                                                                           \
    }
MASK_BITS(float, f32, float, bias_relu_dropout_bits_impl, mask_bits_bwd_impl)
MASK_BITS(double, f64, double, bias_relu_dropout_bits_impl, mask_bits_bwd_impl)
MASK_BITS(__nv_bfloat16, bf16, float, bias_relu_dropout_bits_half, mask_bits_bwd_half)
MASK_BITS(__half, f16, float, bias_relu_dropout_bits_half, mask_bits_bwd_half)

// Bias + ELU (alpha 1) + dropout in one pass (a GAT hidden layer's epilogue): y = keep(i) ?
// elu(v) * scale : 0 with v = x[i] + b[i % d] and elu(v) = v > 0 ? v : expm1(v), the mask of
// `dropout`. Half storage adds, activates and scales in fp32 and rounds once. The backward reads
// the output and recomputes the mask from (seed, i): where kept, elu' is 1 above 0 and
// elu(v) + 1 = y / scale + 1 at or below it, so dx = y > 0 ? dy * scale : dy * (y + scale);
// 0 where dropped. The bias gradient is a column sum (host side).
__device__ __forceinline__ float elu_of(float v) { return v > 0.f ? v : expm1f(v); }
__device__ __forceinline__ double elu_of(double v) { return v > 0.0 ? v : expm1(v); }

template <typename T>
__device__ void bias_elu_dropout_impl(const T* x, const T* b, T* out, uint64_t n, uint32_t d, uint64_t seed,
                                      uint64_t threshold, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        out[i] = keep(seed, i, threshold) ? elu_of(x[i] + b[i % d]) * scale : T(0);
    }
}

template <typename H>
__device__ void bias_elu_dropout_half(const H* x, const H* b, H* out, uint64_t n, uint32_t d, uint64_t seed,
                                      uint64_t threshold, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        narrow(keep(seed, i, threshold) ? elu_of(widen(x[i]) + widen(b[i % d])) * scale : 0.f, out + i);
    }
}

template <typename T>
__device__ void bias_elu_dropout_bwd_impl(const T* y, const T* dy, T* dx, uint64_t n, uint64_t seed,
                                          uint64_t threshold, T scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const T v = y[i], g = dy[i];
        dx[i] = keep(seed, i, threshold) ? (v > T(0) ? g * scale : g * (v + scale)) : T(0);
    }
}

template <typename H>
__device__ void bias_elu_dropout_bwd_half(const H* y, const H* dy, H* dx, uint64_t n, uint64_t seed,
                                          uint64_t threshold, float scale) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float v = widen(y[i]), g = widen(dy[i]);
        narrow(keep(seed, i, threshold) ? (v > 0.f ? g * scale : g * (v + scale)) : 0.f, dx + i);
    }
}

#define BIAS_ELU_DROPOUT(TY, NAME, ST, IMPL)                                                                \
    extern "C" __global__ void bias_elu_dropout_##NAME(const TY* x, const TY* b, TY* out, uint64_t n,         \
                                                       uint32_t d, uint64_t seed, uint64_t threshold,         \
                                                       ST scale) {                                            \
        IMPL(x, b, out, n, d, seed, threshold, scale);                                                         \
    }                                                                                                          \
    extern "C" __global__ void bias_elu_dropout_bwd_##NAME(const TY* y, const TY* dy, TY* dx, uint64_t n,     \
                                                           uint64_t seed, uint64_t threshold, ST scale) {     \
        IMPL##_bwd_tail(y, dy, dx, n, seed, threshold, scale);                                                 \
    }
#define bias_elu_dropout_impl_bwd_tail bias_elu_dropout_bwd_impl
#define bias_elu_dropout_half_bwd_tail bias_elu_dropout_bwd_half
BIAS_ELU_DROPOUT(float, f32, float, bias_elu_dropout_impl)
BIAS_ELU_DROPOUT(double, f64, double, bias_elu_dropout_impl)
BIAS_ELU_DROPOUT(__nv_bfloat16, bf16, float, bias_elu_dropout_half)
BIAS_ELU_DROPOUT(__half, f16, float, bias_elu_dropout_half)

// Bias add (an output layer's bias, gnn_kernels::bias_add and bias_add_residual): out[r][c] =
// x[r][c] (+ res[r * rs + c] when has_res) + b[c] for x [n, d]; res may have any row stride rs
// (a column range of a wider matrix). blockDim.x columns (from blockIdx.y * blockDim.x) by
// blockDim.y rows, striding over the rows by gridDim.x * blockDim.y: each thread keeps its column
// and bias value (no index division per element). Half storage adds in fp32 and rounds once.
template <typename T>
__device__ __forceinline__ T bias_add_one(T x, T b) { return x + b; }
__device__ __forceinline__ __nv_bfloat16 bias_add_one(__nv_bfloat16 x, __nv_bfloat16 b) {
    return __float2bfloat16(widen(x) + widen(b));
}
__device__ __forceinline__ __half bias_add_one(__half x, __half b) { return __float2half(widen(x) + widen(b)); }
template <typename T>
__device__ __forceinline__ T bias_add_one(T x, T r, T b) { return x + r + b; }
__device__ __forceinline__ __nv_bfloat16 bias_add_one(__nv_bfloat16 x, __nv_bfloat16 r, __nv_bfloat16 b) {
    return __float2bfloat16(widen(x) + widen(r) + widen(b));
}
__device__ __forceinline__ __half bias_add_one(__half x, __half r, __half b) {
    return __float2half(widen(x) + widen(r) + widen(b));
}

template <typename T>
__device__ void bias_add_impl(const T* __restrict__ x, const T* __restrict__ res, int64_t rs, int has_res,
                              const T* __restrict__ b, T* __restrict__ out, int64_t n, int d) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= d) return;
    const T bc = b[c];
    const int64_t r0 = (int64_t)blockIdx.x * blockDim.y + threadIdx.y, step = (int64_t)gridDim.x * blockDim.y;
    if (has_res) {
        for (int64_t r = r0; r < n; r += step) out[r * d + c] = bias_add_one(x[r * d + c], res[r * rs + c], bc);
    } else {
        for (int64_t r = r0; r < n; r += step) out[r * d + c] = bias_add_one(x[r * d + c], bc);
    }
}

#define BIAS_ADD(TY, NAME)                                                                                  \
    extern "C" __global__ void bias_add_##NAME(const TY* x, const TY* res, int64_t rs, int has_res,          \
                                               const TY* b, TY* out, int64_t n, int d) {                   \
        bias_add_impl<TY>(x, res, rs, has_res, b, out, n, d);                                                \
    }
BIAS_ADD(float, f32)
BIAS_ADD(double, f64)
BIAS_ADD(__nv_bfloat16, bf16)
BIAS_ADD(__half, f16)

// Row scaling `out[r, :] = x[r, :] * s[r]` (`s` fp32; one fp32 product, rounded to the
// storage type): a diagonal factor of a normalised aggregation (GCN's D^-1/2 on either side,
// a mean's 1/deg) applied to the dense operand, so the SpMM itself runs unweighted and streams
// no edge values. VEC elements per thread per step (16-byte loads where the host found the
// row width and both pointers aligned; VEC = 1 otherwise); `per_row`: steps per row.
__device__ __forceinline__ float widen_any(float v) { return v; }
__device__ __forceinline__ float widen_any(double v) { return (float)v; }
__device__ __forceinline__ float widen_any(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen_any(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T narrow_any(float v);
template <> __device__ __forceinline__ float narrow_any<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 narrow_any<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half narrow_any<__half>(float v) { return __float2half(v); }

template <typename T, int VEC>
__device__ void scale_rows_impl(const T* __restrict__ x, const float* __restrict__ s, T* __restrict__ out,
                                int64_t steps, int64_t per_row) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < steps;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float f = s[i / per_row];
        if constexpr (VEC == 1) {
            out[i] = narrow_any<T>(widen_any(x[i]) * f);
        } else {
            union { uint4 u; T v[VEC]; } a;
            a.u = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
            for (int j = 0; j < VEC; ++j) a.v[j] = narrow_any<T>(widen_any(a.v[j]) * f);
            reinterpret_cast<uint4*>(out)[i] = a.u;
        }
    }
}

// f64 rows scale in f64 (the CPU-only dtype's kernels keep its precision).
extern "C" __global__ void scale_rows_f64(const double* __restrict__ x, const float* __restrict__ s,
                                          double* __restrict__ out, int64_t steps, int64_t per_row) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < steps;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = x[i] * (double)s[i / per_row];
}

#define SCALE_ROWS(TY, NAME, VEC)                                                                     \
    extern "C" __global__ void scale_rows_##NAME(const TY* x, const float* s, TY* out, int64_t steps, \
                                                 int64_t per_row) {                                   \
        scale_rows_impl<TY, 1>(x, s, out, steps, per_row);                                            \
    }                                                                                                 \
    extern "C" __global__ void scale_rows_v_##NAME(const TY* x, const float* s, TY* out, int64_t steps, \
                                                   int64_t per_row) {                                 \
        scale_rows_impl<TY, VEC>(x, s, out, steps, per_row);                                          \
    }
SCALE_ROWS(float, f32, 4)
SCALE_ROWS(__nv_bfloat16, bf16, 8)
SCALE_ROWS(__half, f16, 8)

// Row scaling into another width: `out[r, j] = (j < kin ? x[r, j] * s[r] + res[r, j] : 0) (+ b[j])`
// for `j < kout` (`x [n, kin]`, `out [n, kout]`, `b [kout]`, `res [n, kin]`; a null `s` scales
// by 1, a null `res` or `b` adds nothing; fp32 arithmetic, rounded to the storage type once).
// An aggregation's epilogue on padded columns: GCN's output layer's `D^-1/2`, bias and the
// narrowing back to its classes in one pass, GraphSAGE's root term, bias and narrowing, and
// their backward's padding and `D^-1/2`.
// A block covers RESCALE_UNROLL * blockDim consecutive elements, a thread every blockDim-th of
// them (each step coalesced), all its loads issued before its stores. Only the first of a
// thread's RESCALE_UNROLL elements divides by the row width: the next ones step its row and
// column by blockDim's quotient and remainder (one carry at most).
// 32-bit indices (`I = int`) where the host found every index below 2^31 (a 64-bit division
// per element took 38-43 us at 233 K x 41 bf16 on an H200, against a 10 us transfer).
#define RESCALE_UNROLL 8
template <typename X, typename T, typename I>
__device__ void rescale_rows_impl(const X* __restrict__ x, I kin, const float* __restrict__ s,
                                  const T* __restrict__ res, const T* __restrict__ b, T* __restrict__ out,
                                  I n, I kout) {
    const I total = n * kout;
    if (total <= 0) return;
    const I span = (I)blockDim.x * RESCALE_UNROLL;
    const I step_r = (I)blockDim.x / kout, step_j = (I)blockDim.x - step_r * kout;
    for (I base = (I)blockIdx.x * span + threadIdx.x; base < total; base += (I)gridDim.x * span) {
        float v[RESCALE_UNROLL];
        I r = base / kout, j = base - r * kout;
#pragma unroll
        for (int u = 0; u < RESCALE_UNROLL; ++u) {
            const I i = base + (I)u * (I)blockDim.x;
            v[u] = 0.f;
            if (i < total) {
                if (j < kin) {
                    const I at = r * kin + j;
                    v[u] = s ? widen_any(x[at]) * s[r] : widen_any(x[at]);
                    if (res) v[u] += widen_any(res[at]);
                }
                if (b) v[u] += widen_any(b[j]);
            }
            r += step_r;
            j += step_j;
            if (j >= kout) {
                j -= kout;
                ++r;
            }
        }
#pragma unroll
        for (int u = 0; u < RESCALE_UNROLL; ++u) {
            const I i = base + (I)u * (I)blockDim.x;
            if (i < total) out[i] = narrow_any<T>(v[u]);
        }
    }
}

#define RESCALE_ROWS(TY, NAME)                                                                        \
    extern "C" __global__ void rescale_rows_##NAME(const TY* x, int64_t kin, const float* s,          \
                                                   const TY* res, const TY* b, TY* out, int64_t n,    \
                                                   int64_t kout) {                                    \
        rescale_rows_impl<TY, TY, int64_t>(x, kin, s, res, b, out, n, kout);                          \
    }                                                                                                 \
    extern "C" __global__ void rescale_rows_i32_##NAME(const TY* x, int64_t kin, const float* s,      \
                                                       const TY* res, const TY* b, TY* out, int64_t n, \
                                                       int64_t kout) {                                \
        rescale_rows_impl<TY, TY, int>(x, (int)kin, s, res, b, out, (int)n, (int)kout);               \
    }
// From an fp32 accumulation into half storage: a half-precision SpMM's narrowing and epilogue
// in one pass (one rounding, where a cast and then a rescale rounded twice).
#define RESCALE_ROWS_ACC(TY, NAME)                                                                    \
    extern "C" __global__ void rescale_rows_acc_##NAME(const float* x, int64_t kin, const float* s,   \
                                                       const TY* res, const TY* b, TY* out, int64_t n, \
                                                       int64_t kout) {                                \
        rescale_rows_impl<float, TY, int64_t>(x, kin, s, res, b, out, n, kout);                       \
    }                                                                                                 \
    extern "C" __global__ void rescale_rows_acc_i32_##NAME(const float* x, int64_t kin, const float* s, \
                                                           const TY* res, const TY* b, TY* out,       \
                                                           int64_t n, int64_t kout) {                 \
        rescale_rows_impl<float, TY, int>(x, (int)kin, s, res, b, out, (int)n, (int)kout);            \
    }
RESCALE_ROWS(float, f32)
RESCALE_ROWS(__nv_bfloat16, bf16)
RESCALE_ROWS(__half, f16)
RESCALE_ROWS_ACC(__nv_bfloat16, bf16)
RESCALE_ROWS_ACC(__half, f16)
extern "C" __global__ void rescale_rows_f64(const double* x, int64_t kin, const float* s, const double* res,
                                            const double* b, double* out, int64_t n, int64_t kout) {
    const int64_t total = n * kout;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / kout, j = i - r * kout;
        double v = 0.0;
        if (j < kin) {
            v = s ? x[r * kin + j] * (double)s[r] : x[r * kin + j];
            if (res) v += res[r * kin + j];
        }
        if (b) v += b[j];
        out[i] = v;
    }
}
