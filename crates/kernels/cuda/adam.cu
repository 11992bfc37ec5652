// Fused Adam / AdamW step, two passes per parameter tensor (grid-stride, one thread per
// element), in place:
//   adam_moments: g' = g + l2 * theta;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   adam_apply:   theta = theta * keep - lr * (m / bc1) / (sqrt(v / bc2) + eps)
// `mv` holds m (first n) then v (next n); l2 is Adam's coupled decay (0 for AdamW), keep is
// AdamW's decoupled factor 1 - lr * wd (1 for Adam).
// Both passes are gated: with `gate_len` > 0 they change nothing unless every value of
// `gate` (the loss and the gradients' sums) is finite, so the trainer can queue the step
// before it reads the check back (one synchronisation per step, not three).
#include <stdint.h>

// True when the step may run: no gate, or every gate value finite.
__device__ __forceinline__ bool gate_open(const float* gate, uint32_t gate_len) {
    for (uint32_t i = 0; i < gate_len; ++i) {
        if (!isfinite(gate[i])) return false;
    }
    return true;
}

template <typename T>
__device__ void moments(T* mv, const T* g, const T* theta, uint64_t n, T b1, T b2, T l2, const float* gate,
                        uint32_t gate_len) {
    if (!gate_open(gate, gate_len)) return;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const T gi = g[i] + l2 * theta[i];
        mv[i] = b1 * mv[i] + (T(1) - b1) * gi;
        mv[n + i] = b2 * mv[n + i] + (T(1) - b2) * gi * gi;
    }
}

template <typename T>
__device__ void apply(T* theta, const T* mv, uint64_t n, T lr, T bc1, T bc2, T eps, T keep, const float* gate,
                      uint32_t gate_len) {
    if (!gate_open(gate, gate_len)) return;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const T m = mv[i] / bc1, v = mv[n + i] / bc2;
        theta[i] = theta[i] * keep - lr * (m / (sqrt(v) + eps));
    }
}

extern "C" __global__ void adam_moments_f32(float* mv, const float* g, const float* theta, uint64_t n, float b1,
                                            float b2, float l2, const float* gate, uint32_t gate_len) {
    moments<float>(mv, g, theta, n, b1, b2, l2, gate, gate_len);
}
extern "C" __global__ void adam_moments_f64(double* mv, const double* g, const double* theta, uint64_t n, double b1,
                                            double b2, double l2, const float* gate, uint32_t gate_len) {
    moments<double>(mv, g, theta, n, b1, b2, l2, gate, gate_len);
}
extern "C" __global__ void adam_apply_f32(float* theta, const float* mv, uint64_t n, float lr, float bc1, float bc2,
                                          float eps, float keep, const float* gate, uint32_t gate_len) {
    apply<float>(theta, mv, n, lr, bc1, bc2, eps, keep, gate, gate_len);
}
extern "C" __global__ void adam_apply_f64(double* theta, const double* mv, uint64_t n, double lr, double bc1,
                                          double bc2, double eps, double keep, const float* gate,
                                          uint32_t gate_len) {
    apply<double>(theta, mv, n, lr, bc1, bc2, eps, keep, gate, gate_len);
}

// The step check's sums (src/ops/adam/sums.rs) in two launches. `sums_f32_parts`: grid
// (SUMS_BLOCKS, m) of SUMS_THREADS threads; block x of tensor y sums the elements
// x * SUMS_SPAN + [0, SUMS_SPAN) of every stride of SUMS_BLOCKS * SUMS_SPAN, each thread in
// SUMS_UNROLL independent accumulators (loads in flight, not one chain of dependent adds),
// then a fixed tree, into parts[y * SUMS_BLOCKS + x] (0 for a block past its tensor's end).
// `sums_f32_finish`: one warp per tensor sums its SUMS_BLOCKS partials in a fixed tree. The
// partition depends on the element count alone: the same sums on every run. One block per
// tensor (before) had bound the step check: 30.9 us for a 128 x 602 gradient on an H200.
#define SUMS_CHUNK 32
#define SUMS_BLOCKS 64
#define SUMS_THREADS 256
#define SUMS_UNROLL 8
#define SUMS_SPAN (SUMS_THREADS * SUMS_UNROLL)
static_assert(SUMS_BLOCKS == 64, "sums_f32_finish reads two partials a lane");
static_assert(SUMS_UNROLL == 8, "sums_f32_parts adds its accumulators in a fixed tree of 8");

// Up to SUMS_CHUNK tensors, passed by value: their pointers, then their element counts.
struct SumsTable {
    const float* p[SUMS_CHUNK];
    uint64_t n[SUMS_CHUNK];
};

extern "C" __global__ void __launch_bounds__(SUMS_THREADS) sums_f32_parts(SumsTable t, float* __restrict__ parts) {
    const uint32_t i = blockIdx.y;
    const float* __restrict__ p = t.p[i];
    const uint64_t n = t.n[i];
    float acc[SUMS_UNROLL];
#pragma unroll
    for (int k = 0; k < SUMS_UNROLL; ++k) acc[k] = 0.f;
    for (uint64_t base = (uint64_t)blockIdx.x * SUMS_SPAN; base < n; base += (uint64_t)SUMS_BLOCKS * SUMS_SPAN) {
#pragma unroll
        for (int k = 0; k < SUMS_UNROLL; ++k) {
            const uint64_t j = base + (uint64_t)k * SUMS_THREADS + threadIdx.x;
            if (j < n) acc[k] += p[j];
        }
    }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    __shared__ float warps[SUMS_THREADS / 32];
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = 0.f;
#pragma unroll
        for (int w = 0; w < SUMS_THREADS / 32; ++w) b += warps[w];
        parts[(uint64_t)i * SUMS_BLOCKS + blockIdx.x] = b;
    }
}

// out[i] = the sum of parts[i * SUMS_BLOCKS ..][..SUMS_BLOCKS]; grid m, one warp a block.
extern "C" __global__ void sums_f32_finish(const float* __restrict__ parts, uint32_t m, float* __restrict__ out) {
    const uint32_t i = blockIdx.x;
    if (i >= m) return;
    const float* q = parts + (uint64_t)i * SUMS_BLOCKS;
    float s = q[threadIdx.x] + q[threadIdx.x + 32];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) out[i] = s;
}
