#!/bin/sh
# The kit's tests, set up from nothing: `make test` runs this.
#   1. C++ host tests (Catch2): the harness's helpers and every CPU reference.
#   2. Python tests (pytest): the grader, from recorded fixtures; then the GPU tests, which grade
#      the references, the skeletons and the known-wrong submissions on the local GPU, and are
#      reported as skipped, by name and with the reason, where there is none.
# Installs what it needs (Debian's catch2, chromium and bubblewrap, pytest and the handouts' Jinja2, markdown and
# pypdf in a virtual environment) or names what is missing.
set -eu
cd "$(dirname "$0")/.."

command -v nvcc >/dev/null 2>&1 || { echo "test: nvcc not found: install the CUDA Toolkit and put its bin/ on PATH" >&2; exit 2; }

# install PACKAGE COMMAND_OR_FILE: Debian's PACKAGE, when COMMAND_OR_FILE is missing and this runs as root.
# apt-get's sources are refreshed at most once a run; once they could not be reached (no network),
# the packages after are not tried: each try would wait seconds for the same answer.
apt_sources=""  # "fresh" once apt-get update worked, "unreachable" once it failed
install() {
    if ! command -v "$2" >/dev/null 2>&1 && [ ! -f "$2" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
            && [ "$apt_sources" != unreachable ]; then
        echo "test: installing Debian's $1"
        if ! apt-get install -y -q "$1" >/dev/null 2>&1 && [ -z "$apt_sources" ]; then
            if apt-get update -q >/dev/null 2>&1; then
                apt_sources=fresh
                apt-get install -y -q "$1" >/dev/null 2>&1 || true
            else
                apt_sources=unreachable
            fi
        fi
    fi
    command -v "$2" >/dev/null 2>&1 || [ -f "$2" ]
}
# missing PACKAGE WHAT: in CI a missing package fails the run; elsewhere its tests are reported as skipped.
missing() {
    if [ "${CI:-}" = true ]; then
        echo "test: $1 is missing and could not be installed (apt-get install $1)" >&2; exit 2
    fi
    echo "SKIPPED: $2: $1 is not installed and could not be installed here (apt-get install $1)"
}

# --- The harness and Catch2's C++ host tests ---------------------------------------------------
# Every assignment's harness (for sm_90) and the C++ host tests (the harness's helpers and every CPU
# reference), built and run in the background while the rest is set up (apt-get, the virtual
# environment); their output is shown, and their failure ends the run before pytest starts. The
# harness is built here once: the test processes below, side by side, would otherwise each make the
# same files at the same time.
cpp_targets=harness
if install catch2 /usr/include/catch2/catch.hpp; then
    cpp_targets="harness test-cpp"
else
    missing catch2 "C++ host tests"
fi
mkdir -p build
make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" $cpp_targets ARCH=sm_90 > build/test-cpp.log 2>&1 &
cpp=$!
trap 'kill "$cpp" 2>/dev/null || true' EXIT
# --- Chromium: the handouts' PDFs and the headless-browser tests; bubblewrap: the jail's tests ----
install chromium chromium || missing chromium "the handouts' browser and PDF tests"
install bubblewrap bwrap || missing bubblewrap "the jail's tests"
install poppler-utils pdftotext || missing poppler-utils "the handouts' print checks (pdftotext)"
# --- Slurm and munge: the cluster route's test starts a one-node Slurm of its own -------------------
{ install munge munged && install slurm-wlm slurmctld; } || missing slurm-wlm "the Slurm test (test_slurm.py)"

# --- Python: the system's pytest and handout tools if it has them, else a virtual environment ---
# Installed from PyPI, or with no network from a folder of wheels ($KIT_WHEELS, default wheels/),
# which `python3 -m pip download -d wheels -r grader/requirements-test.txt -r grader/requirements-handouts.txt`
# makes on a connected machine (README, "Without network"). Only pytest is a must: the tests of a
# missing extra (Jinja2, markdown, pypdf, copydetect) are skipped by name, with the reason.
need="import pytest, jinja2, markdown, pypdf, copydetect"
wheels=${KIT_WHEELS:-wheels}
req_files="grader/requirements-test.txt grader/requirements-handouts.txt"
reqs=$(for f in $req_files; do printf -- "-r %s " "$f"; done); reqs=${reqs% }
export PYTHONPATH=grader
if python3 -c "$need" 2>/dev/null; then
    py=python3
else
    if [ -d .venv/wheels ] || { [ ! -x .venv/bin/python ] && [ -d "$wheels" ] && ! python3 -c "import ensurepip" 2>/dev/null; }; then
        # No venv module (Debian and Ubuntu without python3-venv) and no network to get it: the
        # wheels, unpacked, go on the path as they are (the kit's test packages need no build step).
        if [ ! -d .venv/wheels ]; then
            echo "test: python3 -m venv is not available here (apt-get install python3-venv): unpacking $wheels/ into .venv/wheels/"
            python3 -c 'import sys, zipfile, pathlib; [zipfile.ZipFile(w).extractall(sys.argv[2]) for w in sorted(pathlib.Path(sys.argv[1]).glob("*.whl"))]' \
                "$wheels" .venv/wheels
        fi
        py=python3
        export PYTHONPATH=grader:.venv/wheels
    else
        if [ ! -x .venv/bin/python ]; then
            echo "test: creating .venv with pytest"
            python3 -m venv .venv || { echo "test: python3 -m venv failed: install python3-venv" >&2; exit 2; }
        fi
        py=.venv/bin/python
        if ! $py -c "$need" 2>/dev/null; then
            if [ -d "$wheels" ]; then
                # All at once, else each package the folder has (one missing wheel loses only its tests).
                $py -m pip install -q --no-index --find-links "$wheels" $reqs 2>/dev/null || \
                    for p in $(sed -e 's/#.*//' -e 's/[<>=!~ ].*//' $req_files); do
                        $py -m pip install -q --no-index --find-links "$wheels" "$p" 2>/dev/null || true
                    done
            else
                $py -m pip install -q $reqs 2>/dev/null || true
            fi
        fi
    fi
    if ! $py -c "import pytest" 2>/dev/null; then
        echo "test: pytest is not installed and could not be (no network, and no wheels in $wheels/): on a" \
             "connected machine run 'python3 -m pip download -d wheels $reqs' and copy wheels/ here" >&2
        exit 2
    fi
    missing=$(for m in jinja2 markdown pypdf copydetect; do $py -c "import $m" 2>/dev/null || printf '%s ' "$m"; done)
    if [ -n "$missing" ]; then
        if [ "${CI:-}" = true ]; then
            echo "test: could not install ${missing% } (pip install $reqs)" >&2; exit 2
        fi
        echo "SKIPPED: the tests that need ${missing% }: not installed and not installable here (no network, no wheels in $wheels/)"
    fi
fi
cpp_rc=0
wait "$cpp" || cpp_rc=$?
trap - EXIT
cat build/test-cpp.log
if [ "$cpp_rc" != 0 ]; then echo "test: the harness or the C++ host tests failed (exit $cpp_rc, above)" >&2; exit "$cpp_rc"; fi

# --- pytest, in two processes side by side ------------------------------------------------------
# The GPU tests (the known corpus graded as a class, then the tests that time) hold the GPU for
# minutes; the CPU tests run beside them, on the CPUs a batch gives its builds (conftest.py), on
# several workers where pytest-xdist is installed. The GPU half's output follows the CPU half's;
# where there is no GPU its tests are reported as skipped, by name, with the reason. It ends with
# its 15 slowest tests, where the minutes of a GPU run go.
workers=""
if $py -c "import xdist" 2>/dev/null; then
    n=$(nproc 2>/dev/null || echo 2)
    # With 8 CPUs or more, half of them are the GPU timings' (batch.gpus.split_cpus), and the class's
    # builds share the other half with these workers: at 8 workers of 16 CPUs, the builds waited and
    # the class took 273 s on an H200 in place of 245.
    if [ "$n" -ge 8 ]; then n=$((n / 4)); fi
    workers="-n $n --dist loadfile"
else
    echo "test: pytest-xdist is not installed: the CPU tests run in one process (pip install pytest-xdist)"
fi
gpu_log=build/test-gpu.log
"$py" -m pytest grader/tests slides_examples/tests -v -rs -m gpu --durations=15 "$@" > "$gpu_log" 2>&1 &
gpu=$!
# A background job ignores Ctrl-C: it is ended here, and ends its batch as on Ctrl-C (conftest.py).
trap 'kill "$gpu" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cpu_rc=0
"$py" -m pytest grader/tests slides_examples/tests -v -rs -m "not gpu" $workers "$@" || cpu_rc=$?
echo "test: the CPU tests are done (exit $cpu_rc); the GPU tests' output follows"
gpu_rc=0
wait "$gpu" || gpu_rc=$?
trap - EXIT
cat "$gpu_log"
# Exit 5: no test of that half was selected (a file or -k of the other half's tests only).
[ "$cpu_rc" != 5 ] || cpu_rc=0
[ "$gpu_rc" != 5 ] || gpu_rc=0
echo "test: CPU tests exit $cpu_rc, GPU tests exit $gpu_rc"
[ "$cpu_rc" = 0 ] || exit "$cpu_rc"
exit "$gpu_rc"
