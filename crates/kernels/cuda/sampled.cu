// Edge-sampled SpMM for inference (ES-SpMM / AES-SpMM). One warp per row; the warp walks the
// sampled positions in the same order as the CPU reference (`Sampling::positions`) and each
// lane accumulates its columns; the estimator's scale is applied at the end.
//
// strategy 0: ES Bucket (first s), 1: ES FastRand ((i*577) mod nnz, i < s, when nnz > s),
//          2: AES (runs of n consecutive edges, run i at (i*1429) mod (nnz - n + 1)).

#include <stdint.h>

struct Pick {
    int runs;  // number of runs
    int n;     // edges per run
};

__device__ __forceinline__ Pick aes_pick(uint32_t nnz, int w, double b0, double b1, double b2, double b3) {
    const double r = (double)nnz / (double)w;
    int runs = r <= b0 ? 0 : r <= b1 ? 4 : r <= b2 ? 8 : r <= b3 ? 16 : 32;
    Pick p;
    p.runs = runs;
    p.n = runs ? w / runs : 0;
    return p;
}

extern "C" __global__ void spmm_sampled(const uint32_t* __restrict__ indptr, const uint32_t* __restrict__ indices,
                                        const float* __restrict__ vals, const float* __restrict__ x,
                                        float* __restrict__ out, int n_rows, int k, int weighted, int mean,
                                        int strategy, int s, double b0, double b1, double b2, double b3) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const uint32_t start = indptr[row];
    const uint32_t nnz = indptr[row + 1] - start;
    for (int col = lane; col < k; col += 32) {
        float acc = 0.f;
        uint32_t m = 0;
        if (nnz > 0) {
            if (strategy == 0 || (strategy == 1 && nnz <= (uint32_t)s)) {
                m = min(nnz, (uint32_t)s);
                for (uint32_t q = 0; q < m; ++q) {
                    const uint32_t p = start + q;
                    acc += (weighted ? vals[p] : 1.f) * x[(size_t)indices[p] * k + col];
                }
            } else if (strategy == 1) {
                m = s;
                for (uint32_t i = 0; i < (uint32_t)s; ++i) {
                    const uint32_t p = start + (uint32_t)(((uint64_t)i * 577u) % nnz);
                    acc += (weighted ? vals[p] : 1.f) * x[(size_t)indices[p] * k + col];
                }
            } else {
                const Pick pk = aes_pick(nnz, s, b0, b1, b2, b3);
                if (pk.runs == 0) {
                    m = nnz;
                    for (uint32_t q = 0; q < nnz; ++q) {
                        const uint32_t p = start + q;
                        acc += (weighted ? vals[p] : 1.f) * x[(size_t)indices[p] * k + col];
                    }
                } else {
                    const uint32_t span = nnz - pk.n + 1;
                    m = pk.runs * pk.n;
                    for (int i = 0; i < pk.runs; ++i) {
                        const uint32_t r0 = (uint32_t)(((uint64_t)i * 1429u) % span);
                        for (int q = 0; q < pk.n; ++q) {
                            const uint32_t p = start + r0 + q;
                            acc += (weighted ? vals[p] : 1.f) * x[(size_t)indices[p] * k + col];
                        }
                    }
                }
            }
            acc *= mean ? 1.f / (float)m : (float)nnz / (float)m;
        }
        out[(size_t)row * k + col] = acc;
    }
}
