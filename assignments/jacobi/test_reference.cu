// Host tests of the jacobi set-up and CPU reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cpu_reference.h"

namespace {

struct Field {
    int n;
    std::vector<double> u, u_old, f;
    explicit Field(int n_, double noise = 0, uint64_t seed = 1) : n(n_), u((size_t)n_ * n_ * n_), u_old(u.size()), f(u.size()) {
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j)
                for (int k = 0; k < n; ++k) {
                    size_t p = ((size_t)i * n + j) * n + k;
                    u[p] = u_old[p] = jacobi_start(n, i, j, k, noise, seed);
                    f[p] = jacobi_source(n, i, j, k);
                }
    }
    double at(int i, int j, int k) const { return u[((size_t)i * n + j) * n + k]; }
    int run(int max_iter, double tol, std::vector<double>* norms = nullptr) {
        return jacobi_sequential(n, max_iter, tol, u.data(), u_old.data(), f.data(), norms);
    }
};

}  // namespace

TEST_CASE("the walls are 20 except the wall y = -1, which is 0, and the interior starts at 0") {
    Field g(6);
    CHECK(g.at(0, 3, 3) == 20.0);
    CHECK(g.at(5, 3, 3) == 20.0);
    CHECK(g.at(3, 5, 3) == 20.0);
    CHECK(g.at(3, 3, 0) == 20.0);
    CHECK(g.at(3, 0, 3) == 0.0);
    CHECK(g.at(2, 2, 2) == 0.0);
}

TEST_CASE("the radiator is the box x in [-1,-3/8], y in [-1,-1/2], z in [-2/3,0], faces included") {
    for (int n : {9, 10, 17, 65}) {
        const double h = 2.0 / (n - 1);
        for (int i = 1; i < n - 1; ++i)
            for (int j = 1; j < n - 1; ++j)
                for (int k = 1; k < n - 1; ++k) {
                    // The same box in real coordinates, with a margin far below h for the faces.
                    double x = -1 + i * h, y = -1 + j * h, z = -1 + k * h, e = 1e-12;
                    bool inside = x <= -3.0 / 8 + e && y <= -0.5 + e && z >= -2.0 / 3 - e && z <= 0 + e;
                    INFO("n=" << n << " i=" << i << " j=" << j << " k=" << k);
                    REQUIRE(jacobi_source(n, i, j, k) == (inside ? 200.0 : 0.0));
                }
    }
    // At n = 9 (h = 1/4) the faces land on grid points: x = -1/2, y = -1/2 and z = 0 are inside.
    CHECK(jacobi_source(9, 2, 2, 4) == 200.0);
    CHECK(jacobi_source(9, 3, 2, 4) == 0.0);
}

TEST_CASE("one sweep of the smallest grid gives its one interior point the mean of its walls") {
    Field g(3);
    CHECK(g.run(1, 0) == 1);
    CHECK(g.at(1, 1, 1) == Approx(100.0 / 6.0).epsilon(1e-15));  // five walls at 20, one at 0, no source
    CHECK(g.at(0, 1, 1) == 20.0);
}

TEST_CASE("tol = 0 runs exactly max_iter sweeps and leaves the field after the last one in u") {
    Field a(10), b(10);
    CHECK(a.run(7, 0) == 7);
    for (int s = 0; s < 7; ++s) b.run(1, 0);  // seven single sweeps, each starting from u
    CHECK(a.u == b.u);
}

TEST_CASE("with tol the loop stops at the first sweep whose norm is below it") {
    Field g(10);
    std::vector<double> norms;
    int sweeps = g.run(1000, 1e-3, &norms);
    REQUIRE(sweeps == (int)norms.size());
    CHECK(norms.back() < 1e-3);
    CHECK(norms[sweeps - 2] >= 1e-3);
    Field capped(10);
    CHECK(capped.run(30, 1e-6) == 30);  // not reached: max_iter
}

TEST_CASE("the field converges toward the walls' values and heats up near the radiator") {
    Field g(17);
    g.run(3000, 1e-10);
    CHECK(g.at(8, 15, 8) > g.at(8, 1, 8));  // near the 20-degree ceiling vs near the cold wall
    CHECK(g.at(4, 4, 6) > g.at(12, 4, 6) + 1.0);  // the radiator's side of the room is warmer than its mirror
}

TEST_CASE("noise changes the interior start but never the walls, and depends on the seed") {
    Field a(8, 1e-3, 1), b(8, 1e-3, 2);
    CHECK(a.at(3, 3, 3) != b.at(3, 3, 3));
    CHECK(a.at(3, 3, 3) >= 0.0);
    CHECK(a.at(3, 3, 3) < 1e-3);
    CHECK(a.at(0, 3, 3) == 20.0);
    CHECK(a.at(3, 0, 3) == 0.0);
}

TEST_CASE("a norm within rounding of tol may decide the count either way, one further off may not") {
    CHECK(jacobi_norm_within_rounding(150.0 * (1 + 5e-8), 150.0, 512));
    CHECK_FALSE(jacobi_norm_within_rounding(150.0 * (1 + 1e-5), 150.0, 512));
    CHECK_FALSE(jacobi_norm_within_rounding(149.6, 150.0, 512));
}
