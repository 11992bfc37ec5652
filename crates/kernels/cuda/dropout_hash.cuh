// The dropout keep hash (src/ops/dropout/cpu.rs computes the same): element i of a call with
// seed s is kept iff (mix(s + i * golden) >> 40) >= threshold, threshold = round(p * 2^24).
// Shared by dropout.cu and the kernels that draw a dropout mask inside (gat_aggregate.cu).
#pragma once

#include <stdint.h>

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Whether element i of the call with `seed` is kept at keep threshold `threshold` (cpu.rs: keep).
__device__ __forceinline__ bool keep(uint64_t seed, uint64_t i, uint64_t threshold) {
    return (mix64(seed + i * 0x9E3779B97F4A7C15ULL) >> 40) >= threshold;
}
