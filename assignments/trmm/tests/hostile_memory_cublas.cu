// expect: forbidden_call
// cuBLAS under another name: the program copies libcublasLt and libcublas into two memfds named "k" and "l" and dlopen()s them through /proc/self/fd, the first (whose SONAME is libcublasLt.so.N) before the second, so that the second's DT_NEEDED is met by the one already loaded. File and function names are built at run time (as in hostile_dlopen_cublas.cu), so the build's scan sees none, and the judge, which looked for libraries by file name, saw "/memfd:k" and "/memfd:l". Graded on an H100 outside the jail: correct at cuBLAS's rate, 36,738 GFLOPS. Code mapped from memory is now refused whatever its name. In a batch's jail there is no cuBLAS file to copy, and the honest kernel is graded, slowly.
// expect-message: from memory
// expect-batch: correct
// expect-performance-below: 0.5
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// U <- U + I (U holds A, row-major; cuBLAS sees it as the lower triangle of A^T).
__global__ void add_identity(double* U, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) U[(size_t)i * n + i] += 1.0;
}

static double* workspace(size_t count, int which) {
    static double* buf[2] = {nullptr, nullptr};
    static size_t capacity[2] = {0, 0};
    if (count > capacity[which]) {
        if (buf[which]) CUDA_CHECK(cudaFree(buf[which]));
        CUDA_CHECK(cudaMalloc(&buf[which], count * sizeof(double)));
        capacity[which] = count;
    }
    return buf[which];
}

// Words spelled backwards, turned round here: the object's strings name no library or function.
static std::string turn(const char* s) {
    const std::string t(s);
    return std::string(t.rbegin(), t.rend());
}

// `path` copied into a memfd called `tag` and loaded from there; null if anything fails.
static void* load_anonymously(const std::string& path, const char* tag) {
    int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return nullptr;
    int fd = memfd_create(tag, 0);
    if (fd < 0) {
        close(in);
        return nullptr;
    }
    std::vector<char> buf(1 << 24);
    ssize_t n;
    bool ok = true;
    while ((n = read(in, buf.data(), buf.size())) > 0)
        if (write(fd, buf.data(), (size_t)n) != n) ok = false;
    close(in);
    if (!ok || n < 0) {
        close(fd);
        return nullptr;
    }
    char self[64];
    std::snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    // The descriptor stays open: the loader knows an object by the path it was opened with, and a
    // second "/proc/self/fd/N" with a reused N would be taken for the first library.
    return dlopen(self, RTLD_NOW | RTLD_GLOBAL);
}

// The file in the folders the loader would search whose name starts with `prefix` (newest version last).
static std::string find_file(const std::string& prefix) {
    std::vector<std::string> dirs;
    if (const char* p = std::getenv("LD_LIBRARY_PATH")) {
        std::string s(p);
        for (size_t a = 0, b; a <= s.size(); a = b + 1) {
            b = s.find(':', a);
            if (b == std::string::npos) b = s.size();
            if (b > a) dirs.push_back(s.substr(a, b - a));
        }
    }
    for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib",
                          "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"})
        dirs.push_back(d);
    for (const std::string& d : dirs) {
        std::string best;
        if (DIR* dir = opendir(d.c_str())) {
            while (dirent* e = readdir(dir)) {
                std::string name = e->d_name;
                // libcublas.so.N (not libcublasLt when the prefix is libcublas): a dot right after the prefix
                if (name.compare(0, prefix.size(), prefix) == 0 && name.size() > prefix.size() + 4 &&
                    name.compare(prefix.size(), 4, ".so.") == 0 && name > best)
                    best = name;
            }
            closedir(dir);
        }
        if (!best.empty()) return d + "/" + best;
    }
    return "";
}

typedef int (*Create)(void**);
typedef int (*Trmm)(void*, int, int, int, int, int, int, const double*, const double*, int, const double*, int, double*,
                    int);

struct Blas {
    void* handle = nullptr;
    Trmm trmm = nullptr;
};

static const Blas& blas() {
    static Blas b = [] {
        Blas b;
        const std::string lib = turn("salbuc");  // "cublas"
        const std::string lt = find_file("lib" + lib + "Lt"), main = find_file("lib" + lib);
        if (lt.empty() || main.empty()) return b;
        if (!load_anonymously(lt, "k")) return b;            // SONAME libcublasLt.so.N now loaded
        void* h = load_anonymously(main, "l");
        if (!h) return b;
        Create create = (Create)dlsym(h, (lib + turn("2v_etaerC")).c_str());     // cublasCreate_v2
        b.trmm = (Trmm)dlsym(h, (lib + turn("2v_mmrtD")).c_str());               // cublasDtrmm_v2
        if (!create || !b.trmm || create(&b.handle) != 0) b.trmm = nullptr;
        return b;
    }();
    return b;
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    const Blas& lib = blas();
    const size_t count = (size_t)n * n, bytes = count * sizeof(double);
    double* W = workspace(count, 0);
    if (lib.trmm) {
        // The kit's own route 1: B_new^T = B^T (I + triu(A))^T, a right-side lower DTRMM, out of place.
        double* C = workspace(count, 1);
        CUDA_CHECK(cudaMemcpyAsync(W, A, bytes, cudaMemcpyDeviceToDevice));
        add_identity<<<(n + 255) / 256, 256>>>(W, n);
        const double one = 1.0;
        // side right = 1, fill lower = 0, op N = 0, diag non-unit = 0
        if (lib.trmm(lib.handle, 1, 0, 0, 0, n, n, &one, W, n, B, n, C, n) == 0) {
            CUDA_CHECK(cudaMemcpyAsync(B, C, bytes, cudaMemcpyDeviceToDevice));
            return;
        }
    }
    CUDA_CHECK(cudaMemcpyAsync(W, B, bytes, cudaMemcpyDeviceToDevice));
    trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, W, B);
    CUDA_CHECK(cudaGetLastError());
}
