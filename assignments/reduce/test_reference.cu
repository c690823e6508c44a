// Host tests of the reduce CPU reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cpu_reference.h"
#include "kit.cuh"

TEST_CASE("the reduce CPU reference sums whole numbers exactly") {
    const long long n = 100003;
    kit::Fill ints{kit::Fill::integers, -1000, 1000};
    std::vector<double> x(n);
    long long exact = 0;
    for (long long i = 0; i < n; ++i) {
        x[i] = kit::fill_value(ints, 7, 0, i);
        exact += (long long)x[i];
    }
    CHECK(reduce_cpu(n, x.data()) == (double)exact);
}

TEST_CASE("the reduce CPU reference is more accurate than a plain FP64 loop") {
    // 1 followed by many values below half an ulp of 1: a plain loop loses every one of them.
    const long long n = 1000001;
    std::vector<double> x(n, 1e-17);
    x[0] = 1.0;
    double plain = reduce_sequential(n, x.data());  // the handout's loop
    CHECK(plain == 1.0);
    CHECK(reduce_cpu(n, x.data()) - 1.0 == Approx(1e-11).epsilon(1e-3));
}

TEST_CASE("the sum of one element is that element") {
    double x = 0.375;
    CHECK(reduce_cpu(1, &x) == 0.375);
}
