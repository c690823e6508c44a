#!/usr/bin/env bash
# On a machine with two or more GPUs: the batch's throughput on one GPU and on all of them, on the
# same class, and a projection for a course (300 students x 6 assignments on an 8-GPU node) from the
# measured per-stage times. Writes bench/<gpu>/batch.md (and logs under ${OUT:-build/batch-bench}).
#   tools/gpu_batch_bench.sh [STUDENTS_PER_ASSIGNMENT]     (default 6)
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${OUT:-build/batch-bench}
N=${1:-6}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/grader
if ! command -v bwrap >/dev/null 2>&1; then
    for deb in ${DEBS:-.jail}/bubblewrap_*.deb; do dpkg -i "$deb" > "$DEST/dpkg.log" 2>&1; done
fi
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[ "$(echo "$GPUS" | tr , '\n' | wc -l)" -ge 2 ] || { echo "needs two GPUs or more (found: $GPUS)"; exit 2; }
ASSIGN="trmm reduce conv1d matmul"
make -s -j"$(nproc)" harness A="$ASSIGN" > "$DEST/harness.log" 2>&1 || { echo "harness build failed"; exit 2; }

# A class: N students per assignment, each with the reference or a known-correct kernel.
CLASS=$DEST/class
rm -rf "$CLASS"
for a in $ASSIGN; do
    for i in $(seq 1 "$N"); do
        mkdir -p "$CLASS/s$i/$a"
        src=reference/$a/kernel.cu
        [ $((i % 2)) = 0 ] && [ -f "assignments/$a/tests/basic_correct.cu" ] && src=assignments/$a/tests/basic_correct.cu
        cp "$src" "$CLASS/s$i/$a/kernel.cu"
    done
done

run() {  # run LABEL GPUS
    rm -rf "$DEST/out-$1"
    local s e
    s=$(date +%s.%N)
    python3 -m grader batch "$CLASS" --out "$DEST/out-$1" --assignments $ASSIGN --no-reference --gpus "$2" \
        > "$DEST/batch-$1.log" 2>&1
    e=$(date +%s.%N)
    echo "$1 $2 $(echo "$e - $s" | bc)" >> "$DEST/times.txt"
}
: > "$DEST/times.txt"
run one 0
run all "$GPUS"
run one-again 0

python3 - "$DEST" "$NAME" "$GPUS" "$N" <<'PY'
import json, statistics, sys
from pathlib import Path
dest, name, gpus, n = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
times = {l.split()[0]: float(l.split()[2]) for l in (dest / "times.txt").read_text().splitlines()}
count = len(json.loads((dest / "out-all" / "state.json").read_text())["done"])
one = statistics.mean([times["one"], times["one-again"]])
k = len(gpus.split(","))
per = {}
for rec in (dest / "out-one" / "records").glob("*/*.json"):
    r = json.loads(rec.read_text())
    for stage, s in r.get("stage_seconds", {}).items():
        per.setdefault(stage, []).append(s)
gpu_s = sum(statistics.mean(per[s]) for s in ("correctness", "sanitize", "performance") if s in per)
build_s = statistics.mean(per.get("build", [0]))
gradings = 300 * 6
proj = gradings * gpu_s / 8 / 3600
lines = [f"# Batch throughput on {k} x {name}", "",
         f"A class of {count} gradings ({n} students x {count // n} assignments), `--no-reference`, jailed.", "",
         "| GPUs | wall s | gradings / min | vs one GPU |", "| --- | --- | --- | --- |",
         f"| 1 | {one:.0f} | {60 * count / one:.1f} | 1.00x |",
         f"| {k} | {times['all']:.0f} | {60 * count / times['all']:.1f} | {one / times['all']:.2f}x |", "",
         f"Per grading (means over this class): GPU stages {gpu_s:.1f} s, build {build_s:.1f} s (on the CPU cores, "
         f"in parallel). A course of 300 students x 6 assignments ({gradings} gradings) on an 8-GPU node: about "
         f"{gradings} x {gpu_s:.1f} s / 8 = {proj:.1f} h of GPU stages, the builds overlapping them.", ""]
slug = name.lower().replace(" ", "-")
out = Path("bench") / slug
out.mkdir(parents=True, exist_ok=True)
(out / "batch.md").write_text("\n".join(lines))
print("\n".join(lines))
PY
