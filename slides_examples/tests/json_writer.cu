// Host-only test driver for common.cuh's JSON writer (no GPU needed): writes one family's
// results, with every status and awkward characters, to argv[1]. test_slides_report.py checks
// that report.py reads it.
#include "../common.cuh"

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    static const slides::Version versions[] = {
        {"first \"quoted\" version"},
        {"second version"},
        {"third version"},
        {"an aside", false, "incorrect on Volta+ (race)"},
        {"two GPUs"},
    };
    slides::Result r[5];
    r[0].status = "passed", r[0].size = "n=4096", r[0].unit = "GFLOPS", r[0].ms = 12.5, r[0].rate = 11000, r[0].runs = 10, r[0].error = 1e-7;
    r[1].status = "failed", r[1].error = INFINITY, r[1].note = "check failed on n=131: relative error inf > 1e-12";
    r[2].status = "passed", r[2].size = "n=4096", r[2].unit = "GFLOPS", r[2].ms = 0.0, r[2].rate = INFINITY, r[2].runs = 1, r[2].error = 0;
    r[3].status = "not run";
    r[4].status = "skipped", r[4].note = "skipped: needs two GPUs (found 1)";
    slides::Meta m{"matmul", "fp32", "NVIDIA H200", 9, 0, 132, 1, 12080, 13000, "2026-01-02 03:04 UTC", false};
    slides::write_results_json(argv[1], m, versions, r, 5);
    return 0;
}
