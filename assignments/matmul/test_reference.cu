// Host tests of the matmul CPU reference against the handout's triple loop.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cpu_reference.h"
#include "kit.cuh"

TEST_CASE("the matmul CPU reference matches the triple loop on shapes that are not tile multiples") {
    struct Shape { int m, n, k; };
    for (Shape s : {Shape{1, 1, 1}, Shape{17, 33, 65}, Shape{1, 7, 3}, Shape{5, 1, 9}}) {
        std::vector<double> A((size_t)s.m * s.k), B((size_t)s.k * s.n), C((size_t)s.m * s.n, NAN);
        for (size_t i = 0; i < A.size(); ++i) A[i] = kit::fill_value({}, 1, 0, i);
        for (size_t i = 0; i < B.size(); ++i) B[i] = kit::fill_value({}, 1, 1, i);
        std::vector<double> want(C.size(), NAN);
        matmul_cpu(s.m, s.n, s.k, A.data(), B.data(), C.data());
        matmul_sequential(s.m, s.n, s.k, A.data(), B.data(), want.data());  // the handout's loop
        for (int i = 0; i < s.m; ++i)
            for (int j = 0; j < s.n; ++j) {
                INFO(s.m << "x" << s.n << "x" << s.k << " C[" << i << "][" << j << "]");
                CHECK(C[i * s.n + j] == want[i * s.n + j]);
            }
    }
}

TEST_CASE("matmul overwrites C whatever it held before") {
    double A = 2, B = 3, C = NAN;
    matmul_cpu(1, 1, 1, &A, &B, &C);
    CHECK(C == 6);
}
