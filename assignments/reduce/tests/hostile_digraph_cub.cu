// expect: forbidden_call
// CUB's whole namespace renamed by a #define spelled with the digraph %: (which the preprocessor reads as #): no symbol of the object then says cub::, and a search for "#define" alone missed it. The scan reads directives as the preprocessor does.
// expect-message: #define cub
%:define cub kub
#include <cub/device/device_reduce.cuh>

#include "cuda_check.cuh"

void reduce_sum(long long n, const double* x, double* sum) {
    size_t bytes = 0;
    CUDA_CHECK(kub::DeviceReduce::Sum(nullptr, bytes, x, sum, n));
    static void* tmp = nullptr;
    static size_t capacity = 0;
    if (bytes > capacity) {
        if (tmp) CUDA_CHECK(cudaFree(tmp));
        CUDA_CHECK(cudaMalloc(&tmp, bytes));
        capacity = bytes;
    }
    CUDA_CHECK(kub::DeviceReduce::Sum(tmp, bytes, x, sum, n));
}
