// serve.cu: the runner's side of the wire (see serve.h, wire.h).
#include <sstream>

#include <unistd.h>

#include "serve.h"
#include "shared_arrays.h"
#include "wire.h"

namespace kit {

namespace {

// Errors that mean a launch was refused whatever reported them.
bool is_launch_error(cudaError_t e) {
    switch (e) {
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidKernelImage:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorMissingConfiguration: return true;
    default: return false;
    }
}

}  // namespace

bool is_launch_fault(const DeviceFault& f) { return f.rejected || is_launch_error(f.err); }

namespace {

using wire::Kind;
using wire::Message;

std::vector<size_t> parse_sizes(const std::string& line) {
    std::vector<size_t> sizes;
    std::istringstream in(line);
    std::string tok;
    while (std::getline(in, tok, ',')) sizes.push_back(std::stoull(tok));
    return sizes;
}

[[noreturn]] void report_fault(wire::Channel& ch, DeviceFault f) {
    bool launch = is_launch_fault(f);
    try {
        ch.send(Kind::fault, std::string(launch ? "launch " : "runtime ") + cudaGetErrorName(f.err) + " " +
                                 cudaGetErrorString(f.err) + driver_says());
    } catch (const wire::ProtocolError&) {
    }
    std::exit(launch ? kExitLaunchError : kExitRuntimeError);
}

// One case: its arrays mapped, then calls until the judge ends the case.
void serve_case(wire::Channel& ch, wire::Doorbell* bell, Memory memory, const Message& begin, const Call& call) {
    size_t nl = begin.text.find('\n');
    if (nl == std::string::npos) throw wire::ProtocolError("a case without array sizes");
    Case c = parse_case(begin.text.substr(0, nl), "case");
    SharedArrays arrays(problem().arrays(c), memory, parse_sizes(begin.text.substr(nl + 1)), begin.fds);
    uint32_t last = bell->go.load();  // before "ready": the judge may ring the moment it reads it
    ch.send(Kind::ready, "");
    for (;;) {
        uint32_t n = wire::wait_for_go(bell, last);
        last = n;
        if (bell->command.load() == wire::kEndCase) break;
        call(c, arrays);
        if (memory == Memory::device)
            if (DeviceFault f = settle()) report_fault(ch, f);
        bell->done.store(n, std::memory_order_release);
    }
    if (memory == Memory::device) settle();
    // The arrays are unmapped here, before the judge frees them.
}

}  // namespace

int serve(int fd, const Call& call) {
    wire::Channel ch(fd);
    try {
        ch.send(Kind::hello, "runner");
        Message m;
        ch.receive(m, -1);
        if (m.kind != Kind::hello || m.fds.size() != 1) throw wire::ProtocolError("expected the judge's hello");
        wire::Doorbell* bell = wire::map_doorbell(m.fds[0]);
        close(m.fds[0]);
        Memory memory = memory_from_name(m.text.substr(m.text.find('=') + 1));
        if (memory == Memory::device) require_gpu();
        for (;;) {
            ch.receive(m, -1);
            if (m.kind == Kind::bye) return kExitOk;
            if (m.kind != Kind::begin) throw wire::ProtocolError("expected a case");
            serve_case(ch, bell, memory, m, call);
            ch.send(Kind::ended, "");
        }
    } catch (const wire::ProtocolError& e) {
        std::fprintf(stderr, "runner: %s\n", e.what());
        return kExitUsage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "runner: %s\n", e.what());
        return kExitHarnessError;
    }
}

}  // namespace kit
