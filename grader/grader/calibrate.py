"""The calibrate verb: per-GPU threshold profiles, measured on the GPU at hand or estimated.

  python -m grader calibrate [ASSIGNMENT ...] [--write]              measure on this GPU
  python -m grader calibrate [ASSIGNMENT ...] --estimate [--write]   estimate the other GPUs (no GPU needed)

Measuring times each graded case's baseline (task.json: performance.baseline) through the checker
exactly as grading does, and turns it into the tiers' rates (fraction x baseline rate). A task whose
work depends on a value the entry point returns (jacobi's count of sweeps) is timed within a grading
of its hidden reference, so that the work counts the sweeps the checker verified.

Estimating derives, for every GPU of assignments/gpus.json without a measured profile, the rates of
a measured one (H100 SXM where there is one, else H200) scaled by the ratio of the datasheet figure
that bounds the baseline (performance.baseline_bound, else metric.peak: fp64, fp32 or dram).

Every profile says where it came from ("source"); estimated ones also carry "estimated": true. An
estimate never replaces a measured profile; a measurement replaces an estimate. With --write the
profile goes into the task file's performance.gpus, and nothing else in the file changes.
"""
from __future__ import annotations

import datetime
import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from . import build, gpu, grade, performance, protocol, report, tasks, workdir
from .results import GpuInfo, Verdict

PREFERRED_SOURCES = ("H100 SXM", "H200")
"""The measured profiles estimates are derived from, in order of preference."""

KINDS = {"fp64": "TFLOP/s", "fp32": "TFLOP/s", "dram": "GB/s"}


# ---------------------------------------------------------------------------------------------
# Measuring.

@dataclass
class Measured:
    case_id: str
    params: dict
    rate: float
    """The baseline's rate in the task's metric (work / median time)."""
    median_ms: float
    others: dict = field(default_factory=dict)
    """The other library routes timed beside it: name -> rate."""


def measure(task: tasks.Task, info: GpuInfo, say=print) -> list:
    """One Measured per graded case, for the task's primary baseline on this GPU."""
    if task.returned:
        return _measure_in_grading(task, info, say)
    primary = task.data["performance"]["baseline"]
    work = workdir.new(f"kit-calibrate-{task.name}-")
    try:
        build.build_harness(task, info.arch, work / "harness.log")
        out = []
        for g in task.graded:
            c = g.case
            plan = protocol.plan_line("timed", c.id, c.seed, c.tol, c.reference, c.params,  # the judge draws
                                      warmup=g.warmup, runs=g.runs) + "\n"                  # the seeds itself
            routes, _ = performance.library_times(task, work, info.arch, plan, c.id, g.warmup)
            units = task.work(c.params)
            rates = {name: units / (t.median_ms / 1e3) for name, t in routes}
            if primary not in rates:
                raise build.KitError(f"the {task.name} checker timed no route named {primary!r} "
                                     f"(it timed: {', '.join(rates) or 'none'}): see performance.baseline")
            median = next(t.median_ms for name, t in routes if name == primary)
            out.append(Measured(c.id, dict(c.params), rates[primary], median,
                                {k: v for k, v in rates.items() if k != primary}))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _measure_in_grading(task: tasks.Task, info: GpuInfo, say) -> list:
    ref = tasks.ROOT / "reference" / task.name / "kernel.cu"
    if not ref.is_file():
        raise tasks.TaskError(f"{task.name}: its work depends on what the entry point returns "
                              f"({', '.join(task.returned)}), so its baseline is timed within a grading of "
                              f"the reference, and {ref} is missing")
    say(f"   {task.name}: the work counts the {', '.join(task.returned)} the checker verified, so the baseline "
        f"is timed within a grading of reference/{task.name}/kernel.cu")
    r = grade.grade(task, ref, info, grade.Options(all_routes=True))
    if r.verdict != Verdict.CORRECT or len(r.performance) != len(task.graded):
        raise build.KitError(f"{task.name}: the reference was not graded correct ({r.verdict.value}: {r.message}), "
                             f"so its baseline cannot be taken from that grading")
    primary = task.data["performance"]["baseline"]
    out = []
    for p in r.performance:
        base = next((b for b in p.baselines if b.name == primary), None)
        if base is None:
            raise build.KitError(f"the {task.name} checker timed no route named {primary!r} "
                                 f"(it timed: {', '.join(b.name for b in p.baselines) or 'none'})")
        out.append(Measured(p.case_id, dict(p.params), base.rate, base.timing.median_ms,
                            {b.name: b.rate for b in p.baselines if b.name != primary}))
    return out


def _round(x: float) -> int:
    """A tier's rate: a whole number (half up), at least 1 so that no tier is free."""
    return max(1, int(math.floor(x + 0.5)))


def _size(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items())


def _article(name: str) -> str:
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


def _percents(tiers: list) -> str:
    return "/".join(f"{round(100 * t['fraction'], 4):g}" for t in tiers) + "%"


def measured_profile(task: tasks.Task, info: GpuInfo, driver: str, date: str, measured: list) -> dict:
    """The profile for this GPU: the tiers' fractions of the measured baseline, with its source."""
    perf = task.data["performance"]
    tiers = perf.get("tiers", [])
    per_case = {m.case_id: [_round(t["fraction"] * m.rate) for t in tiers] for m in measured}
    rates = per_case[task.graded[0].case.id] if len(task.graded) == 1 else per_case

    def figure(m):
        text = f"{m.rate:,.0f} {task.metric}"
        if m.others:
            text += " (" + ", ".join(f"{k}: {v:,.0f}" for k, v in m.others.items()) + ")"
        return text

    where = f"on {_article(info.name)} {info.name} (driver {driver}) on {date}"
    if len(measured) == 1:
        m = measured[0]
        what = f"measured at {_size(m.params)} {where}: {figure(m)}"
    else:
        what = f"measured {where}: " + " and ".join(f"{figure(m)} at {_size(m.params)}" for m in measured)
    return {"rates": rates, "source": f"{perf['baseline']} {what}; tiers at {_percents(tiers)} of it"}


# ---------------------------------------------------------------------------------------------
# Estimating.

def bound_kind(task: tasks.Task) -> str:
    """The datasheet figure that bounds the baseline: performance.baseline_bound, else the metric's peak."""
    kind = task.data["performance"].get("baseline_bound", task.peak_kind)
    if kind not in KINDS:
        raise tasks.TaskError(f"{task.folder / 'task.json'}: performance.baseline_bound must be one of "
                              f"{', '.join(KINDS)}, not {kind!r}")
    return kind


def is_measured(profile: dict) -> bool:
    return not profile.get("estimated", False)


def estimate_source(gpus: dict):
    """The measured profile estimates come from: (model, profile), or None."""
    measured = {m: p for m, p in gpus.items() if is_measured(p)}
    for model in PREFERRED_SOURCES:
        if model in measured:
            return model, measured[model]
    return next(iter(measured.items()), None)


def estimated_profile(task: tasks.Task, source_model: str, source: dict, target_model: str, table: dict) -> dict:
    """source's rates scaled by the datasheet ratio target / source of the figure bounding the baseline."""
    kind = bound_kind(task)
    have, want = float(table[source_model][kind]), float(table[target_model][kind])
    ratio = want / have
    rates = source["rates"]
    scaled = ({gid: [_round(r * ratio) for r in rs] for gid, rs in rates.items()} if isinstance(rates, dict)
              else [_round(r * ratio) for r in rates])
    return {"rates": scaled,
            "source": f"estimated from the {source_model} profile by the datasheet {kind} ratio "
                      f"({ratio:.3g} = {want:g} / {have:g} {KINDS[kind]}); not measured",
            "estimated": True}


def merge(gpus: dict, model: str, profile: dict) -> tuple:
    """(new gpus, what happened): a measured profile replaces anything; an estimate replaces only an
    estimate (or fills a gap), never a measured profile."""
    old = gpus.get(model)
    if old is not None and is_measured(old) and not is_measured(profile):
        return dict(gpus), f"{model}: kept the measured profile (an estimate never replaces it)"
    new = dict(gpus)
    new[model] = profile
    verb = "added" if old is None else "replaced the estimated" if not is_measured(old) else "replaced the measured"
    return new, f"{model}: {verb} profile"


def estimates(task: tasks.Task, table: dict) -> tuple:
    """(new gpus, notes): an estimate for every GPU of the table without a measured profile."""
    gpus = task.data["performance"].get("gpus", {})
    src = estimate_source(gpus)
    if src is None:
        return dict(gpus), [f"no measured profile to estimate from: measure one first (grader calibrate "
                            f"{task.name} --write on a GPU)"]
    model, profile = src
    kind = bound_kind(task)
    notes = []
    new = dict(gpus)
    for target, entry in table.items():
        if target == model or (target in new and is_measured(new[target])):
            continue
        if entry.get(kind) is None or table[model].get(kind) is None:
            notes.append(f"{target}: no datasheet {kind} figure in gpus.json, not estimated")
            continue
        new, note = merge(new, target, estimated_profile(task, model, profile, target, table))
        notes.append(note)
    return new, notes


# ---------------------------------------------------------------------------------------------
# Writing a task file: only the "gpus" object of "performance" changes, byte for byte elsewhere.

def _indent_at(text: str, i: int) -> int:
    start = text.rfind("\n", 0, i) + 1
    line = text[start:i]
    return len(line) - len(line.lstrip(" "))


def format_gpus(gpus: dict, indent: int) -> str:
    """The gpus object as the kit's task files write it: a profile per block, a key per line."""
    if not gpus:
        return "{}"
    pad, inner = " " * (indent + 2), " " * (indent + 4)
    blocks = []
    for model, prof in gpus.items():
        lines = [f"{inner}{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in prof.items()]
        blocks.append(f"{pad}{json.dumps(model, ensure_ascii=False)}: {{\n" + ",\n".join(lines) + f"\n{pad}}}")
    return "{\n" + ",\n".join(blocks) + "\n" + " " * indent + "}"


def with_gpus(text: str, gpus: dict) -> str:
    """The task file's text with performance.gpus set to gpus; every other byte as it was."""
    data = json.loads(text)
    for ascii_only in (True, False):  # a file written whole by json.dumps(indent=2) stays so
        if text == json.dumps(data, indent=2, ensure_ascii=ascii_only) + "\n":
            data["performance"]["gpus"] = gpus
            return json.dumps(data, indent=2, ensure_ascii=ascii_only) + "\n"
    span = tasks.find_value(text, ("performance", "gpus"))
    if span is not None:
        start, end = span
        new = text[:start] + format_gpus(gpus, _indent_at(text, start)) + text[end:]
    else:  # no "gpus" key yet: appended to the performance object, indented like its last key
        pstart, pend = tasks.find_value(text, ("performance",))
        last = pend - 1
        while text[last - 1] in " \t\r\n":
            last -= 1
        key_indent = _indent_at(text, tasks.skip_space(text, pstart + 1))  # the column of its first key
        new = (text[:last] + f",\n{' ' * key_indent}\"gpus\": {format_gpus(gpus, key_indent)}" + text[last:])
    data["performance"]["gpus"] = gpus
    if json.loads(new) != data:
        raise tasks.TaskError("the task file could not be edited in place (its gpus object was not found as expected)")
    return new


def write_profiles(task: tasks.Task, gpus: dict) -> bool:
    """Writes gpus into the task file (whole or not at all); False when nothing changed."""
    path = task.folder / "task.json"
    text = path.read_text()
    new = with_gpus(text, gpus)
    if new == text:
        return False
    tasks.parse(task.name, task.folder, json.loads(new), str(path))  # still a valid task file
    report.atomic_write(path, new)
    task.data["performance"]["gpus"] = gpus
    return True


# ---------------------------------------------------------------------------------------------
# The verb.

def main(args) -> int:
    names = args.assignments or tasks.registry()
    loaded = [tasks.load(n) for n in names]
    if args.estimate:
        return run_estimate(loaded, args.write)
    return run_measure(loaded, gpu.detect(), args.write)


def run_estimate(loaded: list, write: bool, root: Path = tasks.ROOT, say=print) -> int:
    table = gpu.table(root)
    for task in loaded:
        new, notes = estimates(task, table)
        say(f"== {task.name} ({bound_kind(task)} bound)")
        for note in notes:
            say(f"   {note}")
        changed = {m: p for m, p in new.items() if task.data["performance"].get("gpus", {}).get(m) != p}
        if write:
            say(f"   written to {task.folder / 'task.json'}" if write_profiles(task, new) else "   unchanged")
        elif changed:
            say(_show(changed))
    if not write:
        say("(nothing written: add --write to store these profiles in the task files)")
    return 0


def run_measure(loaded: list, info: GpuInfo, write: bool, say=print) -> int:
    from .bench import driver_version
    driver = driver_version(info)
    date = datetime.date.today().isoformat()
    key = info.model
    say(f"GPU: {info.name} ({info.arch}, driver {driver})" +
        (f"; its profile is {key!r} of assignments/gpus.json" if key else ""))
    if key is None and write:
        say(f"   {info.name} is not in assignments/gpus.json: add it there (its device name and datasheet "
            f"peaks) to store its profile; the profiles are only shown")
    failed = 0
    for task in loaded:
        say(f"== {task.name}: {task.data['performance']['baseline']}")
        if info.count < task.gpus_required:
            say(f"   skipped: {task.name} needs {task.gpus_required} GPUs and this machine has {info.count}")
            continue
        try:
            measured = measure(task, info, say)
        except (build.KitError, tasks.TaskError) as e:
            say(f"   not measured: {e}")
            failed = 1
            continue
        profile = measured_profile(task, info, driver, date, measured)
        say(_show({key or info.name: profile}))
        if write and key:
            new, note = merge(task.data["performance"].get("gpus", {}), key, profile)
            write_profiles(task, new)
            say(f"   {note}; written to {task.folder / 'task.json'}")
    if not write:
        say("(nothing written: add --write to store these profiles in the task files)")
    return failed


def _show(gpus: dict) -> str:
    return "\n".join("   " + line for line in format_gpus(gpus, 0).splitlines())
