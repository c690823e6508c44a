// expect: incorrect
// The halo loads clamp the N index to [0, n - 1], repeating the edge values where the lecture's ghost cells are 0, so the w / 2 outputs at each end of P are wrong (n = 1 with w = 7 already is).
// expect-message: exceeds the tolerance
#include "cuda_check.cuh"

#define TILE 256   // outputs per block, one per thread
#define MAX_W 255  // widest mask: the shared tile holds TILE + MAX_W - 1 inputs

__constant__ float c_M[MAX_W];

// Tiled with halo cells: block b loads N[b * TILE - w/2, b * TILE + TILE + w/2) into shared
// memory, then each thread sums its w products from there. Every index is clamped into
// [0, n - 1] before the load ("clamp to edge", as image filters often pad), so nothing is read
// out of bounds, but the ghost cells hold N[0] and N[n - 1] instead of zeros.
__global__ void conv1d_tiled(int n, int w, const float* __restrict__ N, float* __restrict__ P) {
    __shared__ float N_ds[TILE + MAX_W - 1];
    const int r = w / 2;
    const int start = blockIdx.x * TILE;
    for (int k = threadIdx.x; k < TILE + 2 * r; k += TILE) {
        int idx = start - r + k;
        idx = min(max(idx, 0), n - 1);  // the bug: should load 0 when idx is outside [0, n)
        N_ds[k] = N[idx];
    }
    __syncthreads();

    const int i = start + threadIdx.x;
    if (i >= n) return;
    float Pvalue = 0.0f;
    for (int j = 0; j < w; ++j) Pvalue += N_ds[threadIdx.x + j] * c_M[j];
    P[i] = Pvalue;
}

void conv1d(int n, int w, const float* N, const float* M, float* P) {
    CUDA_CHECK(cudaMemcpyToSymbol(c_M, M, w * sizeof(float), 0, cudaMemcpyDeviceToDevice));
    const int blocks = (n + TILE - 1) / TILE;
    conv1d_tiled<<<blocks, TILE>>>(n, w, N, P);
    CUDA_CHECK(cudaGetLastError());
}
