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

// The step check's sums (src/ops/adam/sums.rs): the sum of each of `m` f32 tensors into
// out[i], one block per tensor. `table` holds m device pointers, then the m element counts.
// Each thread strides its tensor in f32, then a fixed tree (warp shuffles, then the warps in
// order): the same sums on every run. Blocks of at most 1024 threads.
extern "C" __global__ void sums_f32(const uint64_t* __restrict__ table, uint32_t m, float* __restrict__ out) {
    const uint32_t i = blockIdx.x;
    if (i >= m) return;
    const float* __restrict__ p = reinterpret_cast<const float*>(table[i]);
    const uint64_t n = table[m + i];
    float acc = 0.f;
    for (uint64_t j = threadIdx.x; j < n; j += blockDim.x) acc += p[j];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float warps[32];
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (uint32_t w = 0; w < (blockDim.x + 31) / 32; ++w) t += warps[w];
        out[i] = t;
    }
}
