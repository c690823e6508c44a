// shared_arrays.h: a case's arrays, allocated by the judge and mapped into the runner.
//
// On the GPU they are driver allocations exported as file descriptors (cuMemCreate with POSIX
// file-descriptor handles), passed over the wire's socket and mapped by the runner: this works
// across the jail's PID and IPC namespaces, where legacy CUDA IPC handles do not. The judge fills
// the inputs, poisons the outputs and reads the outputs itself, in its own process.
// Host memory (a memfd per array) stands in for the GPU in the kit's own protocol tests, which run
// on machines without one.
#pragma once

#include <memory>

#include "kit.cuh"

namespace kit {

enum class Memory { device, host };
const char* memory_name(Memory m);
Memory memory_from_name(const std::string& name);

struct SharedArrays : Arrays {
    // Judge side: the arrays of `specs`, made in `memory`; `fds` hands them over.
    SharedArrays(const std::vector<ArraySpec>& specs, Memory memory);
    // Runner side: the judge's arrays mapped from `fds`, of `bytes` each (the judge's rounded sizes).
    SharedArrays(const std::vector<ArraySpec>& specs, Memory memory, const std::vector<size_t>& bytes,
                 const std::vector<int>& fds);
    ~SharedArrays();
    SharedArrays(const SharedArrays&) = delete;
    SharedArrays& operator=(const SharedArrays&) = delete;

    Memory memory;
    std::vector<int> fds;       // one per array; closed with the arrays
    std::vector<size_t> bytes;  // each mapping's size (a multiple of the allocation granularity)
};

}  // namespace kit
