// Shared by the kernels: the full warp mask, VEC-wide float loads/stores (float2/float4
// when VEC is 2/4; the caller guarantees the alignment) and whole-warp reductions.
#pragma once

#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// VEC-wide loads of half-precision storage (bf16 or f16), widened to fp32 for accumulation:
// VEC = 8 / 4 / 2 halves move as one 16 / 8 / 4-byte transaction (the caller guarantees the
// alignment), 1 as a single element.
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

// fp32 to the storage type T, rounding to nearest (exact for values that came from a T).
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

template <int VEC, typename H>
__device__ __forceinline__ void load_vec(const H* __restrict__ p, float (&r)[VEC]) {
    static_assert(sizeof(H) == 2, "half-precision storage");
    union U8 { uint4 u; H h[8]; };
    union U4 { uint2 u; H h[4]; };
    union U2 { uint32_t u; H h[2]; };
    if (VEC == 8) {
        U8 v; v.u = __ldg(reinterpret_cast<const uint4*>(p));
#pragma unroll
        for (int j = 0; j < VEC; ++j) r[j] = to_f32(v.h[j % 8]);
    } else if (VEC == 4) {
        U4 v; v.u = __ldg(reinterpret_cast<const uint2*>(p));
#pragma unroll
        for (int j = 0; j < VEC; ++j) r[j] = to_f32(v.h[j % 4]);
    } else if (VEC == 2) {
        U2 v; v.u = __ldg(reinterpret_cast<const uint32_t*>(p));
#pragma unroll
        for (int j = 0; j < VEC; ++j) r[j] = to_f32(v.h[j % 2]);
    } else {
        r[0] = to_f32(p[0]);
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

// A negative `chunk` marks a column-blocked schedule (crates/kernels/src/schedule.rs,
// ColumnBlockedSchedule): item `i` is the two pairs (row, first edge), (end edge, split).
__device__ __forceinline__ Item item_of(const uint32_t* __restrict__ indptr, const uint2* __restrict__ items, int i,
                                        int chunk) {
    if (chunk < 0) {
        const uint2 a = items[2 * i], b = items[2 * i + 1];
        Item r;
        r.row = a.x;
        r.start = a.y;
        r.end = b.x;
        r.deg = indptr[a.x + 1] - indptr[a.x];
        r.split = b.y != 0;
        return r;
    }
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

// Work unit `w` of a row kernel: item `w` of the row schedule when `items` is given, else the
// whole of row `w` (never split).
__device__ __forceinline__ Item work_of(const uint32_t* __restrict__ indptr, const uint2* __restrict__ items, int w,
                                        int chunk) {
    if (items) return item_of(indptr, items, w, chunk);
    Item r;
    r.row = w;
    r.start = indptr[w];
    r.end = indptr[w + 1];
    r.deg = r.end - r.start;
    r.split = false;
    return r;
}
