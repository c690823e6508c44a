#!/bin/sh
# On a GPU machine: the README's two commands on this checkout, plus the instructor's view of every
# reference, with full logs in LOGDIR and a short summary last.
#   tools/gpu_check.sh [LOGDIR]
set -u
cd "$(dirname "$0")/.."
LOGDIR=${1:-build/gpu-check}
mkdir -p "$LOGDIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$LOGDIR/gpu.txt" 2>&1

start=$(date +%s)
make test > "$LOGDIR/test.log" 2>&1; test_rc=$?
test_s=$(( $(date +%s) - start ))

: > "$LOGDIR/grades.log"
for a in $(sed -e 's/#.*//' assignments/registry.txt); do
    make grade A=$a SUBMISSION=reference/$a/kernel.cu >> "$LOGDIR/grades.log" 2>&1
    make grade A=$a >> "$LOGDIR/grades.log" 2>&1
done

echo "== GPU"; cat "$LOGDIR/gpu.txt"
echo "== make test: exit $test_rc in ${test_s} s"
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$LOGDIR/test.log" | tail -40
echo "== make grade: the references, then the skeletons"
grep -E "^== |Verdict|Score|submission |cublas|thresholds|Stages" "$LOGDIR/grades.log"
