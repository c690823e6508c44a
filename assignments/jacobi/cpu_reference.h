// The jacobi set-up ("radiator in a room") and CPU reference, shared by the checkers of jacobi and
// jacobi_2gpu and by the C++ tests, and the sequential loop that defines the answer (quoted by the
// handout).
//
// Grid point (i, j, k) is at (x, y, z) = (-1 + i h, -1 + j h, -1 + k h), h = 2 / (n - 1), and
// u[i][j][k] is u[(i * n + j) * n + k]. The set-up is decided in integers (x <= -3/8 is
// 16 i <= 5 (n - 1), and so on), so the host and the GPU agree exactly on the radiator's faces.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kit.cuh"

__host__ __device__ inline bool jacobi_is_wall(long long n, long long i, long long j, long long k) {
    return i == 0 || j == 0 || k == 0 || i == n - 1 || j == n - 1 || k == n - 1;
}

// The starting field: 20 on every wall except 0 on the wall y = -1 (j = 0); the interior starts at
// 0, plus, where the case asks for it (noise > 0), a value in [0, noise) drawn from the seed, so
// that no two runs start from the same field.
__host__ __device__ inline double jacobi_start(long long n, long long i, long long j, long long k, double noise,
                                               uint64_t seed) {
    if (jacobi_is_wall(n, i, j, k)) return j == 0 ? 0.0 : 20.0;
    return noise > 0 ? noise * kit::uniform01(seed, 0, (uint64_t)((i * n + j) * n + k)) : 0.0;
}

// The source: f = 200 in the radiator x in [-1, -3/8], y in [-1, -1/2], z in [-2/3, 0]; 0 elsewhere.
__host__ __device__ inline double jacobi_source(long long n, long long i, long long j, long long k) {
    const long long m = n - 1;
    bool radiator = 16 * i <= 5 * m && 4 * j <= m && 6 * k >= m && 2 * k <= m;
    return radiator && !jacobi_is_wall(n, i, j, k) ? 200.0 : 0.0;
}

// The norm at the sweep where the count is decided may differ from the truth's by rounding: the
// sum of up to 1e8 squares in another order (relative 1e-7 covers it), and fields that differ by a
// few ulps of |u| <= ~20 per point (~1e-14 each, 1e-13 sqrt(points) in the norm). A norm this close
// to tol may land on either side of it.
inline bool jacobi_norm_within_rounding(double norm, double tol, long long n) {
    double points = (double)(n - 2) * (n - 2) * (n - 2);
    return std::fabs(norm - tol) <= 1e-7 * tol + 1e-13 * std::sqrt(points);
}

// handout: begin
// Sweeps until max_iter, or until the norm of the change drops below tol (tol = 0: exactly
// max_iter sweeps). Returns the number of sweeps; the final field is in u. u_old is workspace.
inline int jacobi_sequential(int n, int max_iter, double tol, double* u, double* u_old, const double* f,
                             std::vector<double>* norms = nullptr) {
    const double h = 2.0 / (n - 1);
    const long long nn = (long long)n * n;
    for (int sweep = 1; sweep <= max_iter; sweep++) {
        std::memcpy(u_old, u, sizeof(double) * nn * n);
        double d = 0;
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                for (int k = 1; k < n - 1; k++) {
                    long long p = (i * (long long)n + j) * n + k;
                    u[p] = (1.0 / 6.0) * (u_old[p - nn] + u_old[p + nn] + u_old[p - n] + u_old[p + n] +
                                          u_old[p - 1] + u_old[p + 1] + h * h * f[p]);
                    d += (u[p] - u_old[p]) * (u[p] - u_old[p]);
                }
        if (norms) norms->push_back(std::sqrt(d));
        if (tol > 0 && std::sqrt(d) < tol) return sweep;
    }
    return max_iter;
}
// handout: end
