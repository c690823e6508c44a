#!/bin/sh
# Prints a Python that can render the handouts (Jinja2 and markdown, grader/requirements-handouts.txt):
# the system's python3 if it has them, else .venv/bin/python, created and filled as needed. Also
# installs Debian's chromium (which prints the PDFs) when it is missing and this runs as root.
# Messages go to stderr; `make handouts` and `make dist` use it.
set -eu
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "handouts: installing Debian's chromium (it prints the PDFs)" >&2
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }) || \
        echo "handouts: could not install chromium (apt-get install chromium)" >&2
fi

need="import jinja2, markdown"
if python3 -c "$need" 2>/dev/null; then
    echo python3
    exit 0
fi
if [ ! -x .venv/bin/python ]; then
    echo "handouts: creating .venv" >&2
    python3 -m venv .venv >&2 || { echo "handouts: python3 -m venv failed: install python3-venv" >&2; exit 2; }
fi
if ! .venv/bin/python -c "$need" 2>/dev/null; then
    echo "handouts: installing grader/requirements-handouts.txt into .venv" >&2
    .venv/bin/python -m pip install -q -r grader/requirements-handouts.txt >&2 || { echo "handouts: pip install failed" >&2; exit 2; }
fi
echo "$(pwd)/.venv/bin/python"
