#!/usr/bin/env bash
# On a GPU machine: the jail for batch grading, checked end to end, and what it costs.
#   1. bubblewrap installed if missing (a .deb in $DEBS, for machines with no network);
#   2. the jail's own tests (test_jail.py, test_jail_user.py), the hostile class graded in the jail
#      (test_gpu_jail.py), the GPU tests of the grader (test_gpu_grading.py);
#   3. the same class of honest submissions batch-graded with the jail and with --no-isolation,
#      twice each, in alternation: the grading time per submission of each;
# logs under ${OUT:-build/jail-check}, a short table last.
#   tools/gpu_jail_check.sh [PYTEST_K]    (PYTEST_K: a pytest -k filter for step 2's GPU grading tests)
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${OUT:-build/jail-check}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/grader
if ! command -v bwrap >/dev/null 2>&1; then
    for deb in ${DEBS:-.jail}/bubblewrap_*.deb; do dpkg -i "$deb" > "$DEST/dpkg.log" 2>&1; done
fi
bwrap --version > "$DEST/bwrap.txt" 2>&1 || { echo "no bubblewrap: apt-get install bubblewrap"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DEST/gpu.txt" 2>&1
ASSIGN="conv1d trmm reduce matmul"
make -s -j"$(nproc)" harness A="$ASSIGN" > "$DEST/harness.log" 2>&1 || { echo "harness build failed"; tail "$DEST/harness.log"; exit 2; }

# 2. The tests (COST_ONLY=1 skips them).
t0=$(date +%s)
jail_rc=0; gpu_rc=0
[ -n "${COST_ONLY:-}" ] || python3 -m pytest -q -rs -p no:cacheprovider grader/tests/test_jail.py \
    grader/tests/test_jail_user.py grader/tests/test_gpu_jail.py > "$DEST/test-jail.log" 2>&1; jail_rc=$?
t1=$(date +%s)
[ -n "${COST_ONLY:-}" ] || python3 -m pytest -q -rs -p no:cacheprovider grader/tests/test_gpu_grading.py ${1:+-k "$1"} > "$DEST/test-gpu.log" 2>&1; gpu_rc=$?
t2=$(date +%s)

# 3. The cost of the jail: one class, graded jailed and unjailed, in alternation.
CLASS=$DEST/class
rm -rf "$CLASS"
for a in conv1d trmm reduce matmul; do
    mkdir -p "$CLASS/ref-$a/$a" && cp "reference/$a/kernel.cu" "$CLASS/ref-$a/$a/kernel.cu"
done
mkdir -p "$CLASS/basic/conv1d" && cp assignments/conv1d/tests/basic_correct.cu "$CLASS/basic/conv1d/kernel.cu"
: > "$DEST/cost.tsv"
for round in 1 2; do
    for mode in jail open; do
        flags="--no-reference --timed-runs 10"; [ $mode = open ] && flags="$flags --no-isolation"
        rm -rf "$DEST/batch-$mode"
        s=$(date +%s.%N)
        python3 -m grader batch "$CLASS" --out "$DEST/batch-$mode" --assignments $ASSIGN $flags > "$DEST/batch-$mode-$round.log" 2>&1
        rc=$?
        e=$(date +%s.%N)
        python3 - "$DEST/batch-$mode" "$mode" "$round" "$rc" "$s" "$e" >> "$DEST/cost.tsv" <<'PY'
import json, sys
from pathlib import Path
out, mode, rnd, rc, s, e = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
done = json.loads((out / "state.json").read_text())["done"]
per = [d["seconds"] for d in done.values()]
verdicts = sorted(d["verdict"] for d in done.values())
print(f"{mode}\t{rnd}\t{rc}\t{len(per)}\t{sum(per) / max(1, len(per)):.2f}\t{e - s:.1f}\t{','.join(verdicts)}")
PY
    done
done

echo "== GPU: $(cat "$DEST/gpu.txt"); $(cat "$DEST/bwrap.txt")"
echo "== jail tests + hostile class (exit $jail_rc, $((t1 - t0)) s):"; tail -25 "$DEST/test-jail.log" | grep -E "passed|failed|FAILED|SKIPPED|Error" | tail -20
echo "== GPU grading tests (exit $gpu_rc, $((t2 - t1)) s):"; grep -E "passed|failed|FAILED" "$DEST/test-gpu.log" | tail -15
echo "== cost of the jail: mode, round, exit, submissions, mean s per submission, wall s, verdicts"
cat "$DEST/cost.tsv"
python3 - "$DEST/cost.tsv" <<'PY'
import sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines() if l]
mean = {m: sum(float(r[4]) for r in rows if r[0] == m) / max(1, sum(1 for r in rows if r[0] == m)) for m in ("jail", "open")}
if mean["open"]:
    print(f"per submission: jail {mean['jail']:.2f} s, open {mean['open']:.2f} s: {100 * (mean['jail'] / mean['open'] - 1):+.1f}%")
PY
[ $jail_rc = 0 ] && [ $gpu_rc = 0 ]
