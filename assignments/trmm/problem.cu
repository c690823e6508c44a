// trmm: triangular matrix update, B <- B + triu(A) * B, in place (FP64, row-major, n x n).
//
// The truth is the sequential loop of the handout:
//   for i, for j, for k = i..n-1:  B[i][j] += A[i][k] * B[k][j]
// Row i reads rows k >= i, which are not yet updated, so B_new = (I + triu(A)) * B_old.
//
// Checker side: trmm_cpu (the loop, reordered i-k-j so the inner loop streams rows; each element
// still sums its k terms in increasing order) for small n, cublasDtrmm on I + triu(A) for large n.
// Napkin math for the CPU loop: n^3/2 multiply-adds, ~0.5 s at n = 1025 on one core.
#include "kit.cuh"
#include "cpu_reference.h"

#ifndef KIT_RUNNER
#include "kit_library.cuh"
#endif

#ifndef KIT_RUNNER
// Host reference, also used by the C++ tests.
void trmm_cpu(int n, const double* A, double* B) {
    std::vector<double> old(B, B + (size_t)n * n);
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < n; ++i) {
        double* bi = B + (size_t)i * n;
        for (int k = i; k < n; ++k) {
            const double a = A[(size_t)i * n + k];
            const double* bk = old.data() + (size_t)k * n;
            for (int j = 0; j < n; ++j) bi[j] += a * bk[j];
        }
    }
}
#endif

#ifdef KIT_RUNNER
void trmm(int n, const double* A, double* B);  // the student's entry point
#else
// U <- A with 1 added to the diagonal: cuBLAS computes B <- U * B, and I + triu(A) is what we need.
__global__ void add_identity(double* U, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) U[(size_t)i * n + i] += 1.0;
}
#endif

struct Trmm final : kit::Problem {
    const char* name() const override { return "trmm"; }

    std::vector<kit::ArraySpec> arrays(const kit::Case& c) const override {
        size_t n = (size_t)c.get("n");
        return {{"A", kit::DType::f64, n * n, kit::Role::in}, {"B", kit::DType::f64, n * n, kit::Role::inout}};
    }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& d) const override {
        trmm((int)c.get("n"), d.f64("A"), d.f64("B"));
    }
#else
    void reference_cpu(const kit::Case& c, kit::Arrays& h) const override {
        trmm_cpu((int)c.get("n"), h.f64("A"), h.f64("B"));
    }

    // Row-major U seen column-major is U^T (lower), and row-major B is B^T, so
    // B_new^T = B^T * U^T is a right-side, lower, non-transposed DTRMM, written back into B.
    // The copy of A and the diagonal (one pass over A, ~3% of the DTRMM's time) are counted.
    void reference_library(const kit::Case& c, kit::Arrays& d, size_t) const override {
        int n = (int)c.get("n");
        size_t bytes = (size_t)n * n * sizeof(double);
        double* U = kit::scratch((size_t)n * n);
        CUDA_CHECK(cudaMemcpyAsync(U, d.f64("A"), bytes, cudaMemcpyDeviceToDevice));
        add_identity<<<(n + 255) / 256, 256>>>(U, n);
        CUDA_CHECK(cudaGetLastError());
        const double one = 1.0;
        double* B = d.f64("B");
        kit::cublas_check(cublasDtrmm(kit::cublas(), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                      CUBLAS_DIAG_NON_UNIT, n, n, &one, U, n, B, n, B, n),
                          "cublasDtrmm");
    }
    std::vector<std::string> libraries() const override { return {"cublasDtrmm"}; }
#endif
};

KIT_REGISTER_PROBLEM(Trmm);
