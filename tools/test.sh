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

# --- Catch2 (Debian's catch2 package: the v2 single header) -----------------------------------
catch_header=/usr/include/catch2/catch.hpp
if [ ! -f "$catch_header" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test: installing Debian's catch2"
    (apt-get install -y -q catch2 >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q catch2 >/dev/null 2>&1; }) || true
fi
if [ -f "$catch_header" ]; then
    make --no-print-directory test-cpp ARCH=sm_90
elif [ "${CI:-}" = true ]; then
    echo "test: Catch2 is missing and could not be installed (apt-get install catch2)" >&2; exit 2
else
    echo "SKIPPED: C++ host tests: Catch2 is not installed and could not be installed here (apt-get install catch2)"
fi

# --- Chromium (Debian's chromium): the handouts' PDFs and the headless-browser tests -------------
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test: installing Debian's chromium"
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }) || true
fi
if ! command -v chromium >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "test: Chromium is missing and could not be installed (apt-get install chromium)" >&2; exit 2
    fi
    echo "SKIPPED: the handouts' browser and PDF tests: Chromium is not installed (apt-get install chromium)"
fi

# --- bubblewrap (Debian's bubblewrap): the jail of batch and Gradescope grading -------------------
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "test: installing Debian's bubblewrap"
    (apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }) || true
fi
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "test: bubblewrap is missing and could not be installed (apt-get install bubblewrap)" >&2; exit 2
    fi
    echo "SKIPPED: the jail's tests: bubblewrap is not installed (apt-get install bubblewrap)"
fi

# --- Python: the system's pytest and handout tools if it has them, else a virtual environment ---
need="import pytest, jinja2, markdown, pypdf"
if python3 -c "$need" 2>/dev/null; then
    py=python3
else
    if [ ! -x .venv/bin/python ]; then
        echo "test: creating .venv with pytest"
        python3 -m venv .venv || { echo "test: python3 -m venv failed: install python3-venv" >&2; exit 2; }
    fi
    .venv/bin/python -c "$need" 2>/dev/null || \
        .venv/bin/python -m pip install -q -r grader/requirements-test.txt -r grader/requirements-handouts.txt
    py=.venv/bin/python
fi
PYTHONPATH=grader exec "$py" -m pytest grader/tests slides_examples/tests -v -rs "$@"
