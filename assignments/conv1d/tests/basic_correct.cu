// expect: correct
// Nothing is wrong: the lecture's basic kernel, one thread per output reading N and M straight from global memory, correct at every size and slow, since each N value is fetched w times through the caches.
#include "cuda_check.cuh"

#define THREADS 256

// One thread per output: P[i] = sum_j N[i - w/2 + j] * M[j], skipping the ghost cells
// outside [0, n). The grid is rounded up to whole blocks, so the threads past n do nothing.
// At w = 63 each output costs 63 loads of N and 63 of M; the L1 and L2 absorb most of them,
// but the load instructions alone outnumber the FMAs two to one.
__global__ void convolution_1D_basic_kernel(const float* N, const float* M, float* P, int w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float Pvalue = 0;
    int N_start_point = i - w / 2;
    for (int j = 0; j < w; j++) {
        if (N_start_point + j >= 0 && N_start_point + j < n) Pvalue += N[N_start_point + j] * M[j];
    }
    P[i] = Pvalue;
}

void conv1d(int n, int w, const float* N, const float* M, float* P) {
    const int blocks = (n + THREADS - 1) / THREADS;
    convolution_1D_basic_kernel<<<blocks, THREADS>>>(N, M, P, w, n);
    CUDA_CHECK(cudaGetLastError());
}
