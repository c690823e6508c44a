// Host tests of the conv1d CPU reference against the handout's loop.
#include <catch2/catch.hpp>

#include <vector>

#include "cpu_reference.h"
#include "kit.cuh"

TEST_CASE("the conv1d CPU reference reads N as zero outside [0, n), also when the mask is wider than N") {
    for (auto [n, w] : {std::pair{1, 1}, {1, 7}, {5, 63}, {100, 7}, {257, 3}}) {
        std::vector<float> N(n), M(w), P(n), want(n);
        for (int i = 0; i < n; ++i) N[i] = (float)kit::fill_value({}, 3, 0, i);
        for (int j = 0; j < w; ++j) M[j] = (float)kit::fill_value({}, 3, 1, j);
        conv1d_cpu(n, w, N.data(), M.data(), P.data());
        conv1d_sequential(n, w, N.data(), M.data(), want.data());  // the handout's loop
        for (int i = 0; i < n; ++i) {
            INFO("n = " << n << ", w = " << w << ", i = " << i);
            CHECK(P[i] == want[i]);
        }
    }
}

TEST_CASE("a one-tap mask of 1 copies N") {
    std::vector<float> N = {1.5f, -2.25f, 3.0f}, P(3);
    float one = 1.0f;
    conv1d_cpu(3, 1, N.data(), &one, P.data());
    CHECK(P == N);
}
