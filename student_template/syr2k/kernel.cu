/*
syr2k: C += 0.5 (B A^T + A B^T) on the strict upper triangle of C, FP64.

A and B are n x n x n tensors, row-major, so A[k] (A + k * n * n) is one row of an n x n^2
matrix; C is n x n row-major. All three are device pointers, already allocated and filled.
The answer is defined by this sequential loop:

    for (k = 0; k < n; k++)
      for (l = k + 1; l < n; l++)
        for (i = 0; i < n; i++)
          for (j = 0; j < n; j++)
            C[k][l] += 0.5 * (A[l][i][j] * B[k][i][j] + A[k][i][j] * B[l][i][j]);

So each C[k][l] with k < l gains half of two dot products of length n^2:
A[l] . B[k] + A[k] . B[l]. Elements with k >= l (the diagonal and the lower triangle) are
not part of the answer and must keep their values bit for bit; the grader checks them.
That is 2 n^3 (n-1) FLOP, 8.6e9 at n = 256, over 2 x 134 MB of inputs.

The grader calls syr2k(n, A, B, C), then cudaDeviceSynchronize(), and checks C.
*/

#include "cuda_check.cuh"

// TODO: add 0.5 * (A[l] . B[k] + A[k] . B[l]) to C[k][l] for every k < l.
__global__ void syr2k_kernel(int n, const double* A, const double* B, double* C) {
    // TODO: work out which element(s) C[k][l] this thread computes from blockIdx/threadIdx.
    // Only k < l may be written: skip the diagonal and the lower triangle (and anything
    // outside the n x n matrix) without touching them.
    //
    // Hint: the inner dimension is long. At n = 256 each output sums n^2 = 65,536 index
    // pairs (i, j), but there are only 32,640 outputs, a few hundred per SM. One thread per
    // output leaves the GPU mostly idle; splitting the sum over several threads or blocks
    // and combining the pieces (shared memory, or atomicAdd on a double) gives it more to do.
}

void syr2k(int n, const double* A, const double* B, double* C) {
    // TODO 1: pick a block size (at most 1024 threads) and a grid that covers all the
    // outputs k < l, including the ragged edge when n is not a multiple of the block size.
    // n = 1 has no k < l pair at all.
    //
    // TODO 2: launch syr2k_kernel<<<grid, block>>>(n, A, B, C), then check for launch
    // errors with CUDA_CHECK(cudaGetLastError()).
    (void)n;
    (void)A;
    (void)B;
    (void)C;
}
