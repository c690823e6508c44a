"""The one line a batch shows while it runs, and the lines it says."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from ..report import one_line


def fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def time_left(to_check: int, to_time: int, check_s: list, timing_s: list, passed: int, side_by_side: int,
              gpus: int) -> float:
    """Seconds a batch has left, from what its stages took so far: the checks still to run, side by
    side (`side_by_side` per GPU), then the timings of those that pass, one per GPU. `to_check`:
    submissions not checked yet (building or waiting); `to_time`: checked, passed and not yet timed;
    `passed`: of the `len(check_s)` checked so far. Before any timing ended, a timing is taken to
    cost what a check does."""
    if not check_s:
        return float("nan")
    check = sum(check_s) / len(check_s)
    timing = sum(timing_s) / len(timing_s) if timing_s else check
    pass_rate = passed / len(check_s)
    return (to_check * check / max(1, side_by_side * gpus)
            + (to_time + to_check * pass_rate) * timing / max(1, gpus))


@dataclass
class StageTimes:
    """What a batch's GPU stages took so far, for the time left."""
    check_s: list = field(default_factory=list)
    """Seconds of each check (correctness and races) that ended."""
    timing_s: list = field(default_factory=list)
    """Seconds of each timing that ended."""
    passed: int = 0
    """Checks that passed (their submission is timed next)."""
    to_time: int = 0
    """Submissions waiting for a timing, or for a check alone."""

    def checked(self, seconds: float, timed: bool, again: bool) -> None:
        self.check_s.append(seconds)
        self.passed += timed
        self.to_time += timed or again

    def timed(self, seconds: float) -> None:
        """A submission left the timing queue: timed in `seconds`, or not timed (0: its check alone
        failed)."""
        self.to_time -= 1
        if seconds:
            self.timing_s.append(seconds)


class Progress:
    """Progress of a Batch (self.lock, self.tty, self.done, self.total, self.counts, self.started, and
    self.stages, the seconds of each check and timing so far)."""

    def _say(self, line: str) -> None:
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K")
            print(one_line(line), file=sys.stderr, flush=True)  # one line: a compiler quoting a source line
            # of the student's would otherwise print a line of their choosing (a verdict for another student)

    def _progress(self, final: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        st = self.stages
        left = time_left(self.total - self.done - st.to_time, st.to_time, st.check_s, st.timing_s, st.passed,
                         self.gpus.checks, len(self.gpus)) if st.check_s else None
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        line = (f"[{self.done}/{self.total}] {counts or 'started'} | elapsed {fmt_s(elapsed)}"
                + (f" | left ~{fmt_s(left)}" if left is not None and self.done < self.total else ""))
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K" + line + ("\n" if final else ""))
                sys.stderr.flush()
            elif final:
                print(line, file=sys.stderr, flush=True)
