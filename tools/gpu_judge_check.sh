#!/usr/bin/env bash
# On a GPU machine: the judge (a process without student code times and checks the runner) checked
# end to end, and what it costs against the bench tables taken before it.
#   1. bubblewrap installed if missing (a .deb in $DEBS, for machines with no network), pytest from
#      wheels in $WHEELS where pip has no network;
#   2. the GPU tests: the protocol tests, every reference, skeleton, known-wrong and hostile
#      submission through `make grade`'s path (test_gpu_grading.py), the hostile corpus in a jailed
#      batch (test_gpu_jail.py);
#   3. `make bench` (REPEAT gradings of every reference) into $DEST/bench, compared with the tables
#      in bench/<gpu>/ (the same GPU model): each reference's rate, and the grading time;
#   4. a slow but correct kernel (trmm's nonblocking_stream.cu) graded 5 times: the spread of its rate;
# logs under ${OUT:-build/judge-check}, a short table last. PART is tests, bench (3 and 4) or all.
#   tools/gpu_judge_check.sh [REPEAT] [PART]
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${OUT:-build/judge-check}
REPEAT=${1:-3}
PART=${2:-all}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/grader
if ! command -v bwrap >/dev/null 2>&1; then
    for deb in ${DEBS:-.jail}/bubblewrap_*.deb; do dpkg -i "$deb" > "$DEST/dpkg.log" 2>&1; done
fi
python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q --no-index --find-links "${WHEELS:-.jail/wheels}" pytest \
    > "$DEST/pip.log" 2>&1 || python3 -m pip install -q --break-system-packages --no-index \
    --find-links "${WHEELS:-.jail/wheels}" pytest >> "$DEST/pip.log" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DEST/gpu.txt" 2>&1
make -s -j"$(nproc)" harness > "$DEST/harness.log" 2>&1 || { echo "harness build failed"; tail "$DEST/harness.log"; exit 2; }

grade_rc=0 jail_rc=0 bench_rc=0
# 2. The tests.
if [ "$PART" != bench ]; then
python3 -m pytest -q -rs -p no:cacheprovider grader/tests/test_protocol.py grader/tests/test_gpu_grading.py \
    > "$DEST/test-grade.log" 2>&1; grade_rc=$?
python3 -m pytest -q -rs -p no:cacheprovider grader/tests/test_gpu_jail.py > "$DEST/test-jail.log" 2>&1; jail_rc=$?
fi

# 3. The bench, against the tables of the same GPU model.
if [ "$PART" != tests ]; then
python3 -m grader bench --repeat "$REPEAT" --out "$DEST/bench" > "$DEST/bench.log" 2>&1; bench_rc=$?

# 4. The regrade spread of a slow kernel.
python3 - "$DEST" > "$DEST/regrade.txt" 2>&1 <<'PY'
import sys
from pathlib import Path
from grader import gpu, tasks
from grader.grade import grade
info = gpu.detect()
task = tasks.load("trmm")
rates = [grade(task, tasks.ROOT / "assignments/trmm/tests/nonblocking_stream.cu", info).performance[0].rate for _ in range(5)]
med = sorted(rates)[2]
print(f"nonblocking_stream (trmm) 5 gradings: {', '.join(f'{r:,.0f}' for r in rates)} GFLOPS; "
      f"spread (max - min) / median = {100 * (max(rates) - min(rates)) / med:.2f}%")
PY
fi

python3 - "$DEST" <<'PY' | tee "$DEST/summary.txt"
import json, sys
from pathlib import Path
dest = Path(sys.argv[1])
new = json.loads((dest / "bench" / "results.json").read_text()) if (dest / "bench" / "results.json").exists() else None
old_dir = next((d for d in Path("bench").iterdir() if new and (d / "results.json").exists()
                and json.loads((d / "results.json").read_text())["gpu"]["name"] == new["gpu"]["name"]), None) if new else None
print(f"GPU: {(dest / 'gpu.txt').read_text().strip()}")
for log in ("test-grade.log", "test-jail.log"):
    if not (dest / log).exists():
        continue
    lines = [l for l in (dest / log).read_text().splitlines() if " passed" in l or " failed" in l or "error" in l]
    print(f"{log}: {lines[-1] if lines else '(no summary)'}")
if new and old_dir:
    old = {a["assignment"]: a for a in json.loads((old_dir / "results.json").read_text())["assignments"]}
    print(f"\n| assignment | case | before ({old_dir.name}) | after | after / before | grading s before | after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for a in new["assignments"]:
        o = old.get(a["assignment"])
        if not o or not a.get("cases"):
            continue
        ot = sum(g["wall_seconds"] for g in o["gradings"]) / len(o["gradings"])
        nt = sum(g["wall_seconds"] for g in a["gradings"]) / len(a["gradings"])
        for c in a["cases"]:
            oc = next((x for x in o["cases"] if x["case"] == c["case"]), None)
            if oc and oc.get("reference") and c.get("reference"):
                print(f"| {a['assignment']} | {c['case']} | {oc['reference']:,.0f} | {c['reference']:,.0f} | "
                      f"{c['reference'] / oc['reference']:.3f} | {ot:.1f} | {nt:.1f} |")
if (dest / "regrade.txt").exists():
    print((dest / "regrade.txt").read_text().strip())
PY
exit $(( grade_rc | jail_rc | bench_rc ))
