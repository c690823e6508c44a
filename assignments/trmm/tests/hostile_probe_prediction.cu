// expect: incorrect
// Probe prediction: once past its first call at the graded size (the correctness case), it computes only the 4096 elements it predicts the grader will compare, with the kit's own probe function and a guessed seed, and leaves the rest. The judge draws the positions after the run, so most of what it reads was never computed.
// expect-message: timed run
#include <vector>

#include "cuda_check.cuh"
#include "kit.cuh"

__global__ void trmm_at(int n, const size_t* positions, int count, const double* A, const double* Bold, double* B) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= count) return;
    const size_t e = positions[p];
    const int i = (int)(e / n), j = (int)(e % n);
    double s = Bold[e];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[e] = s;
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
    static int calls_at_4096 = 0;
    if (n != 4096 || calls_at_4096++ == 0) {  // correctness cases: honest
        if (n > 0) launch_naive(n, A, B);
        return;
    }
    const size_t count = (size_t)n * n;
    std::vector<size_t> guess = kit::probe_positions(4096 + calls_at_4096, count);  // the predicted probe
    static size_t* positions = nullptr;
    if (!positions) CUDA_CHECK(cudaMalloc(&positions, kit::kProbeCount * sizeof(size_t)));
    CUDA_CHECK(cudaMemcpy(positions, guess.data(), guess.size() * sizeof(size_t), cudaMemcpyHostToDevice));
    double* Bold = workspace(count);
    CUDA_CHECK(cudaMemcpy(Bold, B, count * sizeof(double), cudaMemcpyDeviceToDevice));
    trmm_at<<<(kit::kProbeCount + 127) / 128, 128>>>(n, positions, kit::kProbeCount, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
