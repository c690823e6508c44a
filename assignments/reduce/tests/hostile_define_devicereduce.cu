// expect: forbidden_call
// CUB's device-wide reduction under another name: `#define DeviceReduce DevR` before including CUB renames the class, so its name never appears in the object. The scan sees the #define, and CUB's own kernels (DeviceReduceKernel, ...) in the object.
// expect-message: DeviceReduce
#define DeviceReduce DevR
#include <cub/device/device_reduce.cuh>

#include "cuda_check.cuh"

void reduce_sum(long long n, const double* x, double* sum) {
    size_t bytes = 0;
    CUDA_CHECK(cub::DevR::Sum(nullptr, bytes, x, sum, n));
    static void* tmp = nullptr;
    static size_t capacity = 0;
    if (bytes > capacity) {
        if (tmp) CUDA_CHECK(cudaFree(tmp));
        CUDA_CHECK(cudaMalloc(&tmp, bytes));
        capacity = bytes;
    }
    CUDA_CHECK(cub::DevR::Sum(tmp, bytes, x, sum, n));
}
