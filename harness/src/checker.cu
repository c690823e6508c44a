// checker.cu: the assignment's program without student code.
//
//   checker judge PLAN --socket FD --results FD [options]   time and check a runner (judge.cu)
//   checker serve SOCKET_FD                                 serve the library routes to a judge, as a
//                                                           runner serves the student's code: the
//                                                           baseline is timed by the same clock
#include <cstring>

#include "judge.h"
#include "serve.h"

namespace {

using namespace kit;

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

__global__ void empty_call() {}

int usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s judge PLAN --socket FD --results FD [--memory device|host] [--baseline [--route NAME]]\n"
                 "                 [--secret S] [--record-seeds] [--forbid LIB,LIB,...] [--cpus CPU,CPU,...]\n"
                 "       %s serve SOCKET_FD\n",
                 argv0, argv0);
    return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "serve" && argc == 3) {
            Problem& p = problem();
            return serve(std::atoi(argv[2]), [&](const Case& c, Arrays& a) {
                long long route = c.has("route") ? c.get("route") : 0;
                if (route < 0) empty_call<<<1, 1>>>();  // the judge's round trip alone
                else p.reference_library(c, a, (size_t)route);
            });
        }
        if (mode != "judge" || argc < 3) return usage(argv[0]);
        JudgeOptions o;
        o.plan = argv[2];
        for (int i = 3; i < argc; ++i) {
            std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
                return argv[++i];
            };
            if (a == "--socket") o.socket = std::stoi(value());
            else if (a == "--results") o.results = std::stoi(value());
            else if (a == "--memory") o.memory = memory_from_name(value());
            else if (a == "--baseline") o.baseline = true;
            else if (a == "--route") o.route = value();
            else if (a == "--secret") o.fixed_secret = true, o.secret = std::stoull(value());
            else if (a == "--record-seeds") o.record_seeds = true;
            else if (a == "--forbid") o.forbidden = split(value(), ',');
            else if (a == "--cpus")
                for (const std::string& c : split(value(), ',')) o.cpus.push_back(std::stoi(c));
            else return usage(argv[0]);
        }
        if (o.socket < 0 || o.results < 0) return usage(argv[0]);
        return judge(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "checker: %s\n", e.what());
        return kExitHarnessError;
    }
}
