// reduce: the sum of a large FP64 array, s = x[0] + ... + x[n-1], into one double on the device.
//
// Inputs are uniform in [0, 1) (a positive sum, so the relative error means something), or, in the
// case with integers=1, whole numbers in [-1000, 1000], whose sum is exact in any order.
// Checker side: reduce_cpu (compensated summation) for small n; cub::DeviceReduce::Sum, the
// baseline, for the graded n. Napkin math: n = 2^28 is 2 GiB read once, ~0.45 ms at 4.8 TB/s.
#include "kit.cuh"
#include "cpu_reference.h"

#ifndef KIT_RUNNER
#include <cmath>

#include <cub/device/device_reduce.cuh>

#include "kit_library.cuh"

// Neumaier's compensated sum: the error stays near one rounding whatever n, on any host.
double reduce_cpu(long long n, const double* x) {
    double s = 0, c = 0;
    for (long long i = 0; i < n; ++i) {
        double t = s + x[i];
        c += std::fabs(s) >= std::fabs(x[i]) ? (s - t) + x[i] : (x[i] - t) + s;
        s = t;
    }
    return s + c;
}
#else
void reduce_sum(long long n, const double* x, double* sum);  // the student's entry point
#endif

struct Reduce final : kit::Problem {
    const char* name() const override { return "reduce"; }

    std::vector<kit::ArraySpec> arrays(const kit::Case& c) const override {
        kit::Fill fill;
        fill.lo = 0.0;
        fill.hi = 1.0;
        if (c.params.count("integers") && c.get("integers")) fill = kit::Fill{kit::Fill::integers, -1000, 1000};
        return {{"x", kit::DType::f64, (size_t)c.get("n"), kit::Role::in, fill},
                {"sum", kit::DType::f64, 1, kit::Role::out}};
    }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& d) const override {
        reduce_sum(c.get("n"), d.f64("x"), d.f64("sum"));
    }
#else
    void reference_cpu(const kit::Case& c, kit::Arrays& h) const override {
        *h.f64("sum") = reduce_cpu(c.get("n"), h.f64("x"));
    }

    // CUB sizes its temporary storage in a first call; it is kept for the timed calls.
    void reference_library(const kit::Case& c, kit::Arrays& d, size_t) const override {
        size_t bytes = 0;
        const long long n = c.get("n");
        CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, d.f64("x"), d.f64("sum"), n));
        void* temp = kit::scratch((bytes + sizeof(double) - 1) / sizeof(double));
        CUDA_CHECK(cub::DeviceReduce::Sum(temp, bytes, d.f64("x"), d.f64("sum"), n));
    }
    std::vector<std::string> libraries() const override { return {"cub::DeviceReduce::Sum"}; }
#endif
};

KIT_REGISTER_PROBLEM(Reduce);
