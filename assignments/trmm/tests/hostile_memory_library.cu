// expect: forbidden_call
// A library loaded from memory: the program copies a shared library into a memfd and dlopen()s it through /proc/self/fd, so the code it runs comes from no file of the system. Here the library is the C math library, which every run has, standing in for one the jail does not have (cuBLAS's bytes carried in the object, or copied from a folder outside the jail's reach): the judge looked for libraries by file name, and "/memfd:k" named none it forbids. Code mapped from memory, from a deleted file or from a folder the program can write is now refused, whatever its name.
// expect-message: from memory
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_check.cuh"

// The honest part: one thread per element of B, reading B_old from a workspace copy.
__global__ void trmm_naive(int n, const double* A, const double* Bold, double* B) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= n || j >= n) return;
    double s = Bold[(size_t)i * n + j];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[(size_t)i * n + j] = s;
}

static double* workspace(size_t count) {
    static double* buf = nullptr;
    static size_t capacity = 0;
    if (count > capacity) {
        if (buf) CUDA_CHECK(cudaFree(buf));
        CUDA_CHECK(cudaMalloc(&buf, count * sizeof(double)));
        capacity = count;
    }
    return buf;
}

// The file the C math library was loaded from.
static std::string math_library() {
    Dl_info info{};
    double (*f)(double) = std::cos;
    return dladdr(reinterpret_cast<void*>(f), &info) && info.dli_fname ? info.dli_fname : "";
}

// The library copied into a memfd and loaded from there, once; its descriptor stays open.
static void load_from_memory() {
    static bool done = false;
    if (done) return;
    done = true;
    int in = open(math_library().c_str(), O_RDONLY | O_CLOEXEC);
    int fd = memfd_create("k", 0);
    if (in < 0 || fd < 0) return;
    std::vector<char> buf(1 << 20);
    ssize_t n;
    while ((n = read(in, buf.data(), buf.size())) > 0)
        if (write(fd, buf.data(), (size_t)n) != n) return;
    close(in);
    char self[64];
    std::snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (void* h = dlopen(self, RTLD_NOW | RTLD_LOCAL)) {
        auto sqrt_from_memory = reinterpret_cast<double (*)(double)>(dlsym(h, "sqrt"));
        if (sqrt_from_memory) (void)sqrt_from_memory(2.0);
    }
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    load_from_memory();
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
