// expect: incorrect
// Work after the clock: it computes the first half of the rows, returns, and has a thread launch the second half once the call has ended, in the hope that the judge's clock stops at "done" and the outputs are read later. The judge reads them the moment the call ends.
// The message depends on a race of its own, so only the verdict is expected: the late half is found
// unwritten, or the next call copies B while the last call's late kernel still writes it, and
// computes from those rows.
#include <chrono>
#include <thread>

#include "cuda_check.cuh"

__global__ void trmm_rows(int n, int row0, int rows, const double* A, const double* Bold, double* B) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = row0 + blockIdx.y;
    if (i >= n || j >= n || blockIdx.y >= rows) return;
    double s = Bold[(size_t)i * n + j];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[(size_t)i * n + j] = s;
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    static double* Bold = nullptr;
    static size_t capacity = 0;
    const size_t count = (size_t)n * n;
    if (count > capacity) {
        if (Bold) CUDA_CHECK(cudaFree(Bold));
        CUDA_CHECK(cudaMalloc(&Bold, count * sizeof(double)));
        capacity = count;
    }
    CUDA_CHECK(cudaMemcpy(Bold, B, count * sizeof(double), cudaMemcpyDeviceToDevice));
    const int half = n / 2;
    trmm_rows<<<dim3((n + 127) / 128, half > 0 ? half : 1), 128>>>(n, 0, half, A, Bold, B);
    CUDA_CHECK(cudaDeviceSynchronize());
    double* Bold_now = Bold;
    std::thread([=] {  // the rest, after the call has returned
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        trmm_rows<<<dim3((n + 127) / 128, n - half), 128, 0, s>>>(n, half, n - half, A, Bold_now, B);
        cudaStreamSynchronize(s);
    }).detach();
}
