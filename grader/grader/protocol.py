"""How the grader and the harness talk: plan files in, JSON-lines results and exit codes out.

Never stdout: a submission shares the runner's process and may print anything.
"""
from __future__ import annotations

import json
import secrets
from pathlib import Path

# Mirrors kit::ExitCode in harness/include/kit.cuh (a test checks that they agree).
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NO_GPU = 3
EXIT_LAUNCH_ERROR = 4
EXIT_RUNTIME_ERROR = 5
EXIT_HARNESS_ERROR = 6

_MASK = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64's finaliser, as in kit.cuh."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def new_secret() -> int:
    """A per-run secret: the inputs of a grading run cannot be known before it starts."""
    return secrets.randbits(64)


def case_seed(public: int, secret: int, salt: int = 0) -> int:
    """The seed the harness uses: the task's public seed mixed with the run's secret."""
    return mix64(mix64(public ^ secret) + salt)


def plan_line(kind: str, case_id: str, seed: int, tol: float, reference: str, params: dict, **extra) -> str:
    words = [kind, f"id={case_id}", f"seed={seed}", f"rtol={tol!r}", f"reference={reference}"]
    words += [f"{k}={v}" for k, v in extra.items()]
    words += [f"{k}={v}" for k, v in params.items()]
    return " ".join(words)


def read_results(path: Path) -> list:
    """The complete JSON lines of a results file; a line cut off by a crash is dropped."""
    records = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return records
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records
