#!/bin/sh
# The lecture examples on this GPU, in one command: builds them, runs `make bench` (every version
# checked against the CPU, then timed; tables and plots in slides_examples/results/<gpu>/), copies
# the logs and results to ${OUT:-build/slides-out}, and prints the tables last.
#
#   sh slides_examples/gpu_bench.sh            (about 1 to 2 minutes on an H100 or H200)
#
# Exit status: that of `make bench` (non-zero if a program failed or a version of a progression
# failed its check).
set -u
cd "$(dirname "$0")/.."
out=${OUT:-build/slides-out}
mkdir -p "$out"
start=$(date +%s)

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "gpu_bench: nvidia-smi failed (see $out/nvidia-smi.txt)"
python3 -c "import matplotlib" 2>/dev/null || echo "gpu_bench: matplotlib is not installed here: tables only, no plots (redraw them with report.py where it is)"

# Build in parallel first (bench would build one file at a time), then run.
{ make -C slides_examples -j8 all ARCH=sm_90 && make -C slides_examples bench ARCH=sm_90; echo $? > "$out/bench.rc"; } 2>&1 | tee "$out/bench.log"
rc=$(cat "$out/bench.rc" 2>/dev/null || echo 1)

rm -rf "$out/logs" "$out/results"
cp -r build/slides_examples/sm_90/logs "$out/logs" 2>/dev/null || true
cp -r slides_examples/results "$out/results" 2>/dev/null || true
echo "gpu_bench: make bench exited with $rc after $(( $(date +%s) - start )) s; logs and results in $out"

# The tables of this run: the results folder written last.
latest=$(ls -td slides_examples/results/*/ 2>/dev/null | head -n1)
if [ -n "$latest" ] && [ -f "$latest/README.md" ]; then
    echo
    echo "================ $latest"
    for f in matmul dgemm conv1d reduction jacobi; do
        [ -f "$latest/$f.md" ] && { echo; cat "$latest/$f.md"; }
    done
fi
exit "$rc"
