#!/bin/sh
# On a GPU machine: the performance tables and this GPU's threshold profile.
#   1. bench     make bench: every hidden reference graded once, next to the library baselines and
#                the GPU's physical limit, with the time of each grading stage (bench/<gpu>/)
#   2. fairness  reduce and conv1d graded 5 times each: the spread of the rate (bench/<gpu>/fairness/)
#   3. calibrate grader calibrate --write (this GPU's measured profile into the task files), then
#                grader calibrate --estimate --write (the other GPUs of gpus.json, from datasheet ratios)
# Then bench/ and the task files are copied to DEST, the task files' changes as a diff, and the
# tables printed last. About 6 to 9 minutes of GPU time in all; STEPS="bench" (or "fairness
# calibrate", ...) runs only some of them.
#   tools/gpu_bench_check.sh            outputs in ${OUT:-build/bench-check}
set -u
cd "$(dirname "$0")/.." || exit 2
DEST=${OUT:-build/bench-check}
STEPS=${STEPS:-bench fairness calibrate}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
export PYTHONUNBUFFERED=1
GRADER="env PYTHONPATH=$(pwd)/grader python3 -m grader"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$DEST/gpu.txt" 2>&1
SLUG=$(PYTHONPATH=grader python3 -c "from grader import bench, gpu; print(bench.slug(gpu.detect().name))" 2>/dev/null) || {
    echo "no CUDA GPU here: $(cat "$DEST/gpu.txt")"; exit 2; }

bench_rc=- fair_rc=- cal_rc=- est_rc=-
start=$(date +%s)
for step in $STEPS; do
    t0=$(date +%s)
    case $step in
        bench)    make bench > "$DEST/bench.log" 2>&1; bench_rc=$? ;;
        fairness) $GRADER bench reduce conv1d --repeat 5 --out "bench/$SLUG/fairness" > "$DEST/fairness.log" 2>&1
                  fair_rc=$? ;;
        calibrate) $GRADER calibrate --write > "$DEST/calibrate.log" 2>&1; cal_rc=$?
                   $GRADER calibrate --estimate --write > "$DEST/estimate.log" 2>&1; est_rc=$? ;;
        *) echo "unknown step $step (bench, fairness, calibrate)"; exit 2 ;;
    esac
    echo "$step: $(( $(date +%s) - t0 )) s" >> "$DEST/steps.txt"
done
took=$(( $(date +%s) - start ))

mkdir -p "$DEST/bench" "$DEST/assignments"
[ -d "bench/$SLUG" ] && cp -r "bench/$SLUG" "$DEST/bench/"
for f in assignments/*/task.json assignments/gpus.json; do
    mkdir -p "$DEST/$(dirname "$f")" && cp "$f" "$DEST/$f"
done
git diff -- assignments/ > "$DEST/assignments.diff" 2>/dev/null

echo "== GPU"; cat "$DEST/gpu.txt"
echo "== steps"; cat "$DEST/steps.txt" 2>/dev/null
grep -hE "^== |measured|skipped|not measured|written|replaced|kept" "$DEST/calibrate.log" 2>/dev/null | head -60
for f in "bench/$SLUG/README.md" "bench/$SLUG/fairness/README.md"; do
    [ -f "$f" ] && { echo "== $f"; cat "$f"; }
done
echo "== make bench: exit $bench_rc; fairness: exit $fair_rc; calibrate: exit $cal_rc; estimate: exit $est_rc; ${took} s"
echo "== outputs in $DEST"
ok=1
for rc in $bench_rc $fair_rc $cal_rc $est_rc; do
    [ "$rc" = - ] || [ "$rc" = 0 ] || ok=0
done
[ $ok = 1 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
[ $ok = 1 ]
