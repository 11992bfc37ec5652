// Graph structure on the device: the edge permutation of a structurally symmetric CSR's
// transpose, without building the transpose.
//
// For a square CSR whose rows are strictly increasing and whose pattern is symmetric, the
// transpose is the matrix itself, and entry q of row c (column r) of the transpose is entry
// (r, c) of the matrix: perm[q] = its position, found by a binary search in row r. One warp
// per row c, its lanes over the row's entries. *bad gets 1 when a row is not strictly
// increasing or some (r, c) has no (c, r); the caller then builds the transpose on the host.
// (The host counting sort scans the whole matrix per thread; at 115 M entries it, the
// permutation's upload and the comparison took ~1.2 s of the first training epoch.)
#include "common.cuh"

extern "C" __global__ void symmetric_perm(const uint32_t* __restrict__ indptr,
                                          const uint32_t* __restrict__ indices, uint32_t n,
                                          uint32_t* __restrict__ perm, uint32_t* __restrict__ bad) {
    // 64-bit: a warp per row passes 2^32 threads at 134 M rows.
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    if (warp >= n) return;
    const uint32_t c = (uint32_t)warp;
    const uint32_t s = indptr[c], e = indptr[c + 1];
    for (uint32_t q = s + lane; q < e; q += 32) {
        const uint32_t r = indices[q];
        if (q > s && indices[q - 1] >= r) {
            atomicOr(bad, 1u);
            return;
        }
        uint32_t lo = indptr[r], hi = indptr[r + 1];
        const uint32_t end = hi;
        while (lo < hi) {
            const uint32_t mid = lo + ((hi - lo) >> 1);
            if (indices[mid] < c) lo = mid + 1;
            else hi = mid;
        }
        if (lo < end && indices[lo] == c) {
            perm[q] = lo;
        } else {
            atomicOr(bad, 1u);
            return;
        }
    }
}
