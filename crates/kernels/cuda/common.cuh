// Shared by the kernels: the full warp mask and VEC-wide float loads/stores (float2/float4
// when VEC is 2/4; the caller guarantees the alignment).
#pragma once

#include <stdint.h>

#define FULL 0xffffffffu

template <int VEC>
__device__ __forceinline__ void load_vec(const float* __restrict__ p, float (&r)[VEC]) {
    if (VEC == 4) {
        float4 v = __ldg(reinterpret_cast<const float4*>(p));
        r[0] = v.x; r[1 % VEC] = v.y; r[2 % VEC] = v.z; r[3 % VEC] = v.w;
    } else if (VEC == 2) {
        float2 v = __ldg(reinterpret_cast<const float2*>(p));
        r[0] = v.x; r[1 % VEC] = v.y;
    } else {
        r[0] = __ldg(p);
    }
}

template <int VEC>
__device__ __forceinline__ void store_vec(float* p, const float (&r)[VEC]) {
    if (VEC == 4) {
        *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1 % VEC], r[2 % VEC], r[3 % VEC]);
    } else if (VEC == 2) {
        *reinterpret_cast<float2*>(p) = make_float2(r[0], r[1 % VEC]);
    } else {
        p[0] = r[0];
    }
}
