// expect: forbidden_call
// The runner split in two before it starts: a constructor forks, and the child leaves the runner's session (setsid) and goes on into the kit's main, says hello to the judge and serves it honestly, while the runner itself stays behind holding code loaded from memory (the C math library copied into a memfd, standing in for a library the jail does not have, which the runner would use for the child through shared GPU memory). The judge looked at the process that said hello and at its session only: the runner was in neither. It now looks at every process that runs the runner's program too.
// expect-message: from memory
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

// Before main: the child goes on as the runner the judge sees; the runner itself waits for it,
// holding the library, and ends as it ends.
__attribute__((constructor)) static void split() {
    const pid_t child = fork();
    if (child < 0) return;   // no fork: one process, graded as it is
    if (child == 0) {
        setsid();
        return;
    }
    load_from_memory();
    int status = 0;
    waitpid(child, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
