"""The registry of assignments and their task files (assignments/<name>/task.json)."""
from __future__ import annotations

import ast
import json
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
"""The kit's top folder (the one with the Makefile)."""

HIDDEN_ID = re.compile(r"hidden-\d+")
"""The only ids a hidden case may have: opaque, since students see them."""
RESERVED = {"id", "seed", "reference", "scored", "why", "tolerance", "hidden"}


class TaskError(Exception):
    """A registry or task file the grader cannot use; the message says which file and why."""


@dataclass
class Case:
    id: str
    """Short name, unique in the task (e.g. n1023)."""
    params: dict
    """Problem sizes, passed to the harness as key=value."""
    seed: int
    """Public seed; the grader mixes a secret per-run value into it."""
    reference: str
    """How the checker computes the truth: "cpu" (the loop) or "library" (on the GPU)."""
    tol: float = 0.0
    """Relative error allowed: the task's, or the case's own "tolerance" (0 for exact results)."""
    scored: bool = True
    """False for a case with nothing to compute (it checks that nothing is written): it must pass,
    but carries no share of the points, so that a submission doing nothing earns nothing."""
    hidden: bool = False
    """True for a case only TAs grade ("hidden": true in the task file): the student kit leaves it
    out, and grading includes it only when asked (grade --hidden, make grade HIDDEN=1)."""

    def describe(self) -> str:
        return describe(self.params)


def describe(params: dict) -> str:
    """A case's sizes as reports write them: "m=17 n=33 k=65"."""
    return " ".join(f"{k}={v}" for k, v in params.items())


@dataclass
class Graded:
    case: Case
    """The correctness case timed for the score (fresh seeds for every timed run)."""
    warmup: int
    """Untimed calls first."""
    runs: int
    """Timed calls, at least 10: the median is scored."""
    gap_ms: Optional[float] = None
    """Milliseconds between the starts of its bursts of timed runs (None: the judge's 400; a batch's
    --burst-gap-ms)."""


@dataclass
class Task:
    name: str
    """The assignment's name in the registry."""
    folder: Path
    """assignments/<name>/."""
    data: dict
    """task.json as read."""
    cases: list
    """Correctness cases, in order."""
    graded: list
    """The timed cases (Graded), each worth an equal share of the performance points."""
    hidden: list = field(default_factory=list)
    """The hidden cases of the task file, whether or not `cases` includes them."""

    @property
    def title(self) -> str:
        return self.data["title"]

    @property
    def entry_point(self) -> str:
        return self.data["entry_point"]

    @property
    def metric(self) -> str:
        return self.data["metric"]["name"]

    @property
    def tolerance(self) -> float:
        return float(self.data["tolerance"]["rel"])

    @property
    def timeouts(self) -> dict:
        return self.data["timeouts_s"]

    @property
    def points(self) -> dict:
        return self.data["points"]

    @property
    def max_score(self) -> float:
        return float(self.points["correctness"] + self.points["performance"])

    @property
    def gpus_required(self) -> int:
        """GPUs the assignment needs (jacobi_2gpu: 2); elsewhere it is skipped, with the reason."""
        return int(self.data.get("gpus_required", 1))

    @property
    def returned(self) -> dict:
        """Values the entry point returns that the work depends on (jacobi: "sweeps"), each with
        the formula of its bound: formulas use the checked value where one is known, else the bound."""
        return self.data["metric"].get("returned", {})

    def _vars(self, params: dict, returned) -> dict:
        v = dict(params)
        for name, bound in self.returned.items():
            v[name] = (returned or {}).get(name, evaluate(bound, params))
        return v

    def work(self, params: dict, returned: dict = None) -> float:
        """Units of work of one call (FLOPs, bytes or updates) divided by the metric's scale."""
        m = self.data["metric"]
        return evaluate(m["work"], self._vars(params, returned)) / float(m.get("per", 1.0))

    def bytes(self, params: dict, returned: dict = None):
        """Bytes one call moves as the metric counts them (the GB/s beside the rate), or None where not counted."""
        expr = self.data["metric"].get("bytes")
        return evaluate(expr, self._vars(params, returned)) if expr else None

    def least_bytes(self, params: dict, returned: dict = None):
        """Bytes no way of doing one call can keep from crossing DRAM: what the bound of a possible rate
        counts. The metric's "least_bytes" where its bytes can be beaten (jacobi's sweeps can share a
        pass over memory), else its bytes."""
        expr = self.data["metric"].get("least_bytes")
        return evaluate(expr, self._vars(params, returned)) if expr else self.bytes(params, returned)

    @property
    def sanitize(self):
        """(Case, tools) of the small case run under compute-sanitizer, or None."""
        s = self.data.get("sanitize")
        if not s:
            return None
        c = s["case"]
        params = {k: v for k, v in c.items() if k not in RESERVED}
        return Case(c["id"], params, int(c["seed"]), "cpu", self.tolerance), list(s["tools"])

    @property
    def peak_kind(self) -> str:
        """Which of the GPU's peaks bounds the metric: fp64, fp32 or dram."""
        return self.data["metric"]["peak"]


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
        ast.USub: operator.neg}


def evaluate(expr: str, params: dict) -> float:
    """Arithmetic over the case's parameters, e.g. "n*n*(n+1)"; nothing else is allowed."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in params:
                raise TaskError(f"formula {expr!r} uses {node.id!r}, which the case does not define")
            return params[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise TaskError(f"formula {expr!r}: only numbers, parameters and + - * / ** are allowed")
    try:
        return float(ev(ast.parse(expr, mode="eval")))
    except SyntaxError as e:
        raise TaskError(f"formula {expr!r} is not arithmetic: {e.msg}") from None


def registry(root: Path = ROOT) -> list:
    """Assignment names, in the order of assignments/registry.txt."""
    path = root / "assignments" / "registry.txt"
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise TaskError(f"cannot read the registry {path}: {e.strerror}") from None
    return [w for line in lines for w in line.split("#", 1)[0].split()]


def load(name: str, root: Path = ROOT, include_hidden: bool = False) -> Task:
    """The task of an assignment, validated; TaskError names the file and the problem.
    Its cases are the public ones, and the hidden ones too with include_hidden (TA grading)."""
    names = registry(root)
    if name not in names:
        raise TaskError(f"unknown assignment {name!r}; the registry lists: {', '.join(names)}")
    folder = root / "assignments" / name
    path = folder / "task.json"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise TaskError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise TaskError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    return parse(name, folder, data, str(path), include_hidden)


HARNESS_WORDS = {"rtol", "warmup", "runs", "case", "timed"}


def parse(name: str, folder: Path, data: dict, where: str, include_hidden: bool = False) -> Task:
    """A validated Task; any problem with the file is a TaskError that names it."""
    try:
        return _parse(name, folder, data, where, include_hidden)
    except TaskError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise TaskError(f"{where}: malformed task file: {what}") from None


def _parse(name: str, folder: Path, data: dict, where: str, include_hidden: bool = False) -> Task:
    for key in ("title", "entry_point", "metric", "tolerance", "cases", "graded", "timeouts_s", "points",
                "performance"):
        if key not in data:
            raise TaskError(f"{where}: missing key {key!r}")
    cases, seen = [], set()
    reals = set(data.get("real_parameters", []))  # e.g. a convergence tolerance; all others are integers
    for i, c in enumerate(data["cases"]):
        if "id" not in c or "seed" not in c:
            raise TaskError(f"{where}: case {i} needs an 'id' and a 'seed'")
        if c["id"] in seen:
            raise TaskError(f"{where}: case id {c['id']!r} appears twice")
        seen.add(c["id"])
        ref = c.get("reference", "cpu")
        if ref not in ("cpu", "library"):
            raise TaskError(f"{where}: case {c['id']}: reference must be 'cpu' or 'library', not {ref!r}")
        params = {k: v for k, v in c.items() if k not in RESERVED}
        for k, v in params.items():
            if k in HARNESS_WORDS:
                raise TaskError(f"{where}: case {c['id']}: {k!r} is a word of the harness, not a parameter name")
            if k in reals:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or abs(v) == float("inf"):
                    raise TaskError(f"{where}: case {c['id']}: parameter {k} must be a number, not {v!r}")
            elif isinstance(v, bool) or not isinstance(v, int):
                raise TaskError(f"{where}: case {c['id']}: parameter {k} must be an integer, not {v!r}"
                                + (" (list it under real_parameters if it is meant to be real)" if isinstance(v, float) else ""))
        tol = float(c.get("tolerance", data["tolerance"]["rel"]))
        hidden = c.get("hidden", False)
        if not isinstance(hidden, bool):
            raise TaskError(f"{where}: case {c['id']}: hidden must be true or false, not {hidden!r}")
        if hidden and not HIDDEN_ID.fullmatch(c["id"]):
            raise TaskError(f"{where}: hidden case {c['id']!r}: students see a hidden case's id in their results, "
                            "so it must say nothing of its sizes: name it hidden-1, hidden-2, ...")
        if not hidden and HIDDEN_ID.fullmatch(c["id"]):
            raise TaskError(f"{where}: case {c['id']!r} is named like a hidden case but is not hidden")
        cases.append(Case(c["id"], params, int(c["seed"]), ref, tol, bool(c.get("scored", True)), hidden))
    if not any(c.scored and not c.hidden for c in cases):
        raise TaskError(f"{where}: no scored cases")
    graded = []
    for g in data["graded"] if isinstance(data["graded"], list) else [data["graded"]]:
        case = next((c for c in cases if c.id == g.get("id")), None)
        if case is None:
            raise TaskError(f"{where}: graded case {g.get('id')!r} is not among the cases")
        if case.hidden:
            raise TaskError(f"{where}: graded case {case.id!r} is hidden: the timed cases must be public")
        runs, warmup = int(g.get("runs", 10)), int(g.get("warmup", 2))
        if runs < 10:
            raise TaskError(f"{where}: graded.runs must be at least 10 (a median needs many runs), not {runs}")
        graded.append(Graded(case, warmup, runs))
    if not graded:
        raise TaskError(f"{where}: no graded case")
    ids = [g.case.id for g in graded]
    tiers = data["performance"].get("tiers", [])
    if [t["fraction"] for t in tiers] != sorted(t["fraction"] for t in tiers):
        raise TaskError(f"{where}: performance tiers must be in increasing order")
    if [t["points"] for t in tiers] != sorted(t["points"] for t in tiers):
        raise TaskError(f"{where}: performance tier points must not decrease")
    if tiers and tiers[-1]["points"] != data["points"]["performance"]:
        raise TaskError(f"{where}: the last performance tier must give all {data['points']['performance']} points")
    for model, prof in data["performance"].get("gpus", {}).items():
        rates = prof.get("rates", [])
        # One list of rates, or with several graded cases one list per graded case id.
        per_case = rates if isinstance(rates, dict) else {ids[0]: rates} if len(ids) == 1 else {}
        if sorted(per_case) != sorted(ids):
            raise TaskError(f"{where}: thresholds for {model} need rates for the graded case(s) {', '.join(ids)}")
        for gid, r in per_case.items():
            if len(r) != len(tiers):
                raise TaskError(f"{where}: thresholds for {model} need one rate per tier ({len(tiers)})")
            if list(r) != sorted(r):
                raise TaskError(f"{where}: thresholds for {model} must increase tier by tier")
    if "least_bytes" in data["metric"] and not str(data["metric"].get("least_why", "")).strip():
        raise TaskError(f"{where}: metric.least_bytes needs a \"least_why\": how a call can move fewer bytes "
                        "than the metric counts (the handout says it)")
    hidden = [c for c in cases if c.hidden]
    task = Task(name, folder, data, [c for c in cases if include_hidden or not c.hidden], graded, hidden)
    if task.sanitize and not set(task.sanitize[1]) <= {"racecheck", "memcheck", "synccheck", "initcheck"}:
        raise TaskError(f"{where}: sanitize.tools must be among racecheck, memcheck, synccheck, initcheck")
    for c in cases:  # every formula must evaluate for every case: fail now, not mid-grading
        try:
            task.work(c.params)
            if (task.least_bytes(c.params) or 0) > (task.bytes(c.params) or 0):
                raise TaskError("metric.least_bytes cannot exceed metric.bytes (and needs them)")
        except TaskError as e:
            raise TaskError(f"{where}: case {c.id}: {e}") from None
    return task


# ---------------------------------------------------------------------------------------------
# A task file's text, for tools that edit it in place (calibrate, dist): where a value sits, so
# that everything around it stays as written.

def skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def find_value(text: str, path: tuple, i: int = None):
    """(start, end) of the JSON value at the key path (e.g. ("performance", "gpus")), or None."""
    decode = json.JSONDecoder().raw_decode
    i = skip_space(text, 0) if i is None else i
    if not path:
        return i, decode(text, i)[1]
    if text[i] != "{":
        return None
    i = skip_space(text, i + 1)
    while text[i] != "}":
        key, i = decode(text, i)
        i = skip_space(text, skip_space(text, i) + 1)  # past the colon
        if key == path[0]:
            return find_value(text, path[1:], i)
        i = skip_space(text, decode(text, i)[1])
        if text[i] == ",":
            i = skip_space(text, i + 1)
    return None
