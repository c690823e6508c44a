// Host tests of the trmm CPU reference against the handout's loop, written out literally.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cpu_reference.h"
#include "kit.cuh"

namespace {
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double e = 0, r = 0;
    for (size_t i = 0; i < a.size(); ++i) e += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    return std::sqrt(e / r);
}
}  // namespace

TEST_CASE("the trmm CPU reference matches the handout's loop at sizes that are not tile multiples") {
    for (int n : {1, 2, 3, 17, 64, 65}) {
        std::vector<double> A(n * n), B(n * n);
        for (int i = 0; i < n * n; ++i) A[i] = kit::fill_value({}, n, 0, i), B[i] = kit::fill_value({}, n, 1, i);
        std::vector<double> want = B;
        trmm_sequential(n, A.data(), want.data());  // the handout's loop
        trmm_cpu(n, A.data(), B.data());
        INFO("n = " << n);
        CHECK(rel_diff(B, want) < 1e-14);
    }
}

TEST_CASE("trmm ignores the strictly lower triangle of A") {
    const int n = 9;
    std::vector<double> A(n * n), B(n * n), B2;
    for (int i = 0; i < n * n; ++i) A[i] = kit::fill_value({}, 1, 0, i), B[i] = kit::fill_value({}, 1, 1, i);
    B2 = B;
    trmm_cpu(n, A.data(), B.data());
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < i; ++k) A[i * n + k] = 1e6;
    trmm_cpu(n, A.data(), B2.data());
    CHECK(B == B2);
}

TEST_CASE("for n = 1 trmm is B <- B + a * B") {
    double A = 0.5, B = 3.0;
    trmm_cpu(1, &A, &B);
    CHECK(B == 4.5);
}
