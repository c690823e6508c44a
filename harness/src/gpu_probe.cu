// gpu_probe.cu: opens every GPU and runs one kernel on each; exit 0 when all answered.
//
// Built and linked as the runner is (the same runtime libraries), it tells the batch grader two
// things before any student code runs: which libraries a runner loads (the jail binds exactly
// those), and whether the GPU works inside the jail at all (if not, nothing is graded).
#include "kit.cuh"

__global__ void answer(int* out) { *out = 42; }

int main() {
    kit::require_gpu();  // exits with kExitNoGpu and a message where there is none
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    for (int d = 0; d < count; ++d) {
        CUDA_CHECK(cudaSetDevice(d));
        int* dev = nullptr;
        int host = 0;
        CUDA_CHECK(cudaMalloc(&dev, sizeof(int)));
        answer<<<1, 1>>>(dev);
        CUDA_CHECK(cudaMemcpy(&host, dev, sizeof(int), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(dev));
        if (host != 42) {
            std::fprintf(stderr, "gpu_probe: GPU %d computed %d instead of 42\n", d, host);
            return kit::kExitHarnessError;
        }
    }
    std::printf("gpu_probe: %d GPU(s) answered\n", count);
    return kit::kExitOk;
}
