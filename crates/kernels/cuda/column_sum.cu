// Column sums of a row-major [n, d] matrix (src/ops/column_sum.rs): out[c] = sum_r x[r, c], a
// bias's gradient. fp32 accumulation, the result rounded once to x's dtype.
//
// Two launches, the partition fixed by n, d and which kernel runs (the vector one needs x's
// start 16-byte aligned): the same sums on every run of the same tensor.
// `column_sum_parts_*`: the matrix read as one flat array in chunks of V elements (one 16-byte
// load: V = 16 / sizeof(T); V = 1 for the scalar kernel). A period of `lanes` chunks is
// lcm(d, V) elements, P = lanes * V / d whole rows, so chunk `lane` of every period holds the
// same V columns: a thread keeps V fp32 sums, one per column it meets. Grid (B, column tiles)
// of CS_THREADS threads: a block takes a tile of `tile` lanes (several tiles only for the
// scalar kernel's rows of over CS_THREADS elements) and CS_THREADS / tile slots, and block x
// the periods [x * per_block, (x + 1) * per_block), slot s every `slots`-th of them from s,
// four loads in flight. The slots' and a period's rows' sums are added in a fixed order
// into parts[x * d + c]. `column_sum_finish_*`: 32 columns a block, 32 slots each summing
// every 32nd partial, then the slots in order, into out[c].
// cuBLAS's GEMV (ones [1, n] · x) took 27 + 4 us for 233 K x 128 bf16 on an H200, about
// twice what its 60 MB take to read, and 11 + 6 us for 153 K x 41.
#include "common.cuh"

#define CS_THREADS 256
#define CS_FINISH_SLOTS 32

template <typename T, int V>
union CsChunk {
    uint4 q[V * sizeof(T) / 16 > 0 ? V * sizeof(T) / 16 : 1];
    T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void cs_load(const T* p, CsChunk<T, V>& c) {
    if constexpr (V * sizeof(T) == 16) {
        c.q[0] = *reinterpret_cast<const uint4*>(p);
    } else {
#pragma unroll
        for (int k = 0; k < V; ++k) c.v[k] = p[k];
    }
}

template <typename T, int V>
__device__ __forceinline__ void cs_add(float* acc, const CsChunk<T, V>& c) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] += to_f32(c.v[k]);
}

template <typename T, int V>
__device__ void column_parts(const T* __restrict__ x, float* __restrict__ parts, uint64_t total, uint32_t d,
                             uint32_t lanes, uint32_t tile, uint64_t per_block) {
    __shared__ float sm[CS_THREADS * V];
    const uint32_t slots = CS_THREADS / tile;
    const uint32_t lane = threadIdx.x % tile, slot = threadIdx.x / tile;
    const uint32_t chunk = blockIdx.y * tile + lane;
    const uint64_t period = (uint64_t)lanes * V;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.f;
    const uint64_t periods = (total + period - 1) / period;
    const uint64_t p0 = (uint64_t)blockIdx.x * per_block;
    const uint64_t p1 = min(periods, p0 + per_block);
    if (slot < slots && chunk < lanes) {
        const T* col = x + (uint64_t)chunk * V;
        // Periods whose chunk lies whole inside the array; the last one may not.
        const uint64_t off = (uint64_t)chunk * V;
        const uint64_t whole = min(p1, (uint64_t)(total >= off + V ? (total - off - V) / period + 1 : 0));
        uint64_t p = p0 + slot;
        for (; p + 3ull * slots < whole; p += 4ull * slots) {
            CsChunk<T, V> a, b, c, e;
            cs_load<T, V>(col + p * period, a);
            cs_load<T, V>(col + (p + slots) * period, b);
            cs_load<T, V>(col + (p + 2ull * slots) * period, c);
            cs_load<T, V>(col + (p + 3ull * slots) * period, e);
            cs_add<T, V>(acc, a);
            cs_add<T, V>(acc, b);
            cs_add<T, V>(acc, c);
            cs_add<T, V>(acc, e);
        }
        for (; p < whole; p += slots) {
            CsChunk<T, V> a;
            cs_load<T, V>(col + p * period, a);
            cs_add<T, V>(acc, a);
        }
        // A chunk cut by the array's end: its elements inside, one at a time.
        for (; p < p1; p += slots) {
#pragma unroll
            for (int k = 0; k < V; ++k) {
                if (p * period + (uint64_t)chunk * V + k < total) acc[k] += to_f32(col[p * period + k]);
            }
        }
    }
    // sm[slot][lane * V + k]: thread (slot, lane) is threadIdx.x = slot * tile + lane.
#pragma unroll
    for (int k = 0; k < V; ++k) sm[threadIdx.x * V + k] = acc[k];
    __syncthreads();
    const uint32_t width = tile * V;
    const uint32_t rows = (uint32_t)(period / d);
    if (rows == 1) {
        // A period is one row: position t of the tile is column blockIdx.y * width + t.
        for (uint32_t t = threadIdx.x; t < width; t += CS_THREADS) {
            const uint64_t c = (uint64_t)blockIdx.y * width + t;
            if (c >= d) continue;
            float s = 0.f;
            for (uint32_t q = 0; q < slots; ++q) s += sm[q * width + t];
            parts[(uint64_t)blockIdx.x * d + c] = s;
        }
    } else {
        // One tile of P rows (width = P * d): column c sits at c + r * d of every slot's row.
        for (uint32_t c = threadIdx.x; c < d; c += CS_THREADS) {
            float s = 0.f;
            for (uint32_t q = 0; q < slots; ++q)
                for (uint32_t r = 0; r < rows; ++r) s += sm[q * width + r * d + c];
            parts[(uint64_t)blockIdx.x * d + c] = s;
        }
    }
}

template <typename T>
__device__ void column_finish(const float* __restrict__ parts, T* __restrict__ out, uint32_t blocks, uint32_t d) {
    __shared__ float sm[CS_FINISH_SLOTS][33];
    const uint32_t cl = threadIdx.x % 32, slot = threadIdx.x / 32;
    const uint32_t c = blockIdx.x * 32 + cl;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    if (c < d) {
        uint32_t b = slot;
        for (; b + 3 * CS_FINISH_SLOTS < blocks; b += 4 * CS_FINISH_SLOTS) {
            a0 += parts[(uint64_t)b * d + c];
            a1 += parts[(uint64_t)(b + CS_FINISH_SLOTS) * d + c];
            a2 += parts[(uint64_t)(b + 2 * CS_FINISH_SLOTS) * d + c];
            a3 += parts[(uint64_t)(b + 3 * CS_FINISH_SLOTS) * d + c];
        }
        for (; b < blocks; b += CS_FINISH_SLOTS) a0 += parts[(uint64_t)b * d + c];
    }
    sm[slot][cl] = (a0 + a1) + (a2 + a3);
    __syncthreads();
    if (slot == 0 && c < d) {
        float s = 0.f;
        for (int q = 0; q < CS_FINISH_SLOTS; ++q) s += sm[q][cl];
        out[c] = from_f32<T>(s);
    }
}

#define COLUMN_SUM(TY, NAME, VEC)                                                                                \
    extern "C" __global__ void __launch_bounds__(CS_THREADS)                                                     \
        column_sum_parts_v_##NAME(const TY* x, float* parts, uint64_t total, uint32_t d, uint32_t lanes,         \
                                  uint32_t tile, uint64_t per_block) {                                           \
        column_parts<TY, VEC>(x, parts, total, d, lanes, tile, per_block);                                       \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(CS_THREADS)                                                     \
        column_sum_parts_##NAME(const TY* x, float* parts, uint64_t total, uint32_t d, uint32_t lanes,           \
                                uint32_t tile, uint64_t per_block) {                                             \
        column_parts<TY, 1>(x, parts, total, d, lanes, tile, per_block);                                         \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(CS_FINISH_SLOTS * 32)                                           \
        column_sum_finish_##NAME(const float* parts, TY* out, uint32_t blocks, uint32_t d) {                     \
        column_finish<TY>(parts, out, blocks, d);                                                                \
    }
COLUMN_SUM(float, f32, 4)
COLUMN_SUM(__nv_bfloat16, bf16, 8)
COLUMN_SUM(__half, f16, 8)
