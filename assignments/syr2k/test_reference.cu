// Host tests of the syr2k CPU reference against the handout's loop, written out literally.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cpu_reference.h"
#include "kit.cuh"

namespace {
struct Inputs {
    std::vector<double> A, B, C;
    explicit Inputs(int n) : A((size_t)n * n * n), B(A.size()), C((size_t)n * n) {
        for (size_t i = 0; i < A.size(); ++i) A[i] = kit::fill_value({}, n, 0, i), B[i] = kit::fill_value({}, n, 1, i);
        for (size_t i = 0; i < C.size(); ++i) C[i] = kit::fill_value({}, n, 2, i);
    }
};
}  // namespace

TEST_CASE("the syr2k CPU reference matches the handout's loop bit for bit") {
    for (int n : {1, 2, 3, 17}) {
        Inputs x(n);
        std::vector<double> want = x.C;
        syr2k_sequential(n, x.A.data(), x.B.data(), want.data());  // the handout's loop
        syr2k_cpu(n, x.A.data(), x.B.data(), x.C.data());
        INFO("n = " << n);
        CHECK(x.C == want);
    }
}

TEST_CASE("syr2k leaves the diagonal and the lower triangle of C untouched") {
    const int n = 9;
    Inputs x(n);
    std::vector<double> before = x.C;
    syr2k_cpu(n, x.A.data(), x.B.data(), x.C.data());
    for (int k = 0; k < n; ++k)
        for (int l = 0; l < n; ++l) {
            INFO("C[" << k << "][" << l << "]");
            if (k >= l) CHECK(x.C[k * n + l] == before[k * n + l]);
            else CHECK(x.C[k * n + l] != before[k * n + l]);
        }
}
