// A problem for the protocol tests: y = 2 x + 1 (FP64). The judge and the runner talk over host
// memory here (--memory host), so the wire, the clock, the secrets and the checks are tested on
// machines without a GPU; the "entry point" is a host function.
#include "kit.cuh"

#ifdef KIT_RUNNER
void scale(int n, const double* x, double* y);  // the "student's" entry point
#endif

struct Scale final : kit::Problem {
    const char* name() const override { return "scale"; }

    std::vector<kit::ArraySpec> arrays(const kit::Case& c) const override {
        size_t n = (size_t)c.get("n");
        return {{"x", kit::DType::f64, n, kit::Role::in}, {"y", kit::DType::f64, n, kit::Role::out}};
    }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& a) const override { scale((int)c.get("n"), a.f64("x"), a.f64("y")); }
#else
    void reference_cpu(const kit::Case& c, kit::Arrays& h) const override {
        // oom=1|2: the judge's allocation for the truth finds no memory left, as where a runner holds
        // the GPU's memory (1: a CUDA runtime call, through CUDA_CHECK; 2: the driver's, cuMemCreate).
        if (c.has("oom") && c.get("oom") == 1) CUDA_CHECK(cudaErrorMemoryAllocation);
        if (c.has("oom") && c.get("oom") == 2) throw kit::OutOfMemory("cuMemCreate: out of GPU memory");
        const double* x = h.f64("x");
        double* y = h.f64("y");
        for (long long i = 0; i < c.get("n"); ++i) y[i] = 2 * x[i] + 1;
    }
#endif
};

KIT_REGISTER_PROBLEM(Scale);
