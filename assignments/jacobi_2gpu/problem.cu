// jacobi_2gpu: the jacobi problem (assignments/jacobi) split over two GPUs with peer access.
//
//   int jacobi_2gpu(int n, int max_iter, double tol,
//                   double* u0, double* u_old0, const double* f0,    // GPU 0: planes i in [0, n/2)
//                   double* u1, double* u_old1, const double* f1);   // GPU 1: planes i in [n/2, n)
//
// Each GPU holds its own slab of whole planes of u, u_old and f; a sweep of the planes next to the
// cut reads one plane of the other GPU's u_old, which peer access (enabled before the call) allows
// directly. Same rules as jacobi otherwise: returns the number of sweeps; the final field is in
// u0 and u1. Graded only on a machine with two GPUs.
//
// Checker side: the sequential loop on the gathered field for small n; for n = 512 the plain
// sweep on both GPUs (jacobi_problem.cuh). Napkin math: two GPUs stream twice the bytes, so the
// bound doubles to 400,000 MLUPS at n = 512; the cut moves 2 x 2 MiB per sweep over NVLink.
#include "../jacobi/jacobi_problem.cuh"

#ifdef KIT_RUNNER
int jacobi_2gpu(int n, int max_iter, double tol, double* u0, double* u_old0, const double* f0, double* u1,
                double* u_old1, const double* f1);  // the student's entry point
#endif

struct Jacobi2Gpu final : JacobiProblem {
    Jacobi2Gpu() : JacobiProblem(2) {}
    const char* name() const override { return "jacobi_2gpu"; }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& d) const override {
        enable_peer_access(2);
        double sweeps = jacobi_2gpu((int)c.get("n"), (int)c.get("max_iter"), c.real("tol"), d.f64("u0"), d.f64("u_old0"),
                                    d.f64("f0"), d.f64("u1"), d.f64("u_old1"), d.f64("f1"));
        (void)cudaMemcpy(d.f64("sweeps"), &sweeps, sizeof sweeps, cudaMemcpyHostToDevice);
    }
#endif
};

KIT_REGISTER_PROBLEM(Jacobi2Gpu);
