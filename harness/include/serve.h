// serve.h: the runner's side of the wire (wire.h), shared by the student's runner and the checker's
// library server.
#pragma once

#include <functional>

#include "kit.cuh"

namespace kit {

// Calls the code under test once on a case's arrays (the entry point, or a library route).
using Call = std::function<void(const Case&, Arrays&)>;

// Answers the judge on the connected socket `fd` until it says bye: maps each case's arrays, calls
// `call` every time the doorbell rings for it, drains the device, answers "done". A CUDA error in a
// call is reported to the judge and ends the process (the context is lost). Returns the exit code.
int serve(int fd, const Call& call);

// A fault that means a launch was refused (nothing ran), not a fault while running.
bool is_launch_fault(const DeviceFault& f);

}  // namespace kit
