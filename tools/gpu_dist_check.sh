#!/bin/sh
# On a GPU machine: builds the student kit (make dist), unpacks it into a temporary folder and grades
# reduce there as a student would: the hidden reference copied over the skeleton (expect full
# marks), then the skeleton as shipped (expect incorrect). Logs in LOGDIR; a short summary last.
#   tools/gpu_dist_check.sh [LOGDIR]        (default: ${OUT:-build/dist-check})
# Building the kit needs Jinja2 and markdown (and Chromium for the PDFs). On a GPU machine that has
# none and cannot install them, build it elsewhere (make dist) and name it: KIT=path/to/kit.tar.gz.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOGDIR=${1:-${OUT:-build/dist-check}}
mkdir -p "$LOGDIR"
LOGDIR=$(cd "$LOGDIR" && pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$LOGDIR/gpu.txt" 2>&1

start=$(date +%s)
if [ -n "${KIT:-}" ]; then
    echo "using the kit $KIT, built beforehand" > "$LOGDIR/dist.log"
    cp "$KIT" "$LOGDIR/cuda-kit-student.tar.gz" >> "$LOGDIR/dist.log" 2>&1; dist_rc=$?
else
    make dist DIST_OUT="$LOGDIR/cuda-kit-student.tar.gz" > "$LOGDIR/dist.log" 2>&1; dist_rc=$?
fi
tmp=$(mktemp -d)
tar xzf "$LOGDIR/cuda-kit-student.tar.gz" -C "$tmp" >> "$LOGDIR/dist.log" 2>&1; untar_rc=$?
kit="$tmp/cuda-kit-student"
# What came out (the summary counts any reference/ folder in it).
find "$kit" -type f | sed "s|$kit/||" | sort > "$LOGDIR/kit-files.txt"

# 1. The skeleton as shipped: must compile and come out incorrect.
(cd "$kit" && make grade A=reduce) > "$LOGDIR/grade-skeleton.log" 2>&1; skeleton_rc=$?
# 2. The reference in the skeleton's place: full marks expected (exit 0).
cp reference/reduce/kernel.cu "$kit/student_template/reduce/kernel.cu"
(cd "$kit" && make grade A=reduce) > "$LOGDIR/grade-reference.log" 2>&1; reference_rc=$?
cp "$kit/grades/reduce.json" "$LOGDIR/grade-reference.json" 2>/dev/null
took=$(( $(date +%s) - start ))
rm -rf "$tmp"

echo "== GPU"; cat "$LOGDIR/gpu.txt"
echo "== make dist: exit $dist_rc; unpack: exit $untar_rc; $(wc -l < "$LOGDIR/kit-files.txt") files;" \
     "reference files in the kit: $(grep -c '^reference/' "$LOGDIR/kit-files.txt")"
tail -1 "$LOGDIR/dist.log"
echo "== the shipped skeleton: exit $skeleton_rc (expect 2 through make, verdict incorrect)"
grep -E "Verdict|Score" "$LOGDIR/grade-skeleton.log"
echo "== reference/reduce/kernel.cu in the kit: exit $reference_rc (expect 0, full marks)"
grep -E "Verdict|Score|thresholds|GB/s" "$LOGDIR/grade-reference.log" | head -12
echo "== ${took} s; logs in $LOGDIR"
ok=1
[ "$dist_rc" = 0 ] && [ "$untar_rc" = 0 ] && [ "$reference_rc" = 0 ] || ok=0
grep -q "Verdict: incorrect" "$LOGDIR/grade-skeleton.log" || ok=0
[ $ok = 1 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
[ $ok = 1 ]
