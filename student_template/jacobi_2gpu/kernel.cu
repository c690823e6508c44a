/*
jacobi_2gpu: the jacobi sweeps (see the jacobi assignment for the problem, the set-up and the
rules) split over two GPUs with peer access. Graded only on a machine with two GPUs.

    int jacobi_2gpu(int n, int max_iter, double tol,
                    double* u0, double* u_old0, const double* f0,    // on GPU 0: planes i in [0, n/2)
                    double* u1, double* u_old1, const double* f1);   // on GPU 1: planes i in [n/2, n)

Each GPU holds a slab of whole planes i of u, u_old and f: element (i, j, k) with i < n/2 is
u0[(i * n + j) * n + k], and with i >= n/2 it is u1[((i - n/2) * n + j) * n + k]. Both u and
u_old hold the starting field on entry; on return the final field must be in u0 and u1.

Peer access between the two GPUs is enabled before the call, so a kernel running on GPU 0 may
read u_old1 (the plane just past the cut) directly, and GPU 1 may read u_old0.

Napkin math: each GPU streams half the bytes, so two GPUs can come close to twice the MLUPS of
one; the cut costs one plane (n^2 doubles, 2 MiB at n = 512) read across the link per GPU per
sweep.

The grader calls jacobi_2gpu(...), then synchronizes both GPUs, and checks u0, u1 and the count.
Everything jacobi_2gpu does is timed, on both GPUs.
*/

#include "cuda_check.cuh"

// TODO: the sweep kernel of your jacobi, given the first and last plane to update and a way to
// find plane i in either slab (pointer to u0/u_old0/f0 when i < n/2, else the GPU 1 arrays).

int jacobi_2gpu(int n, int max_iter, double tol, double* u0, double* u_old0, const double* f0, double* u1,
                double* u_old1, const double* f1) {
    // TODO 1: for each sweep, cudaSetDevice(0) and launch over interior planes [1, n/2), then
    //         cudaSetDevice(1) and launch over [n/2, n - 1): both GPUs work at the same time.
    // TODO 2: before a GPU starts sweep s + 1 it needs the other GPU's sweep s to be finished
    //         (it reads the plane across the cut): an event per GPU and cudaStreamWaitEvent, or
    //         cudaDeviceSynchronize on both.
    // TODO 3: with tol > 0, one norm per GPU, added on the host after each sweep.
    // TODO 4: swap the pointers of both slabs after each sweep; at the end make sure the field is
    //         in u0 and u1; leave GPU 0 as the current device.
    (void)n;
    (void)max_iter;
    (void)tol;
    (void)u0;
    (void)u_old0;
    (void)f0;
    (void)u1;
    (void)u_old1;
    (void)f1;
    return 0;
}
