// kit_library.cuh: checker-side helpers for the library routes of the problems (cuBLAS handle,
// status checks, scratch space). Never included where student code is linked.
#pragma once

#include <cublas_v2.h>

#include "kit.cuh"

namespace kit {

// One cuBLAS handle per process, created on first use (creation takes ~100 ms: keep it out of
// the timed runs, which the warm-up calls take care of).
inline cublasHandle_t cublas() {
    static cublasHandle_t handle = [] {
        cublasHandle_t h;
        cublasStatus_t s = cublasCreate(&h);
        if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory("cublasCreate: out of GPU memory");
        if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
        return h;
    }();
    return handle;
}

inline void cublas_check(cublasStatus_t s, const char* what) {
    if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(std::string(what) + ": out of GPU memory");
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + cublasGetStatusString(s));
}

// Device scratch space that grows as needed and lives until the process ends: the timed library
// calls then allocate nothing. `slot` keeps separate buffers apart.
inline double* scratch(size_t count, int slot = 0) {
    static double* buf[4] = {};
    static size_t capacity[4] = {};
    if (count > capacity[slot]) {
        if (buf[slot]) CUDA_CHECK(cudaFree(buf[slot]));
        CUDA_CHECK(cudaMalloc(&buf[slot], count * sizeof(double)));
        capacity[slot] = count;
    }
    return buf[slot];
}

}  // namespace kit
