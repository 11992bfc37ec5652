// Shared by the kernels: the full warp mask, VEC-wide float loads/stores (float2/float4
// when VEC is 2/4; the caller guarantees the alignment) and whole-warp reductions.
#pragma once

#include <stdint.h>

#define FULL 0xffffffffu

// Maximum / sum of `v` over the 32 lanes (butterfly: every lane gets the result).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// sum_p alpha[p] * dalpha[p] over one row's edges [start, end), the warp's lanes striding
// the row and their partials reduced by warp_sum (every lane gets the total): the softmax
// backward's row term, shared by edge_softmax_bwd and gat_attention_bwd.
__device__ __forceinline__ float warp_row_dot(const float* __restrict__ alpha, const float* __restrict__ dalpha,
                                              uint32_t start, uint32_t end, int lane) {
    float t = 0.f;
    for (uint32_t p = start + lane; p < end; p += 32) t = fmaf(__ldg(alpha + p), __ldg(dalpha + p), t);
    return warp_sum(t);
}

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

// A work item of the row schedule (crates/kernels/src/schedule.rs): the warp's row, the edge
// range it covers and the row's whole degree (for means); `split` when the row has other items
// too, whose partial sums meet in global memory through atomics.
struct Item {
    uint32_t row, start, end, deg;
    bool split;
};

__device__ __forceinline__ Item item_of(const uint32_t* __restrict__ indptr, const uint2* __restrict__ items, int i,
                                        int chunk) {
    const uint2 it = items[i];
    const uint32_t rs = indptr[it.x], re = indptr[it.x + 1];
    Item r;
    r.row = it.x;
    r.start = it.y;
    r.end = min(it.y + (uint32_t)chunk, re);
    r.deg = re - rs;
    r.split = r.deg > (uint32_t)chunk;
    return r;
}
