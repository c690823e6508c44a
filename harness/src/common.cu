// common.cu: the harness machinery shared by the runner and the checker (see kit.cuh).
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "kit.cuh"

namespace kit {

// --------------------------------------------------------------------------------------------
// The problem linked into this binary.
static Problem* g_problem = nullptr;

ProblemRegistration::ProblemRegistration(Problem* p) { g_problem = p; }

Problem& problem() {
    if (!g_problem) {
        std::fprintf(stderr, "harness: no problem registered (KIT_REGISTER_PROBLEM missing)\n");
        std::exit(kExitHarnessError);
    }
    return *g_problem;
}

static void side_missing(const char* what) {
    std::fprintf(stderr, "harness: %s is not available in this binary\n", what);
    std::exit(kExitHarnessError);
}
void Problem::run_submission(const Case&, Arrays&) const { side_missing("run_submission"); }
void Problem::reference_cpu(const Case&, Arrays&) const { side_missing("reference_cpu"); }
void Problem::reference_library(const Case&, Arrays&, size_t) const { side_missing("reference_library"); }
void Problem::fill_custom(const Case&, uint64_t, size_t, Arrays&, bool) const { side_missing("fill_custom"); }

// --------------------------------------------------------------------------------------------
// Plans. One case per line: `case` or `timed`, then key=value tokens. Reserved keys: id, seed,
// rtol (the relative error allowed), reference, warmup, runs, gap_ms (between bursts of timed runs);
// every other key is a parameter of the problem (a number: Case::get reads integers, Case::real reals).
//   case  id=n17 seed=123 rtol=1e-10 reference=cpu n=17
//   timed id=graded seed=456 rtol=1e-10 reference=library warmup=2 runs=10 n=4096
Case parse_case(const std::string& line, const std::string& where) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind != "case" && kind != "timed") throw std::runtime_error(where + ": expected 'case' or 'timed', got '" + kind + "'");
    Case c;
    c.timed = kind == "timed";
    std::string tok;
    while (words >> tok) {
        size_t eq = tok.find('=');
        if (eq == std::string::npos) throw std::runtime_error(where + ": expected key=value, got '" + tok + "'");
        std::string key = tok.substr(0, eq), value = tok.substr(eq + 1);
        try {
            if (key == "id") c.id = value;
            else if (key == "seed") c.seed = std::stoull(value);
            else if (key == "rtol") c.tol = std::stod(value);
            else if (key == "reference") c.reference = value;
            else if (key == "warmup") c.warmup = std::stoi(value);
            else if (key == "runs") c.runs = std::stoi(value);
            else if (key == "gap_ms") c.gap_ms = std::stod(value);
            else c.params[key] = std::stod(value);
        } catch (const std::logic_error&) {
            throw std::runtime_error(where + ": bad value in '" + tok + "'");
        }
    }
    if (c.id.empty()) throw std::runtime_error(where + ": case without id");
    if (c.timed && c.runs < 1) throw std::runtime_error(where + ": timed case needs runs >= 1");
    if (!(c.gap_ms >= 0)) throw std::runtime_error(where + ": gap_ms must be 0 or more");
    return c;
}

std::vector<Case> read_plan(const std::string& path) {
    std::ifstream file;
    if (path != "-") file.open(path);
    std::istream& in = path == "-" ? std::cin : file;
    if (!in) throw std::runtime_error("cannot read plan file " + path);
    std::vector<Case> cases;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        std::istringstream words(line);
        std::string kind;
        if (!(words >> kind) || kind[0] == '#') continue;
        cases.push_back(parse_case(line, path + ":" + std::to_string(lineno)));
    }
    return cases;
}

// Every parameter, as " key=value" each.
static std::string params_line(const Case& c) {
    std::string s;
    char b[64];
    for (const auto& kv : c.params) {
        std::snprintf(b, sizeof b, "%.17g", kv.second);
        s += " " + kv.first + "=" + b;
    }
    return s;
}

std::string Problem::protected_key(const Case& c) const { return params_line(c); }

std::string public_line(const Case& c) { return "case id=" + c.id + params_line(c); }

// --------------------------------------------------------------------------------------------
// Arrays.
static int g_devices_in_use = 1;
int devices_in_use() { return g_devices_in_use; }
void note_device_in_use(int device) { g_devices_in_use = std::max(g_devices_in_use, device + 1); }

DeviceArrays::DeviceArrays(const std::vector<ArraySpec>& s) {
    specs = s;
    for (const auto& a : specs) {
        void* p = nullptr;
        note_device_in_use(a.device);
        CUDA_CHECK(cudaSetDevice(a.device));
        CUDA_CHECK(cudaMalloc(&p, alloc_bytes(a)));
        ptrs.push_back(p);
    }
    CUDA_CHECK(cudaSetDevice(0));
}
DeviceArrays::~DeviceArrays() {
    for (void* p : ptrs) cudaFree(p);
}

HostArrays::HostArrays(const std::vector<ArraySpec>& s, bool outputs_only) {
    specs = s;
    storage.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        if (outputs_only && !is_output(specs[i])) {
            ptrs.push_back(nullptr);
            continue;
        }
        storage[i].resize(alloc_bytes(specs[i]));
        ptrs.push_back(storage[i].data());
    }
}

// Array a of a case is random stream a of the case's seed: inputs differ from each other.
template <class T>
__global__ void fill_kernel(T* x, size_t count, Fill f, uint64_t seed, uint64_t stream) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (T)fill_value(f, seed, stream, i);
}

template <class T>
__global__ void poison_kernel(T* x, size_t count, T poison) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        x[i] = poison;
}

static unsigned grid_for(size_t count) { return (unsigned)std::min<size_t>((count + 255) / 256, 65535); }

void fill_inputs_device(const Case& c, uint64_t seed, Arrays& dev) {
    for (size_t a = 0; a < dev.specs.size(); ++a) {
        const ArraySpec& s = dev.specs[a];
        if (s.role == Role::out || s.count == 0) continue;
        CUDA_CHECK(cudaSetDevice(s.device));
        if (s.fill.kind == Fill::custom)
            problem().fill_custom(c, seed, a, dev, true);
        else if (s.dtype == DType::f64)
            fill_kernel<<<grid_for(s.count), 256>>>((double*)dev.ptrs[a], s.count, s.fill, seed, a);
        else
            fill_kernel<<<grid_for(s.count), 256>>>((float*)dev.ptrs[a], s.count, s.fill, seed, a);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaSetDevice(0));
}

void fill_inputs_host(const Case& c, uint64_t seed, Arrays& host) {
    for (size_t a = 0; a < host.specs.size(); ++a) {
        const ArraySpec& s = host.specs[a];
        if (s.role == Role::out) continue;
        if (s.fill.kind == Fill::custom) {
            problem().fill_custom(c, seed, a, host, false);
            continue;
        }
        for (size_t i = 0; i < s.count; ++i) {
            double v = fill_value(s.fill, seed, a, i);
            if (s.dtype == DType::f64) ((double*)host.ptrs[a])[i] = v;
            else ((float*)host.ptrs[a])[i] = (float)v;
        }
    }
}

void poison_outputs_host(Arrays& host) {
    for (size_t i = 0; i < host.specs.size(); ++i) {
        const ArraySpec& s = host.specs[i];
        if (s.role != Role::out) continue;
        for (size_t j = 0; j < s.count; ++j) {
            if (s.dtype == DType::f64) std::memcpy((char*)host.ptrs[i] + 8 * j, &kPoison64, 8);
            else std::memcpy((char*)host.ptrs[i] + 4 * j, &kPoison32, 4);
        }
    }
}

void poison_outputs_device(Arrays& dev) {
    for (size_t a = 0; a < dev.specs.size(); ++a) {
        const ArraySpec& s = dev.specs[a];
        if (s.role != Role::out || s.count == 0) continue;
        CUDA_CHECK(cudaSetDevice(s.device));
        if (s.dtype == DType::f64) {
            double p;
            std::memcpy(&p, &kPoison64, 8);
            poison_kernel<<<grid_for(s.count), 256>>>((double*)dev.ptrs[a], s.count, p);
        } else {
            float p;
            std::memcpy(&p, &kPoison32, 4);
            poison_kernel<<<grid_for(s.count), 256>>>((float*)dev.ptrs[a], s.count, p);
        }
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaSetDevice(0));
}

std::vector<size_t> probe_positions(uint64_t seed, size_t count) {
    std::vector<size_t> pos;
    if (count == 0) return pos;
    for (int j = 0; j < kProbeCount; ++j) pos.push_back(hash3(seed, 0x9B0BE, j) % count);
    return pos;
}

template <class T>
__global__ void gather_kernel(const T* x, const size_t* positions, size_t count, T* out) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < count; j += (size_t)gridDim.x * blockDim.x)
        out[j] = x[positions[j]];
}

void gather_async(const ArraySpec& s, const void* dev, const size_t* pos, size_t count, void* out) {
    if (s.dtype == DType::f64)
        gather_kernel<<<grid_for(count), 256>>>((const double*)dev, pos, count, (double*)out);
    else
        gather_kernel<<<grid_for(count), 256>>>((const float*)dev, pos, count, (float*)out);
    CUDA_CHECK(cudaGetLastError());
}

void copy_to_host(const ArraySpec& s, const void* dev, const std::vector<size_t>& positions, void* host) {
    const size_t esize = dtype_size(s.dtype);
    CUDA_CHECK(cudaSetDevice(s.device));
    if (positions.empty()) {
        CUDA_CHECK(cudaMemcpy(host, dev, s.count * esize, cudaMemcpyDeviceToHost));
    } else {
        const size_t count = positions.size();
        size_t* pos = nullptr;
        void* out = nullptr;
        CUDA_CHECK(cudaMalloc(&pos, count * sizeof(size_t)));
        CUDA_CHECK(cudaMalloc(&out, count * esize));
        CUDA_CHECK(cudaMemcpy(pos, positions.data(), count * sizeof(size_t), cudaMemcpyHostToDevice));
        gather_async(s, dev, pos, count, out);
        CUDA_CHECK(cudaMemcpy(host, out, count * esize, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(pos));
        CUDA_CHECK(cudaFree(out));
    }
    CUDA_CHECK(cudaSetDevice(0));
}

// --------------------------------------------------------------------------------------------
// Timing.
double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void pause_ms(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

// On every GPU in use; leaves device 0 current.
void flush_l2() {
    constexpr int kMaxDevices = 16;
    static void* buf[kMaxDevices] = {};
    static size_t bytes[kMaxDevices] = {};
    static int calls = 0;
    ++calls;
    for (int dev = 0; dev < std::min(devices_in_use(), kMaxDevices); ++dev) {
        CUDA_CHECK(cudaSetDevice(dev));
        if (!buf[dev]) {
            int l2 = 0;
            CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
            bytes[dev] = std::max<size_t>(2 * (size_t)l2, 8u << 20);  // twice the L2: every line is evicted
            CUDA_CHECK(cudaMalloc(&buf[dev], bytes[dev]));
        }
        CUDA_CHECK(cudaCtxResetPersistingL2Cache());
        CUDA_CHECK(cudaMemsetAsync(buf[dev], calls & 0xff, bytes[dev]));
    }
    CUDA_CHECK(cudaSetDevice(0));
}

DeviceFault settle() {
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaSuccess;
    for (int dev = devices_in_use() - 1; dev >= 0; --dev) {
        cudaError_t e = cudaSetDevice(dev);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (sync == cudaSuccess) sync = e;
    }
    if (sync != cudaSuccess) return {sync, false};
    return {launch, launch != cudaSuccess};
}

void settle_or_throw(const char* who) {
    if (DeviceFault f = settle())
        throw std::runtime_error(std::string(who) + " failed: " + cudaGetErrorString(f.err) + driver_says());
}

std::string driver_says(size_t limit) {
    static char buf[25600 + 1];  // the driver keeps at most 25,600 bytes of messages
    size_t size = sizeof buf;
    if (cudaLogsDumpToMemory(nullptr, buf, &size, 0) != cudaSuccess || size == 0) return "";
    // Lines "[time][tid][CUDA][E] text": the texts, latest last, joined with "; ", less those that
    // only repeat the error code ("Returning 700 (CUDA_ERROR_ILLEGAL_ADDRESS) from cuCtxSynchronize").
    std::string out;
    std::istringstream in(std::string(buf, std::min(size, sizeof buf - 1)));
    for (std::string line; std::getline(in, line);) {
        size_t end = line.rfind("] ");
        std::string text = end == std::string::npos ? line : line.substr(end + 2);
        if (!text.empty() && text.rfind("Returning ", 0) != 0) out = out.empty() ? text : out + "; " + text;
    }
    if (out.empty()) return "";
    return "; the driver says: " + (out.size() > limit ? "..." + out.substr(out.size() - limit) : out);
}

// --------------------------------------------------------------------------------------------
// JSON lines.
static std::string json_escape(const std::string& s) {
    std::string out;
    for (unsigned char ch : s) {
        if (ch == '"' || ch == '\\') { out += '\\'; out += (char)ch; }
        else if (ch == '\n') out += "\\n";
        else if (ch < 0x20 || ch >= 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", ch); out += b; }
        else out += (char)ch;
    }
    return out;
}

static std::string json_number(double v) {
    if (std::isnan(v)) return "\"nan\"";
    if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

JsonLines::JsonLines(const std::string& path) : f_(std::fopen(path.c_str(), "a")) {
    if (!f_) throw std::runtime_error("cannot write results file " + path);
}
JsonLines::JsonLines(int fd) : f_(fdopen(fd, "w")) {
    if (!f_) throw std::runtime_error("cannot write the results descriptor " + std::to_string(fd));
}
JsonLines::~JsonLines() { std::fclose(f_); }
JsonLines& JsonLines::begin() { line_ = "{"; return *this; }
JsonLines& JsonLines::field(const char* key, const std::string& value) {
    line_ += (line_.size() > 1 ? ", \"" : "\"") + std::string(key) + "\": \"" + json_escape(value) + "\"";
    return *this;
}
JsonLines& JsonLines::field(const char* key, double value) {
    line_ += (line_.size() > 1 ? ", \"" : "\"") + std::string(key) + "\": " + json_number(value);
    return *this;
}
JsonLines& JsonLines::field(const char* key, long long value) {
    line_ += (line_.size() > 1 ? ", \"" : "\"") + std::string(key) + "\": " + std::to_string(value);
    return *this;
}
JsonLines& JsonLines::field(const char* key, bool value) {
    line_ += (line_.size() > 1 ? ", \"" : "\"") + std::string(key) + "\": " + (value ? "true" : "false");
    return *this;
}
JsonLines& JsonLines::field(const char* key, const std::vector<double>& values) {
    line_ += (line_.size() > 1 ? ", \"" : "\"") + std::string(key) + "\": [";
    for (size_t i = 0; i < values.size(); ++i) line_ += (i ? ", " : "") + json_number(values[i]);
    line_ += "]";
    return *this;
}
void JsonLines::end() {
    line_ += "}\n";
    std::fputs(line_.c_str(), f_);
    std::fflush(f_);
}

void require_gpu() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::fprintf(stderr, "no CUDA GPU: %s\n", err != cudaSuccess ? cudaGetErrorString(err) : "no devices");
        std::exit(kExitNoGpu);
    }
    CUDA_CHECK(cudaSetDevice(0));
}

}  // namespace kit
