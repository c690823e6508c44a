/*
conv1d: the 1D convolution of the lecture, in FP32. N is the input (n floats), M the mask
(w floats, w odd, at most 255), P the output (n floats):

    for (i = 0; i < n; i++) {
        float sum = 0.0f;
        for (j = 0; j < w; j++) {
            int k = i - w / 2 + j;             // the mask is centred on i
            if (k >= 0 && k < n)               // N reads as 0 outside [0, n): the "ghost cells"
                sum += N[k] * M[j];
        }
        P[i] = sum;
    }

That is 2 n w FLOP. N, M and P are device pointers, already allocated; N and M are filled,
P holds garbage (NaN) until you write it, so every one of its n elements must be written.
The sizes are arbitrary: n = 1 is one of the cases, and so is n smaller than w.

The graded size is n = 2^26 with w = 7 and with w = 63: 256 MiB read and 256 MiB written,
so reading every N value once from DRAM (and reusing it from shared memory or registers
for the w outputs that need it) is what makes it fast.

The grader calls conv1d(n, w, N, M, P), then cudaDeviceSynchronize(), and checks P.
Everything conv1d does is timed.
*/

#include "cuda_check.cuh"

// TODO 3 (later): the mask is small, read-only and read by every thread in the same order,
// which is what constant memory is for:
//     __constant__ float c_M[255];
// and, in conv1d, before the launch (M is a device pointer, so device to device):
//     CUDA_CHECK(cudaMemcpyToSymbol(c_M, M, w * sizeof(float), 0, cudaMemcpyDeviceToDevice));

// TODO: compute P[i] for the output(s) of this thread.
__global__ void conv1d_kernel(int n, int w, const float* N, const float* M, float* P) {
    // TODO 1: start with one thread per output, everything from global memory:
    // i = blockIdx.x * blockDim.x + threadIdx.x, return if i >= n (the grid is rounded up),
    // then the j loop above, skipping the N indices outside [0, n).
    //
    // TODO 2: then tile it. Each block computes a tile of consecutive outputs and first
    // loads the N values they need into shared memory: the tile itself plus w / 2 "halo"
    // cells on each side, storing 0 for the ones outside [0, n). A __syncthreads() after
    // the loads, and the j loop reads only shared memory. Each N value then comes from DRAM
    // about once instead of w times.
}

void conv1d(int n, int w, const float* N, const float* M, float* P) {
    // TODO: pick a block size (at most 1024 threads) and enough blocks to cover all n
    // outputs: (n + threads - 1) / threads. Launch conv1d_kernel<<<blocks, threads>>>(...),
    // then check for launch errors with CUDA_CHECK(cudaGetLastError()).
    (void)n;
    (void)w;
    (void)N;
    (void)M;
    (void)P;
}
