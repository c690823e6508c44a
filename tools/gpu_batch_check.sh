#!/usr/bin/env bash
# On a GPU machine: a whole batch as a TA runs it, killed midway and resumed, then every verdict
# checked. The class (36 entries, 35 submissions) is assembled from what the kit already holds:
#   - every known-wrong submission, assignments/*/tests/*.cu (its first line names its verdict);
#   - the references (correct), the skeletons (incorrect);
#   - the hostile ones of grader/tests/fixtures/batch/hostile/ (reading the references, other
#     students' files or the network; a child left running; endless output; exit(0); a memory hog);
#   - an entry with nothing gradeable and a zip that tries to write outside itself;
# as folders, zips, tarballs and lone files. The batch uses 10 timed runs per graded case
# (--timed-runs 10) to fit in about five minutes of GPU time.
#   tools/gpu_batch_check.sh            logs and outputs in ${OUT:-build/batch-check}
set -uo pipefail
cd "$(dirname "$0")/.."
KIT=$(pwd)
DEST=${OUT:-build/batch-check}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
SUBS=$DEST/submissions
BATCH_OUT=$DEST/batch
EXPECT=$DEST/expected.tsv
ASSIGN="reduce conv1d trmm matmul syr2k"
rm -rf "$SUBS" "$BATCH_OUT"
mkdir -p "$SUBS"
: > "$EXPECT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DEST/gpu.txt" 2>&1

expect_of() { sed -n '1s#^// expect: *##p' "$1"; }

# add STUDENT ASSIGNMENT FILE LAYOUT [EXPECTED]: one entry; LAYOUT is folder (A/kernel.cu), named
# (A_kernel.cu in the folder), zip (A/kernel.cu inside), tar (kernel.cu at the top: placed by the
# entry point it defines) or lone (STUDENT.cu in the submissions folder, placed by its entry point).
add() {
    local s=$1 a=$2 f=$3 layout=$4 want=${5:-$(expect_of "$3")}
    local tmp
    case $layout in
        folder) mkdir -p "$SUBS/$s/$a" && cp "$f" "$SUBS/$s/$a/kernel.cu" ;;
        named)  mkdir -p "$SUBS/$s/src" && cp "$f" "$SUBS/$s/src/${a}_kernel.cu" ;;
        zip)    tmp=$(mktemp -d) && mkdir -p "$tmp/$a" && cp "$f" "$tmp/$a/kernel.cu" &&
                (cd "$tmp" && python3 -c "import shutil; shutil.make_archive('$SUBS/$s', 'zip', '.')") && rm -rf "$tmp" ;;
        tar)    tmp=$(mktemp -d) && cp "$f" "$tmp/kernel.cu" && tar -C "$tmp" -czf "$SUBS/$s.tar.gz" kernel.cu && rm -rf "$tmp" ;;
        lone)   cp "$f" "$SUBS/$s.cu" ;;
    esac
    printf '%s\t%s\t%s\n' "$s" "$a" "$want" >> "$EXPECT"
}

layouts=(folder zip named tar folder zip)
i=0
for a in $ASSIGN; do
    for f in assignments/$a/tests/*.cu; do
        layout=${layouts[$((i % ${#layouts[@]}))]}
        # A tarball's kernel.cu is placed by the entry point it defines: a file that does not compile
        # may not show it plainly, so those go in a named folder.
        if [ "$layout" = tar ] && ! grep -q "^void $a\|^void reduce_sum" "$f"; then layout=folder; fi
        add "$(basename "$f" .cu)-$a" "$a" "$f" "$layout"
        i=$((i + 1))
    done
    add "reference-$a" "$a" "reference/$a/kernel.cu" "${layouts[$((i % 3))]}" correct
    add "skeleton-$a" "$a" "student_template/$a/kernel.cu" named incorrect
    i=$((i + 1))
done
for f in grader/tests/fixtures/batch/hostile/*.cu; do
    grep -q "@[A-Z]*@" "$f" && continue  # the jail's corpus, whose paths are filled in by test_gpu_jail.py
    add "hostile-$(basename "$f" .cu)" conv1d "$f" "$([ "$(basename "$f")" = hog.cu ] && echo lone || echo folder)"
done
# One student with two assignments in one folder.
mkdir -p "$SUBS/two-assignments/conv1d" "$SUBS/two-assignments/reduce"
cp reference/conv1d/kernel.cu "$SUBS/two-assignments/conv1d/kernel.cu"
cp student_template/reduce/kernel.cu "$SUBS/two-assignments/reduce/kernel.cu"
printf 'two-assignments\tconv1d\tcorrect\ntwo-assignments\treduce\tincorrect\n' >> "$EXPECT"
# Nothing gradeable: an empty folder, a zip reaching outside itself.
mkdir -p "$SUBS/empty-handed" && echo "I will submit tomorrow" > "$SUBS/empty-handed/README.txt"
python3 - "$SUBS/zip-slip.zip" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("conv1d/kernel.cu", "void conv1d(int n, int w, const float* N, const float* M, float* P) {}\n")
    z.writestr("../../../../tmp/zip-slip-escaped.cu", "escaped\n")
EOF
printf 'empty-handed\t-\tnothing gradeable\nzip-slip\t-\tnothing gradeable\n' >> "$EXPECT"
entries=$(ls "$SUBS" | wc -l)
subs_n=$(grep -vc 'nothing gradeable' "$EXPECT")

# The harness once, in parallel, before the clock starts (a batch builds it itself otherwise).
h0=$(date +%s.%N)
make -s -j"$(nproc)" harness A="$ASSIGN" > "$DEST/harness.log" 2>&1 || { echo "harness build failed: see $DEST/harness.log"; exit 2; }
h1=$(date +%s.%N)

# Run 1, killed (SIGKILL, the whole process group) once 40% of the submissions are graded.
graded() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['done']))" "$BATCH_OUT/state.json" 2>/dev/null || echo 0; }
kill_at=$(( subs_n * 40 / 100 ))
t0=$(date +%s.%N)
set -m  # the batch in a process group of its own, whose id is $!, to kill it whole
make batch SUBMISSIONS="$SUBS" OUT="$BATCH_OUT" A="$ASSIGN" BATCH_FLAGS="--timed-runs 10" > "$DEST/run1.log" 2>&1 &
pid=$!
set +m
killed=no
while kill -0 "$pid" 2>/dev/null; do
    if [ "$(graded)" -ge "$kill_at" ]; then
        kill -KILL -- "-$pid" 2>/dev/null && killed=yes
        break
    fi
    sleep 0.5
done
wait "$pid" 2>/dev/null
t1=$(date +%s.%N)
after_kill=$(graded)
sleep 2
left=$(pgrep -f "kit-batch-" | wc -l)

# Run 2: the same command resumes.
make batch SUBMISSIONS="$SUBS" OUT="$BATCH_OUT" A="$ASSIGN" BATCH_FLAGS="--timed-runs 10" > "$DEST/run2.log" 2>&1
rc2=$?
t2=$(date +%s.%N)
if [ ! -f "$BATCH_OUT/gradebook.csv" ]; then
    echo "== the batch did not run (exit $rc2); the end of its log ($DEST/run2.log):"
    tail -20 "$DEST/run2.log"
    exit 2
fi
orphans=$(pgrep -x kit_orphan | wc -l)
escaped=$([ -n "$(find /tmp "$DEST" -name zip-slip-escaped.cu 2>/dev/null)" ] && echo yes || echo no)

python3 - "$EXPECT" "$BATCH_OUT" "$DEST" <<'EOF'
import csv, json, sys
from pathlib import Path
expect, out, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
book = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
rows, bad = [], 0
for line in expect.read_text().splitlines():
    s, a, want = line.split("\t")
    if want == "nothing gradeable":
        got = "nothing gradeable" if "nothing gradeable" in book.get(s, {}).get("notes", "") else "graded?!"
    else:
        try:
            rec = json.loads((out / "records" / s / f"{a}.json").read_text())
            got = rec["verdict"]
            msg = rec.get("message", "")
        except OSError:
            got, msg = "no record", ""
        for what in ("reports/%s.md" % s, "reports/%s.html" % s, "gradescope/%s/results.json" % s):
            if not (out / what).is_file():
                got += " (no %s)" % what
    ok = got == want
    bad += not ok
    rows.append((s, a, want, got, "ok" if ok else "WRONG"))
print(f"{'student':<34} {'assignment':<10} {'expected':<18} {'got':<18} ok")
for r in rows:
    print(f"{r[0]:<34} {r[1]:<10} {r[2]:<18} {r[3]:<18} {r[4]}")
print(f"\n{len(rows) - bad} of {len(rows)} as expected; gradebook rows: {len(book)}")
(dest / "verdicts.ok").write_text(str(bad == 0))
EOF
echo
echo "== GPU: $(cat "$DEST/gpu.txt")"
echo "== entries: $entries ($subs_n submissions); harness build (before the clock): $(python3 -c "print(f'{$h1 - $h0:.1f}')") s"
echo "== run 1: killed=$killed (SIGKILL to its process group) after $(python3 -c "print(f'{$t1 - $t0:.1f}')") s with $after_kill of $subs_n graded; grader processes left after the kill: $left"
echo "== run 2 (resume): exit $rc2, $(python3 -c "print(f'{$t2 - $t1:.1f}')") s; $(grep -m1 'already graded' "$DEST/run2.log")"
echo "== hostile: kit_orphan processes alive after the batch: $orphans; zip-slip file written outside: $escaped"
echo "== isolation: $(python3 -c "import json; print(json.load(open('$BATCH_OUT/summary.json'))['isolation'])")"
python3 - "$BATCH_OUT" "$t0" "$t1" "$t2" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
t0, t1, t2 = map(float, sys.argv[2:])
done = json.loads((out / "state.json").read_text())["done"]
stages = {}
for d in done.values():
    for k, v in d.get("stage_seconds", {}).items():
        stages.setdefault(k, []).append(v)
print(f"== wall time: {t2 - t0:.1f} s in all ({t1 - t0:.1f} s until the kill, {t2 - t1:.1f} s resumed)")
print(f"   {'stage':<12} {'submissions':>11} {'total s':>9} {'mean s':>8} {'max s':>8}")
for k in ("build", "correctness", "sanitize", "performance"):
    v = stages.get(k)
    if v:
        print(f"   {k:<12} {len(v):>11} {sum(v):>9.1f} {sum(v) / len(v):>8.2f} {max(v):>8.2f}")
refs = sorted((out / "reference").glob("*.json"))
print("   reference gradings (once per assignment, for the plots): " + ", ".join(
    f"{p.stem} {json.loads(p.read_text())['batch']['seconds']:.1f} s" for p in refs))
EOF
[ "$(cat "$DEST/verdicts.ok")" = True ] && [ "$orphans" = 0 ] && [ "$escaped" = no ] && [ "$killed" = yes ]
