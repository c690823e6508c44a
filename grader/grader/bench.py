"""The bench verb: on the GPU at hand, every assignment's hidden reference graded as a submission
would be, next to the library baselines and the GPU's physical limit.

  python -m grader bench [ASSIGNMENT ...] [--out DIR] [--repeat N]

For each graded case: the reference's rate, each library route's rate and the ratio reference /
route, the physical limit (the datasheet's FP64/FP32 rate or DRAM bandwidth, in the metric's unit)
and the reference's fraction of it; with --repeat N the reference is graded N times and the spread
of its rate, (max - min) / median, says how repeatable a grading is. The time of every stage of
every grading is listed too. Written to DIR (default bench/<gpu>/): README.md and results.json.
Where DIR already holds a table of the same GPU, driver and --repeat, the assignments not named keep
their rows, each with the date and command that measured it: benchmarking one changed reference
updates its rows and loses none. The exit code is 0 when every reference was graded correct, 1 otherwise.
"""
from __future__ import annotations

import datetime
import json
import re
import statistics
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from . import build, gpu, grade, tasks
from .results import GpuInfo, Verdict
from .tasks import describe

STAGES = ("harness", "build", "library", "correctness", "sanitize", "performance")


def slug(name: str) -> str:
    """A folder name for a GPU: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def driver_version(info: GpuInfo) -> str:
    """The NVIDIA driver's version (nvidia-smi), else the CUDA version the driver supports."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30)
        version = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    return version or f"CUDA {info.driver}"


def spread(values: list):
    """(max - min) / median, or None with fewer than two values."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def _median(values: list):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(task: tasks.Task, results: list, walls: list, info: GpuInfo, every_route: tuple = ()) -> dict:
    """An assignment's entry of results.json from its gradings (GradeResult) and their wall times.
    `every_route`: gradings that timed every library route (a grading times only the baseline); the
    routes column adds theirs, the reference's rate and the stage times do not."""
    first = results[0]
    if first.verdict == Verdict.SKIPPED:
        return {"assignment": task.name, "status": "skipped", "message": first.message, "gradings": [], "cases": []}
    ok = all(r.verdict == Verdict.CORRECT for r in results)
    bad = next((r for r in results if r.verdict != Verdict.CORRECT), None)
    entry = {
        "assignment": task.name,
        "status": "correct" if ok else "failed",
        "message": "" if ok else f"{bad.verdict.value}: {bad.message}",
        "metric": task.metric,
        "gradings": [{"verdict": r.verdict.value, "score": r.score, "max_score": r.max_score, "message": r.message,
                      "stage_seconds": dict(r.stage_seconds), "wall_seconds": w} for r, w in zip(results, walls)],
        "cases": [],
    }
    kind = task.peak_kind
    _, peak_source = gpu.peak(info, kind)
    bw, _ = gpu.peak(info, "dram")
    for g in task.graded:
        perfs = [p for r in results for p in r.performance if p.case_id == g.case.id]
        if not perfs:
            continue
        rates = [p.rate for p in perfs]
        ref = _median(rates)
        routes = []
        timed = perfs + [p for r in every_route for p in r.performance if p.case_id == g.case.id]
        for name in dict.fromkeys(b.name for p in timed for b in p.baselines):
            brates = [b.rate for p in timed for b in p.baselines if b.name == name]
            base = _median(brates)
            routes.append({"name": name, "rates": brates, "rate": base, "ratio": ref / base if base else None,
                           "primary": name == perfs[0].baseline_name})
        limit = _median([p.peak for p in perfs])
        gbs = _median([p.gbs for p in perfs])
        entry["cases"].append({
            "case": g.case.id, "size": describe(g.case.params),
            "reference_rates": rates, "reference": ref, "spread": spread(rates),
            "timing_spreads": [p.timing.spread for p in perfs],
            "baselines": routes,
            "limit": limit, "limit_kind": kind,
            "limit_source": peak_source if limit else "none: the data fit in the L2 cache",
            "fraction": ref / limit if limit else None,
            "gbs": gbs if task.metric != "GB/s" else None,
            "dram_fraction": gbs / (bw * task.gpus_required) if gbs and task.metric != "GB/s" else None,
            "scores": [r.score for r in results],
        })
    return entry


def _num(x, unit: str = "") -> str:
    return "-" if x is None else f"{x:,.0f}" + (f" {unit}" if unit else "")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def tables(record: dict) -> str:
    """The rates table, the stage times table and what was skipped or failed, as Markdown."""
    repeat = record["repeat"]
    out = ["## Rates", "",
           f"The hidden reference of each assignment graded {repeat} time{'s' if repeat > 1 else ''}; rates are medians "
           f"over the gradings, each the median of its timed runs. A grading times the baseline route only; "
           f"one more grading times every route, for this table. A route's ratio is reference / route. "
           f"The limit is the datasheet's peak in the metric's unit (FP64 or FP32 rate, or the rate at which the "
           f"bytes of a call move at the DRAM bandwidth).", "",
           "| assignment | graded case | reference | library routes (reference / route) | physical limit "
           "| reference / limit | DRAM traffic | spread over gradings | scores |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a in record["assignments"]:
        for c in a["cases"]:
            unit = a["metric"]
            routes = "; ".join(f"{b['name']}{' (baseline)' if b['primary'] else ''}: {_num(b['rate'])}"
                               f" ({b['ratio']:.2f}x)" if b["ratio"] else f"{b['name']}: -" for b in c["baselines"])
            limit = f"{_num(c['limit'], unit)} ({c['limit_kind']}, {c['limit_source']})" if c["limit"] else \
                f"- ({c['limit_source']})"
            dram = f"{_num(c['gbs'], 'GB/s')} ({_pct(c['dram_fraction'])} of DRAM)" if c["gbs"] else "-"
            scores = sorted(set(c["scores"]))
            score_text = ", ".join(f"{s:g}" for s in scores) + (f" (all {len(c['scores'])})" if len(scores) == 1
                                                                and len(c["scores"]) > 1 else "")
            out.append(f"| {a['assignment']} | {c['case']} ({c['size']}) | {_num(c['reference'], unit)} | {routes} "
                       f"| {limit} | {_pct(c['fraction'])} | {dram} | {_pct(c['spread'])} | {score_text} |")
    out += ["", "## Grading time per stage (seconds)", "",
            "The library's routes are timed while kernel.cu compiles (on a machine with cores to spare); "
            "`library` is what that took beyond the build. The total is the grading's wall time.", "",
            "| assignment | grading | " + " | ".join(STAGES) + " | total |",
            "| --- | --- | " + " | ".join("---" for _ in STAGES) + " | --- |"]
    for a in record["assignments"]:
        for i, g in enumerate(a["gradings"], 1):
            st = g["stage_seconds"]
            out.append(f"| {a['assignment']} | {i} | " + " | ".join(f"{st[s]:.1f}" if s in st else "-" for s in STAGES)
                       + f" | {g['wall_seconds']:.1f} |")
    others = [a for a in record["assignments"] if a["status"] != "correct"]
    if others:
        out += ["", "## Not benchmarked", ""]
        out += [f"- {a['assignment']}: {a['status']}: {a['message']}" for a in others]
    return "\n".join(out) + "\n"


def readme(record: dict) -> str:
    g = record["gpu"]
    head = [f"# Benchmarks on {g['name']}", "",
            f"- GPU: {g['name']} ({g['arch']}, {g['sm_count']} multiprocessors, "
            f"{g['l2_bytes'] / 2**20:.0f} MiB of L2){' x ' + str(g['count']) if g['count'] > 1 else ''}",
            f"- driver: {record['driver']} (CUDA {g['driver']})"]
    runs = {}  # (date, command) -> assignments, in the table's order (merged() dates every row)
    for a in record["assignments"]:
        runs.setdefault((a["date"], a["command"]), []).append(a["assignment"])
    if len(runs) == 1:
        head += [f"- date: {record['date']}", f"- command: `{record['command']}`"]
    else:
        head += [f"- {', '.join(names)}: {date}, `{command}`" for (date, command), names in runs.items()]
    return "\n".join(head + [""]) + "\n" + tables(record)


def merged(record: dict, out: Path, say=None) -> dict:
    """`record` with the rows of out/results.json that it does not replace, where that table is of the
    same GPU, driver and repeat (else `record` alone: one table never mixes machines or repeat counts).
    Each assignment's entry keeps the date and command of the run that measured it."""
    for a in record["assignments"]:
        a.setdefault("date", record["date"])
        a.setdefault("command", record["command"])
    try:
        prior = json.loads((out / "results.json").read_text())
        same = (prior["gpu"]["name"], prior["gpu"]["count"], prior["driver"], prior["repeat"]) == \
            (record["gpu"]["name"], record["gpu"]["count"], record["driver"], record["repeat"])
        kept = [dict(a, date=a.get("date", prior["date"]), command=a.get("command", prior["command"]))
                for a in prior["assignments"]]
    except FileNotFoundError:
        return record
    except (OSError, ValueError, KeyError, TypeError) as e:
        if say:
            say(f"bench: {out / 'results.json'} could not be read ({e}): this run's table replaces it")
        return record
    if not same:
        if say:
            say(f"bench: {out / 'results.json'} is of {prior['gpu']['name']} x {prior['gpu']['count']}, driver "
                f"{prior['driver']}, --repeat {prior['repeat']}: this run's table replaces it")
        return record
    new = {a["assignment"]: a for a in record["assignments"]}
    before = {a["assignment"] for a in kept}
    rows = [new.get(a["assignment"], a) for a in kept] + [a for n, a in new.items() if n not in before]
    old = [a["assignment"] for a in kept if a["assignment"] not in new]
    if old and say:
        say(f"bench: the rows of {', '.join(old)} are kept from {out / 'results.json'} (same GPU, driver and repeat)")
    return dict(record, assignments=rows)


def _say(text: str) -> None:
    print(text, flush=True)


def run(names: list, info: GpuInfo, out: Path, repeat: int, command: str, say=_say) -> int:
    """Benchmarks the named assignments on this GPU; writes out/README.md and out/results.json."""
    record = {"gpu": asdict(info), "driver": driver_version(info),
              "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "command": command, "repeat": repeat, "assignments": []}
    failed = False
    for name in names:
        task = tasks.load(name)
        src = tasks.ROOT / "reference" / name / "kernel.cu"
        results, walls = [], []
        for i in range(repeat):
            t0 = time.monotonic()
            kit_error = False
            try:
                r = grade.grade(task, src, info)
            except build.KitError as e:
                r = grade.new_result(task, src, info, grade.Options())
                r.verdict, r.message, kit_error = Verdict.BUILD_ERROR, f"the kit could not grade it: {e}", True
            walls.append(time.monotonic() - t0)
            results.append(r)
            say(f"bench: {name} {i + 1}/{repeat}: {r.verdict.value}" + (f", {r.score:g}/{r.max_score:g}"
                if r.verdict != Verdict.SKIPPED else "") + f" ({walls[-1]:.1f} s)"
                + (f": {r.message}" if r.verdict != Verdict.CORRECT else ""))
            if r.verdict == Verdict.SKIPPED or kit_error:
                break
        every_route = ()
        if results[-1].verdict == Verdict.CORRECT:
            say(f"bench: {name}: one more grading, timing every library route")
            every_route = (grade.grade(task, src, info, grade.Options(all_routes=True)),)
        entry = summarize(task, results, walls, info, every_route)
        failed |= entry["status"] == "failed"
        record["assignments"].append(entry)
    out.mkdir(parents=True, exist_ok=True)
    record = merged(record, out, say)
    for fname, text in (("results.json", json.dumps(record, indent=2, default=str) + "\n"),
                        ("README.md", readme(record))):
        tmp = out / (fname + ".tmp")
        tmp.write_text(text)
        tmp.replace(out / fname)
    say("")
    say(tables(record))
    say(f"Written: {out / 'README.md'}, {out / 'results.json'}")
    return 1 if failed else 0


def main(args) -> int:
    names = args.assignments or tasks.registry()
    for n in names:
        tasks.load(n)  # an unknown name fails before anything runs
        if not (tasks.ROOT / "reference" / n / "kernel.cu").is_file():
            raise tasks.TaskError(f"reference/{n}/kernel.cu is missing: bench grades the hidden reference "
                                  f"solutions, which only the instructors' kit holds")
    if args.repeat < 1:
        raise tasks.TaskError("--repeat must be at least 1")
    info = gpu.detect()
    out = args.out or tasks.ROOT / "bench" / slug(info.name)
    command = "python3 -m grader bench" + "".join(f" {n}" for n in args.assignments) + \
        (f" --repeat {args.repeat}" if args.repeat != 1 else "") + (f" --out {args.out}" if args.out else "")
    return run(names, info, Path(out), args.repeat, command)
