// INT8 feature dequantisation: out[p] = code[p] * scale[j] + min[j], j = p mod f.
// Product and sum rounded separately (no FMA contraction) to match the CPU bit for bit.

#include <stdint.h>

extern "C" __global__ void dequant_u8(const uint8_t* __restrict__ q, const float* __restrict__ scale,
                                      const float* __restrict__ minv, float* __restrict__ out, uint64_t total,
                                      int f) {
    for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; e < total;
         e += (uint64_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % (uint64_t)f);
        out[e] = __fadd_rn(__fmul_rn((float)q[e], __ldg(scale + j)), __ldg(minv + j));
    }
}

// Four codes per thread (f a multiple of 4): one 32-bit load, one float4 store.
extern "C" __global__ void dequant_u8x4(const uint8_t* __restrict__ q, const float* __restrict__ scale,
                                        const float* __restrict__ minv, float* __restrict__ out, uint64_t units,
                                        int f) {
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < units;
         u += (uint64_t)gridDim.x * blockDim.x) {
        const uchar4 c = reinterpret_cast<const uchar4*>(q)[u];
        const int j = (int)((u * 4) % (uint64_t)f);
        float4 r;
        r.x = __fadd_rn(__fmul_rn((float)c.x, __ldg(scale + j)), __ldg(minv + j));
        r.y = __fadd_rn(__fmul_rn((float)c.y, __ldg(scale + j + 1)), __ldg(minv + j + 1));
        r.z = __fadd_rn(__fmul_rn((float)c.z, __ldg(scale + j + 2)), __ldg(minv + j + 2));
        r.w = __fadd_rn(__fmul_rn((float)c.w, __ldg(scale + j + 3)), __ldg(minv + j + 3));
        reinterpret_cast<float4*>(out)[u] = r;
    }
}
