// shared_arrays.cu: the arrays a judge shares with its runner (see shared_arrays.h).
#include <cerrno>
#include <cstring>

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shared_arrays.h"

namespace kit {

const char* memory_name(Memory m) { return m == Memory::host ? "host" : "device"; }
Memory memory_from_name(const std::string& name) {
    if (name == "host") return Memory::host;
    if (name == "device") return Memory::device;
    throw std::runtime_error("unknown memory '" + name + "'");
}

namespace {

// The driver's virtual-memory calls, found through the runtime (no link against libcuda, so the
// kit's programs still start on machines without a driver, where the protocol tests run).
struct Driver {
    decltype(&::cuMemCreate) create;
    decltype(&::cuMemRelease) release;
    decltype(&::cuMemExportToShareableHandle) export_fd;
    decltype(&::cuMemImportFromShareableHandle) import_fd;
    decltype(&::cuMemAddressReserve) reserve;
    decltype(&::cuMemAddressFree) address_free;
    decltype(&::cuMemMap) map;
    decltype(&::cuMemUnmap) unmap;
    decltype(&::cuMemSetAccess) set_access;
    decltype(&::cuMemGetAllocationGranularity) granularity;
    decltype(&::cuDeviceCanAccessPeer) can_access_peer;
    decltype(&::cuDeviceGet) device_get;
};

template <class F>
void entry(const char* name, F& fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || !p) throw std::runtime_error(std::string("the driver has no ") + name);
    fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
    static Driver d = [] {
        Driver d{};
        entry("cuMemCreate", d.create);
        entry("cuMemRelease", d.release);
        entry("cuMemExportToShareableHandle", d.export_fd);
        entry("cuMemImportFromShareableHandle", d.import_fd);
        entry("cuMemAddressReserve", d.reserve);
        entry("cuMemAddressFree", d.address_free);
        entry("cuMemMap", d.map);
        entry("cuMemUnmap", d.unmap);
        entry("cuMemSetAccess", d.set_access);
        entry("cuMemGetAllocationGranularity", d.granularity);
        entry("cuDeviceCanAccessPeer", d.can_access_peer);
        entry("cuDeviceGet", d.device_get);
        return d;
    }();
    return d;
}

void check(CUresult r, const char* what) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(std::string(what) + ": out of GPU memory");
    if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + " failed (CUresult " + std::to_string((int)r) + ")");
}

CUmemAllocationProp device_prop(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

// Maps allocation `h` of `bytes` at a fresh address, readable and writable from `owner` and from every
// GPU in use that can reach it (jacobi_2gpu's halves read each other).
void* map_here(CUmemGenericAllocationHandle h, size_t bytes, int owner) {
    const Driver& d = driver();
    CUdeviceptr va = 0;
    check(d.reserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve");
    check(d.map(va, bytes, 0, h, 0), "cuMemMap");
    std::vector<CUmemAccessDesc> access;
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    CUdevice owner_handle;
    check(d.device_get(&owner_handle, owner), "cuDeviceGet");
    for (int dev = 0; dev < count; ++dev) {
        int ok = dev == owner;
        if (!ok) {
            CUdevice handle;
            check(d.device_get(&handle, dev), "cuDeviceGet");
            check(d.can_access_peer(&ok, handle, owner_handle), "cuDeviceCanAccessPeer");
        }
        if (!ok) continue;
        CUmemAccessDesc a{};
        a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a.location.id = dev;
        a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access.push_back(a);
    }
    check(d.set_access(va, bytes, access.data(), access.size()), "cuMemSetAccess");
    return reinterpret_cast<void*>(va);
}

void* map_host(int fd, size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot map an array: ") + strerror(errno));
    return p;
}

}  // namespace

SharedArrays::SharedArrays(const std::vector<ArraySpec>& s, Memory m) : memory(m) {
    specs = s;
    for (const ArraySpec& a : specs) {
        note_device_in_use(a.device);
        size_t want = alloc_bytes(a);
        if (memory == Memory::host) {
            // Sealed at its size, as the doorbell is: the runner maps it and keeps its descriptor.
            int fd = memfd_create("kit-array", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0 || ftruncate(fd, (off_t)want) != 0 ||
                fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
                throw std::runtime_error(std::string("memfd: ") + strerror(errno));
            fds.push_back(fd);
            bytes.push_back(want);
            ptrs.push_back(map_host(fd, want));
            continue;
        }
        const Driver& d = driver();
        CUDA_CHECK(cudaSetDevice(a.device));
        CUmemAllocationProp prop = device_prop(a.device);
        size_t gran = 0;
        check(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
        size_t size = (want + gran - 1) / gran * gran;
        CUmemGenericAllocationHandle h;
        check(d.create(&h, size, &prop, 0), "cuMemCreate");
        int fd = -1;
        check(d.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
        ptrs.push_back(map_here(h, size, a.device));
        check(d.release(h), "cuMemRelease");  // the mapping keeps the memory
        fds.push_back(fd);
        bytes.push_back(size);
    }
    if (memory == Memory::device) CUDA_CHECK(cudaSetDevice(0));
}

SharedArrays::SharedArrays(const std::vector<ArraySpec>& s, Memory m, const std::vector<size_t>& b,
                           const std::vector<int>& f)
    : memory(m), fds(f), bytes(b) {
    specs = s;
    if (fds.size() != specs.size() || bytes.size() != specs.size())
        throw std::runtime_error("the judge handed over " + std::to_string(fds.size()) + " arrays, the case has " +
                                 std::to_string(specs.size()));
    for (size_t i = 0; i < specs.size(); ++i) {
        note_device_in_use(specs[i].device);
        if (bytes[i] < alloc_bytes(specs[i])) throw std::runtime_error("an array handed over is too small");
        if (memory == Memory::host) {
            ptrs.push_back(map_host(fds[i], bytes[i]));
            continue;
        }
        const Driver& d = driver();
        CUDA_CHECK(cudaSetDevice(specs[i].device));
        CUmemGenericAllocationHandle h;
        check(d.import_fd(&h, reinterpret_cast<void*>((uintptr_t)fds[i]), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              "cuMemImportFromShareableHandle");
        ptrs.push_back(map_here(h, bytes[i], specs[i].device));
        check(d.release(h), "cuMemRelease");
    }
    if (memory == Memory::device) CUDA_CHECK(cudaSetDevice(0));
    for (int fd : fds) close(fd);  // mapped: nothing more to hand on
    fds.clear();
}

SharedArrays::~SharedArrays() {
    for (size_t i = 0; i < ptrs.size(); ++i) {
        if (memory == Memory::host) {
            munmap(ptrs[i], bytes[i]);
        } else {
            const Driver& d = driver();
            CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptrs[i]);
            d.unmap(va, bytes[i]);
            d.address_free(va, bytes[i]);
        }
    }
    for (int fd : fds) close(fd);
}

}  // namespace kit
