"""What the judge's check records say: a case's verdict, and one line on an output array for the
student (concealing, for a hidden case, anything its sizes could be worked out from)."""
from __future__ import annotations

from .results import CaseResult, Verdict
from .tasks import Case


def case_result(case: Case, records: list, seconds) -> CaseResult:
    """A case's verdict from the judge's check records of it (one per output array)."""
    if not records:
        return CaseResult(case.id, case.params, Verdict.INCORRECT, "the checker saw no output",
                          tolerance=case.tol, seconds=seconds)
    # The failing record that says most: nothing written beats a wrong value, which beats a small error.
    worst = max(records, key=lambda r: (not r.get("pass"), bool(r.get("unwritten") or r.get("reason")),
                                        number(r.get("rel_error"))))
    msg = explain(worst, case.tol, conceal=case.hidden)
    verdict = Verdict.CORRECT if all(r.get("pass") for r in records) else Verdict.INCORRECT
    # The error norm covers only the elements that were written and finite: show it only when that
    # is all of them, or it would look better than the output is.
    whole = not any(worst.get(k) for k in ("unwritten", "nonfinite", "protected_changed", "reason"))
    return CaseResult(case.id, case.params, verdict, msg, rel_error=number(worst.get("rel_error")) if whole else None,
                      tolerance=case.tol, seconds=seconds)


def number(x) -> float:
    """A record's number; inf for one that is missing or not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("inf")


def explain(rec: dict, tol: float, conceal: bool = False) -> str:
    """One line on what a checker record says about an output array; with `conceal` (a hidden case)
    no element count, index or value, from which its sizes could be worked out."""
    name = rec.get("array", "output")
    if "reason" in rec:
        return f"{name}: {rec['reason']}"
    n = rec.get("compared", 0) - rec.get("protected", 0)  # the elements that had to be computed
    some = (lambda k: "some") if conceal else (lambda k: f"{k} of {n}")
    if rec.get("unwritten"):
        if rec["unwritten"] == n:
            return f"output not computed: no element of {name} was written"
        return f"{some(rec['unwritten'])} elements of {name} were never written"
    if rec.get("protected_changed"):
        return f"{'some' if conceal else rec['protected_changed']} elements of {name} that must not change were changed"
    if rec.get("nonfinite"):
        return f"{some(rec['nonfinite'])} elements of {name} are NaN or infinite"
    rel = number(rec.get("rel_error"))
    if conceal:  # the program chose the error, and could write the case's sizes into it
        return "within the tolerance" if rec.get("pass") else f"the relative error exceeds the tolerance {tol:g}"
    if rec.get("pass"):
        return f"relative error {rel:.1e}"
    if "expected" in rec:  # a one-element output: a returned value (a count of sweeps, a sum) or n = 1
        where = f"{name} is {number(rec.get('value')):.17g}, expected {number(rec.get('expected')):.17g}"
    else:
        where = (f"worst: {name}[{rec.get('worst_index')}] = {number(rec.get('worst_got')):.17g}, "
                 f"expected {number(rec.get('worst_want')):.17g}")
    return f"relative error {rel:.1e} exceeds the tolerance {tol:g} ({where})"
