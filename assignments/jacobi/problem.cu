// jacobi: the 3D Poisson problem by Jacobi iteration on one GPU (FP64), "radiator in a room".
//
//   int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f);
//
// On entry u and u_old both hold the starting field (walls included), f the source; the entry
// point sweeps until max_iter or until the norm of the change drops below tol (tol = 0: exactly
// max_iter sweeps), returns the number of sweeps and leaves the final field in u. The runner hands
// the count over as the one-element output "sweeps"; u_old is workspace and never compared.
//
// Checker side: the sequential loop for small n, the plain GPU sweep for n = 512 (both in
// jacobi_problem.cuh, shared with jacobi_2gpu). Napkin math: a sweep at n = 512 updates 1.3e8
// points; streaming 24 bytes per update (u_old and f in, u out) at 4.8 TB/s is 0.67 ms, so the
// bound is 200,000 MLUPS, and 100 sweeps take at least 67 ms.
#include "jacobi_problem.cuh"

#ifdef KIT_RUNNER
int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f);  // the student's entry point
#endif

struct Jacobi final : JacobiProblem {
    Jacobi() : JacobiProblem(1) {}
    const char* name() const override { return "jacobi"; }

#ifdef KIT_RUNNER
    void run_submission(const kit::Case& c, kit::Arrays& d) const override {
        double sweeps = jacobi((int)c.get("n"), (int)c.get("max_iter"), c.real("tol"), d.f64("u"), d.f64("u_old"), d.f64("f"));
        // The count goes over as an output. After a fault this copy fails too; settle() reports it.
        (void)cudaMemcpy(d.f64("sweeps"), &sweeps, sizeof sweeps, cudaMemcpyHostToDevice);
    }
#endif
};

KIT_REGISTER_PROBLEM(Jacobi);
