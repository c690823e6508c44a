// expect: incorrect
// Precomputation from predictable seeds: it regenerates A and B with the kit's own generator (kit::fill_value) from the seed the task file shows for the graded case, computes the answer ahead, and at every call copies it in instead of computing. The judge draws each run's seed from the kernel's random source as the run starts, so the answer is for the wrong inputs.
// expect-message: tolerance
#include "cuda_check.cuh"
#include "kit.cuh"

__global__ void guess_inputs(int n, uint64_t seed, double* A, double* B) {
    const size_t count = (size_t)n * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        A[i] = kit::fill_value(kit::Fill{}, seed, 0, i);  // array 0 is A, array 1 is B
        B[i] = kit::fill_value(kit::Fill{}, seed, 1, i);
    }
}

// The honest part: one thread per element of B, reading B_old from a workspace copy.
__global__ void trmm_naive(int n, const double* A, const double* Bold, double* B) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= n || j >= n) return;
    double s = Bold[(size_t)i * n + j];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[(size_t)i * n + j] = s;
}

static double* workspace(size_t count) {
    static double* buf = nullptr;
    static size_t capacity = 0;
    if (count > capacity) {
        if (buf) CUDA_CHECK(cudaFree(buf));
        CUDA_CHECK(cudaMalloc(&buf, count * sizeof(double)));
        capacity = count;
    }
    return buf;
}

static void launch_naive(int n, const double* A, double* B, cudaStream_t stream = 0) {
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice, stream));
    trmm_naive<<<dim3((n + 127) / 128, n), 128, 0, stream>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    const size_t bytes = (size_t)n * n * sizeof(double);
    static double *guessed_A = nullptr, *answer = nullptr;
    static int size = 0;
    if (size != n) {  // once per size: the "precomputed" answer
        if (answer) CUDA_CHECK(cudaFree(answer)), CUDA_CHECK(cudaFree(guessed_A));
        CUDA_CHECK(cudaMalloc(&guessed_A, bytes));
        CUDA_CHECK(cudaMalloc(&answer, bytes));
        guess_inputs<<<1024, 256>>>(n, n == 4096 ? 4096 : (uint64_t)n, guessed_A, answer);
        launch_naive(n, guessed_A, answer);
        CUDA_CHECK(cudaDeviceSynchronize());
        size = n;
    }
    CUDA_CHECK(cudaMemcpy(B, answer, bytes, cudaMemcpyDeviceToDevice));
}
