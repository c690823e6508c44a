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

# --- Catch2 (the v2 single header): the C++ host tests -----------------------------------------
# Built and run in the background while the rest is set up (apt-get, the virtual environment); their
# output is shown, and their failure ends the run, before pytest starts, which builds in build/ too.
cpp=""
if install catch2 /usr/include/catch2/catch.hpp; then
    mkdir -p build
    make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" test-cpp ARCH=sm_90 > build/test-cpp.log 2>&1 &
    cpp=$!
    trap 'kill "$cpp" 2>/dev/null || true' EXIT
else
    missing catch2 "C++ host tests"
fi
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
if [ -n "$cpp" ]; then
    cpp_rc=0
    wait "$cpp" || cpp_rc=$?
    trap - EXIT
    cat build/test-cpp.log
    if [ "$cpp_rc" != 0 ]; then echo "test: the C++ host tests failed (exit $cpp_rc, above)" >&2; exit "$cpp_rc"; fi
fi
exec "$py" -m pytest grader/tests slides_examples/tests -v -rs "$@"
