#!/usr/bin/env bash
# On a GPU machine with Nsight Compute: `make grade PROFILE=1` tried on the kernels a profile should
# tell apart, and their raw profiles kept as fixtures for the hint rules' tests.
#   1. every assignment's lecture-level kernel (a correct one of its tests/) and its hidden
#      reference; for trmm also the naive kernel with rows along the warp (uncoalesced);
#   2. each graded with --profile --keep: the report's profile part, the roofline, the CSV ncu wrote;
#   3. the time the profile took (stage "profile"), which must stay under 20 s;
#   4. a TA's `make batch PROFILE=1` of a small trmm class (a naive and an uncoalesced kernel), where
#      ncu runs in the jail with the submission: each record's profile and the class view.
# Everything under ${OUT:-build/profile-check}; a short table last. PARTS picks (default: both).
#   tools/gpu_profile_check.sh
#   PARTS=batch tools/gpu_profile_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
DEST=${OUT:-build/profile-check}
mkdir -p "$DEST/profiles"
DEST=$(cd "$DEST" && pwd)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/grader
command -v ncu >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/ncu ] || { echo "ncu not found"; exit 2; }
make -s -j"$(nproc)" harness > "$DEST/harness.log" 2>&1 || { echo "harness build failed"; tail "$DEST/harness.log"; exit 2; }

run() {  # NAME ASSIGNMENT FILE
    python3 -m grader grade "$2" --submission "$3" --profile --keep --json "$DEST/$1.json" > "$DEST/$1.txt" 2>&1
    kept=$(sed -n 's/.*Work folder kept: //p' "$DEST/$1.txt" | tail -1)
    [ -n "$kept" ] && cp "$kept/profile.csv" "$DEST/profiles/$1.csv" 2>/dev/null
    [ -n "$kept" ] && cp "$kept/profile.log" "$DEST/profiles/$1.log" 2>/dev/null
    [ -n "$kept" ] && rm -rf "$kept"
}
PARTS=${PARTS:-gradings batch}
if [[ " $PARTS " == *" gradings "* ]]; then
    run trmm-naive trmm assignments/trmm/tests/naive_one_thread_per_element.cu
    run trmm-uncoalesced trmm assignments/trmm/tests/uncoalesced_rows_per_warp.cu
    run syr2k-tiled syr2k assignments/syr2k/tests/tiled_split_k.cu
    run reduce-unrolled reduce assignments/reduce/tests/unrolled_last_warp_fixed.cu
    run jacobi-atomic-norm jacobi assignments/jacobi/tests/atomic_norm_per_point.cu
    run matmul-naive matmul assignments/matmul/tests/naive_one_thread_per_element.cu
    run conv1d-basic conv1d assignments/conv1d/tests/basic_correct.cu
    for a in trmm syr2k reduce jacobi matmul conv1d; do
        run "$a-reference" "$a" "reference/$a/kernel.cu"
    done
fi

if [[ " $PARTS " == *" batch "* ]]; then
    class=$(mktemp -d)
    mkdir -p "$class/ada/trmm" "$class/ben/trmm"
    cp assignments/trmm/tests/naive_one_thread_per_element.cu "$class/ada/trmm/kernel.cu"
    cp assignments/trmm/tests/uncoalesced_rows_per_warp.cu "$class/ben/trmm/kernel.cu"
    rm -rf "$DEST/batch"
    python3 -m grader batch "$class" --out "$DEST/batch" --assignments trmm --profile > "$DEST/batch.txt" 2>&1
    echo "batch exit $?" >> "$DEST/batch.txt"
    rm -rf "$class"
fi

# One table of every record the run wrote, the batch's included, then the batch's class view.
python3 - "$DEST" <<'PY' | tee "$DEST/summary.txt"
import json, sys
from pathlib import Path
dest = Path(sys.argv[1])
records = [(f.stem, f, f.with_name(f.stem + "-roofline.svg")) for f in sorted(dest.glob("*.json"))]
records += [(f"batch {f.parent.name}", f, f.with_name("trmm-roofline.svg"))
            for f in sorted(dest.glob("batch/records/*/trmm.json")) + sorted(dest.glob("batch/reference/trmm.json"))]
print("| grading | verdict | score | profile s | kernels | roofline | first hint or note |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, f, svg in records:
    r = json.loads(f.read_text())
    p = r.get("profile", {})
    said = p.get("note") or (p.get("hints") or ["(no hint)"])[0]
    print(f"| {name} | {r['verdict']} | {r['score']:g} | {r['stage_seconds'].get('profile', 0):.1f} | "
          f"{len(p.get('kernels', []))} | {'kept' if svg.is_file() else 'MISSING'} | {said[:110]} |")
if (dest / "batch").is_dir():
    print("batch class view:", ", ".join(sorted(x.name for x in (dest / "batch" / "class").glob("*"))) or "MISSING")
PY
