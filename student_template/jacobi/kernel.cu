/*
jacobi: the 3D Poisson problem -Laplace(u) = f on the cube [-1, 1]^3, solved by Jacobi sweeps
(FP64), "radiator in a room".

The grid is n x n x n points, walls included, spacing h = 2 / (n - 1); point (i, j, k) is at
(x, y, z) = (-1 + i h, -1 + j h, -1 + k h) and u[i][j][k] is u[(i * n + j) * n + k]. One sweep
updates every interior point (1 <= i, j, k <= n - 2) from the previous field u_old:

    u[i][j][k] = (u_old[i-1][j][k] + u_old[i+1][j][k] + u_old[i][j-1][k] + u_old[i][j+1][k]
                  + u_old[i][j][k-1] + u_old[i][j][k+1] + h*h * f[i][j][k]) / 6

then u and u_old trade places. The walls never change.

    int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f);

- On entry u and u_old both hold the starting field, walls included; f holds the source. All
  three are device pointers to n^3 doubles.
- Sweep until max_iter sweeps, or until the norm of the last sweep's change,
  sqrt(sum over interior points of (u - u_old)^2), is below tol. tol = 0 means exactly max_iter
  sweeps (no norm needed). Return the number of sweeps done.
- On return the final field must be in u (after an odd number of pointer swaps it is in the
  other array: copy it over). u_old may hold anything.

Graded: n = 512 with 100 sweeps (tol = 0), and n = 512 with a tol that stops it after some
tens of sweeps: the count must be the reference's (one off is accepted only where the norm at
that sweep is within rounding of tol). The metric is MLUPS, (n - 2)^3 x sweeps / time. Napkin
math: every update must read u_old and f and write u, 24 bytes, so at ~4 TB/s of DRAM the bound
is ~170,000 MLUPS; everything else (the six neighbours) should come from caches.

The grader calls jacobi(...), then cudaDeviceSynchronize(), and checks u and the count.
Everything jacobi does is timed, allocations included.
*/

#include "cuda_check.cuh"

// TODO: one sweep: each thread updates one interior point (or, faster, walks a column of points
// in i, keeping the i-1, i, i+1 values in registers). Index with long long: n^3 at n = 512 is
// 1.3e8, and (i * n + j) * n + k overflows int at n = 1291.
__global__ void sweep_kernel(int n, const double* u_old, const double* f, double* u, double h2) {
    // TODO
}

int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f) {
    // TODO 1: a 3D grid over the (n - 2)^3 interior points, e.g. blocks of 32 x 8 x 1 threads
    //         with x along k (consecutive addresses: coalesced loads).
    // TODO 2: for each sweep: launch sweep_kernel reading the current field and writing the other
    //         array, CUDA_CHECK(cudaGetLastError()), then swap the two pointers.
    // TODO 3: with tol > 0, compute the norm on the GPU in the same kernel (a block reduction,
    //         then one atomicAdd per block into a device double set to 0 before the sweep), copy
    //         that one double back after each sweep, and stop when sqrt(norm2) < tol.
    // TODO 4: if the final field is in u_old, copy it to u (cudaMemcpy, device to device).
    (void)n;
    (void)max_iter;
    (void)tol;
    (void)u;
    (void)u_old;
    (void)f;
    return 0;
}
