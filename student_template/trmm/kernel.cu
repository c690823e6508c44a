/*
trmm: B <- B + triu(A) * B, FP64, row-major n x n matrices, updated in place.

A and B are device pointers, already allocated and filled. The answer is defined by this
sequential loop:

    for (i = 0; i < n; i++)
      for (j = 0; j < n; j++)
        for (k = i; k < n; k++)
          B[i][j] += A[i][k] * B[k][j];

Row i only reads rows k >= i, which the loop has not changed yet, so in matrix terms
B_new = B_old + U * B_old, where U is the upper triangle of A (diagonal included).
That is n^2 (n+1) FLOP, half of a general matrix multiply.

The grader calls trmm(n, A, B), then cudaDeviceSynchronize(), and checks B.
*/

#include "cuda_check.cuh"

// TODO: compute B[i][j] = B_old[i][j] + sum over k >= i of A[i][k] * B_old[k][j].
// Read B_old from the workspace copy (Bold), write the result to B.
__global__ void trmm_kernel(int n, const double* A, const double* Bold, double* B) {
    // TODO: work out which element(s) of B this thread computes from blockIdx/threadIdx,
    // skip the ones outside the n x n matrix, and sum only over k >= i.
}

void trmm(int n, const double* A, double* B) {
    // TODO 1: copy B into a workspace first, e.g.
    //     double* Bold;
    //     CUDA_CHECK(cudaMallocAsync(&Bold, (size_t)n * n * sizeof(double), 0));
    //     CUDA_CHECK(cudaMemcpyAsync(Bold, B, ..., cudaMemcpyDeviceToDevice, 0));
    // Why: thousands of threads run at once, so while one thread writes row i of B,
    // another may still be reading it as row k of B_old. Reading from an untouched copy
    // makes the order irrelevant.
    //
    // TODO 2: pick a block size (at most 1024 threads) and a grid that covers all n x n
    // outputs, including the ragged edge when n is not a multiple of the block size.
    //
    // TODO 3: launch trmm_kernel<<<grid, block>>>(n, A, Bold, B), then check for launch
    // errors with CUDA_CHECK(cudaGetLastError()).
    //
    // TODO 4: release the workspace, e.g. CUDA_CHECK(cudaFreeAsync(Bold, 0)).
    (void)n;
    (void)A;
    (void)B;
}
