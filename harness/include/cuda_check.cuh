// cuda_check.cuh: the kit's one error-checking macro, for the harness and for students.
//
//   CUDA_CHECK(cudaMalloc(&p, bytes));
//   my_kernel<<<grid, block>>>(...);
//   CUDA_CHECK(cudaGetLastError());        // launch errors (bad grid/block, too much shared memory)
//
// On failure it prints the CUDA error, the expression, the file and the line, and exits with
// status 1. The grader reads that exit as a runtime error in the case that was running.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

// Where a program sets it, called with a failed check's error and expression before anything is
// printed; it may throw instead of letting the program exit (the kit's judge does, for running out of
// memory: in a grading that is the student's program holding the GPU's memory, not the kit failing).
inline void (*cuda_check_hook)(cudaError_t err, const char* expr) = nullptr;

inline void cuda_check(cudaError_t err, const char* expr, const char* file, int line) {
    if (err == cudaSuccess) return;
    if (cuda_check_hook) cuda_check_hook(err, expr);
    std::fprintf(stderr, "CUDA error %s (%s) at %s:%d: %s\n", cudaGetErrorName(err),
                 cudaGetErrorString(err), file, line, expr);
    std::exit(1);
}

#define CUDA_CHECK(expr) cuda_check((expr), #expr, __FILE__, __LINE__)
