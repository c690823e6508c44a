// matmul: C = A * B (FP64, row-major), A m x k, B k x n, any sizes: the lecture's tiled example.
//
// Checker side: matmul_cpu (i-p-j order so the inner loop streams rows of B and C; each C[i][j]
// still sums its k products in increasing order) for small shapes, cublasDgemm for large ones.
// Napkin math: 4096^3 is 2 m n k = 1.4e11 FLOP over 3 x 134 MB: compute bound.
#include "kit.cuh"
#include "cpu_reference.h"

#ifndef KIT_RUNNER
#include "kit_library.cuh"

void matmul_cpu(int m, int n, int k, const double* A, const double* B, double* C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; ++i) {
        double* ci = C + (size_t)i * n;
        for (int j = 0; j < n; ++j) ci[j] = 0.0;
        for (int p = 0; p < k; ++p) {
            const double a = A[(size_t)i * k + p];
            const double* bp = B + (size_t)p * n;
            for (int j = 0; j < n; ++j) ci[j] += a * bp[j];
        }
    }
}
#else
void matmul(int m, int n, int k, const double* A, const double* B, double* C);  // the student's entry point
#endif

struct Matmul final : kit::Problem {
    const char* name() const override { return "matmul"; }

    std::vector<kit::ArraySpec> arrays(const kit::Case& c) const override {
        size_t m = (size_t)c.get("m"), n = (size_t)c.get("n"), k = (size_t)c.get("k");
        return {{"A", kit::DType::f64, m * k, kit::Role::in},
                {"B", kit::DType::f64, k * n, kit::Role::in},
                {"C", kit::DType::f64, m * n, kit::Role::out}};
    }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& d) const override {
        matmul((int)c.get("m"), (int)c.get("n"), (int)c.get("k"), d.f64("A"), d.f64("B"), d.f64("C"));
    }
#else
    void reference_cpu(const kit::Case& c, kit::Arrays& h) const override {
        matmul_cpu((int)c.get("m"), (int)c.get("n"), (int)c.get("k"), h.f64("A"), h.f64("B"), h.f64("C"));
    }

    // Row-major C = A B is, column-major, C^T = B^T A^T: the same arrays with A and B swapped.
    void reference_library(const kit::Case& c, kit::Arrays& d, size_t) const override {
        const int m = (int)c.get("m"), n = (int)c.get("n"), k = (int)c.get("k");
        const double one = 1.0, zero = 0.0;
        kit::cublas_check(cublasDgemm(kit::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d.f64("B"), n,
                                      d.f64("A"), k, &zero, d.f64("C"), n),
                          "cublasDgemm");
    }
    std::vector<std::string> libraries() const override { return {"cublasDgemm"}; }
#endif
};

KIT_REGISTER_PROBLEM(Matmul);
