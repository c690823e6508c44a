"""A runner judged from outside its process: the checker's judge (no student code) and a runner,
started side by side and joined by a socket the grader makes.

The judge draws every seed and probe position itself, times each call with its own clock and reads
the outputs itself (harness/src/judge.cu); its results come back through a pipe that only the grader
holds, so nothing a runner writes (a file, its output, the socket) can become a result. The runner
is started only once the judge says it is ready: the judge measures its own cost of reading the
outputs before any student code exists, so that no runner can make that measurement larger.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import build, cpus, libraries, limits, protocol, sandbox
from .results import Verdict


STOPPED = "stopped by the grader: the program "
"""How the message of a case starts where the program went over its jail's limits (its work folder's disk
or files, its cgroup's processes or memory)."""


def over_own_limit(message: str) -> bool:
    """Whether a case's message says its program went over one of its own limits (its work folder's disk
    or files, its processes, its memory where the cgroup says so, the size of a file it wrote): what it
    did alone, which no other program adds to. Not a kill by the machine's out-of-memory killer nor a
    stop for the disk's reserve, which other programs can bring about (sandbox.MACHINE_SHORT,
    limits.DISK_LOW)."""
    if message == FILE_TOO_LARGE:
        return True
    return (message.startswith(STOPPED) and sandbox.MACHINE_SHORT not in message
            and limits.DISK_LOW not in message)


def killed_by(signum: int) -> str:
    """How a runner's death by a signal reads in a case's message."""
    return f"the program was killed by signal {int(signum)}"


FILE_TOO_LARGE = killed_by(signal.SIGXFSZ)
"""A runner's death by SIGXFSZ: its writes went past its own file size limit (RLIMIT_FSIZE, one
process's own), as hostile/flood.cu's endless printing does."""


@dataclass
class Session:
    records: list = field(default_factory=list)
    """The judge's JSON records, in order."""
    runner: Optional[sandbox.Run] = None
    """How the runner ended (None: it never started, because the judge failed first)."""
    judge: Optional[sandbox.Run] = None
    """How the judge ended; a judge that fails is the kit's problem, never the student's."""
    timed_out: bool = False
    """The grader stopped both: a call ran past the case limit, or the whole past its limit."""
    arrived: list = field(default_factory=list)
    """Seconds from the judge's start to each record's arrival (for reading where time goes)."""
    seconds: float = 0.0
    """The session's wall time, start of the judge to the end of both."""

    def ended_early(self, case_id: Optional[str] = None) -> bool:
        """The runner faulted or went before the judge was done with it, or took the GPU's memory (with
        `case_id`, in that case), or went over the jail's limits (in any case: found as it ran or once it
        had ended)."""
        if self.runner is not None and self.runner.stopped_for:
            return True
        return any(r.get("event") in ("launch_error", "runtime_error", "runner_gone", "out_of_memory")
                   and (case_id is None or r.get("case") == case_id) for r in self.records)

    def out_of_memory(self) -> Optional[dict]:
        """The judge's record of one of its own allocations failing for want of memory, or None."""
        return next((r for r in self.records if r.get("event") == "out_of_memory"), None)

    def fault(self, case_id: str, conceal: bool = False) -> tuple:
        """(verdict, message) for a runner that ended early in case `case_id`. With `conceal` (a hidden
        case) the message holds nothing the program chose: not its fault's text or CUDA error (which it
        can send itself), its exit status or signal, the memory it left free, or its last line of
        output. The runner knows the case's sizes, and any of these could carry them out."""
        run = self.runner
        if run is not None and run.stopped_for:
            return Verdict.RUNTIME_ERROR, f"{STOPPED}{run.stopped_for}"
        oom = self.out_of_memory()
        if oom is not None:
            return Verdict.RUNTIME_ERROR, _out_of_memory(oom, conceal)
        for r in self.records:
            if r.get("case") == case_id and r.get("event") in ("launch_error", "runtime_error"):
                what = "" if conceal else f": {r.get('cuda_error')} ({r.get('message')})"
                if r["event"] == "launch_error":
                    return Verdict.LAUNCH_ERROR, f"a kernel launch (or CUDA call) was refused{what}; nothing ran"
                return Verdict.RUNTIME_ERROR, f"the kernel faulted{what}"
        gone = next((r for r in self.records if r.get("event") == "runner_gone"), {})
        if gone and "gone" not in gone.get("message", ""):
            return Verdict.RUNTIME_ERROR, "the program broke the judge's protocol" + (
                "" if conceal else f" ({gone['message']})")
        if run is None:
            return Verdict.RUNTIME_ERROR, "the program did not start"
        if conceal:
            return Verdict.RUNTIME_ERROR, "the program ended before the judge was done with it"
        if run.returncode < 0:
            return Verdict.RUNTIME_ERROR, killed_by(-run.returncode)
        if run.returncode == 0:
            return Verdict.RUNTIME_ERROR, "the program exited with status 0 before the judge was done with it"
        last = sandbox.last_line(run.output)
        return Verdict.RUNTIME_ERROR, f"the program exited with status {run.returncode}" + (f": {last}" if last else "")


def _out_of_memory(r: dict, conceal: bool = False) -> str:
    """What a student reads when the judge found the GPU's memory gone while their program ran (with
    `conceal`, not how much was left: the program chose that)."""
    gib = lambda b: f"{b / 2**30:.1f}"
    free = ""
    if r.get("total_bytes") and not conceal:
        free = (f" ({gib(r.get('free_bytes', 0))} of {gib(r['total_bytes'])} GiB were free then, "
                f"{gib(r.get('free_at_start_bytes', 0))} before your program's first call)")
    return (f"the GPU's memory ran out while your program held it: the judge could not allocate what case "
            f"{r.get('case')} needs{free}. Free what you allocate (cudaFree), and allocate no more than "
            f"the task needs")


class _Lines:
    """JSON lines read from a pipe as they come, never blocking."""

    def __init__(self, fd: int):
        self.fd, self.buf, self.records, self.closed = fd, b"", [], False
        self.arrived, self.t0 = [], time.monotonic()
        os.set_blocking(fd, False)

    def read(self, wait: float) -> bool:
        """Reads what is there (waiting up to `wait` s for something); True when a record arrived."""
        if self.closed:
            time.sleep(wait)
            return False
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return False
        before = len(self.records)
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return False
        if not chunk:
            self.closed = True
        self.buf += chunk
        if len(self.buf) > protocol.RESULTS_LIMIT:
            raise RuntimeError("the judge wrote more than the results limit")
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            self.records.extend(protocol.parse_lines(line))
        self.arrived += [time.monotonic() - self.t0] * (len(self.records) - len(self.arrived))
        return len(self.records) > before


_JUDGES_TURN = ("done", "timed", "check")
"""Records after which the judge works alone (reading outputs, computing the truth) until "checked",
or, for checks made between bursts of timed runs, until "resumed": the case limit, which is the
runner's, does not run then; JUDGE_LIMIT does."""
JUDGE_LIMIT = 1800.0


JUDGE_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
"""What the judge's environment adds to the grader's: one hardware work queue for its CUDA context in
place of the driver's 8. The judge works on one stream, and creating each queue is a call into the
driver under a lock that every process on the machine shares, so a batch's checks, which start two
judges and two runners each, queued on it: on an H200 four trmm checks at once took 3.8 to 4.3 s each,
and 1.8 to 1.9 s with this (sixteen contexts at once: 2.4 s, 0.84 s with one queue). The runner, with
the student's code, and the library's server keep the driver's default, as in a program of their own."""


def run(checker: Path, plan: str, runner_cmd: list, work: Path, label: str, case_limit: float, total_limit: float,
        view: Optional[str] = "run", read_only: tuple = (), judge_args: tuple = (),
        gpus: Optional[tuple] = None, stop: Optional[threading.Event] = None, timed: bool = False) -> Session:
    """Judges `runner_cmd` (which gets the socket's descriptor number as its last argument) on the
    plan lines `plan`, which reach the judge through its standard input (a copy is kept in
    work/LABEL.plan, for reading only: a runner can write there). Both use the GPUs `gpus` (indices in
    PCI order; None: the machine's default).
    The grader stops both when the runner holds a case for `case_limit` seconds with no record, or
    after `total_limit` (the judge's own work between "done" and "checked" counted in neither), or once
    `stop` is set (both as a time-out). In a `timed` session the judge times each run on a core the runner
    does not have (cpus.apart)."""
    sandbox.seal()
    s = Session()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    rfd, wfd = os.pipe()
    protocol.write_fresh(work / f"{label}.plan", plan)
    cmd = [str(checker), "judge", "-", "--socket", str(mine.fileno()), "--results", str(wfd),
           "--forbid", ",".join(libraries.FORBIDDEN_LIBS), *judge_args]
    judge_cpus, runner_cpus = cpus.apart(sandbox.pinned() or os.sched_getaffinity(0)) if timed else (None, None)
    if judge_cpus:
        cmd += ["--cpus", ",".join(map(str, judge_cpus))]
    judge = runner = None
    lines = _Lines(rfd)
    stopped = lambda: stop is not None and stop.is_set()
    try:
        try:
            # In the work folder, which the runner writes: sandbox.outside_env keeps the loader out of it.
            judge = sandbox.Proc(cmd, work, work / f"{label}-judge.log", env={**os.environ, **JUDGE_ENV},
                                 pass_fds=(mine.fileno(), wfd), stdin=plan.encode(), gpus=gpus)
        finally:
            mine.close()
            os.close(wfd)
        start = last = time.monotonic()
        while not any(r.get("event") == "ready" for r in lines.records):  # the judge's own start-up
            if not judge.running() and not lines.read(0):
                break
            lines.read(0.05)
            if time.monotonic() - start > total_limit or stopped():
                s.timed_out = True
                break
        if any(r.get("event") == "ready" for r in lines.records) and not s.timed_out:
            try:
                with sandbox.on_cpus(runner_cpus or sandbox.pinned()):
                    runner = sandbox.Proc([*runner_cmd, str(theirs.fileno())], work, work / f"{label}.log",
                                          view=view, read_only=read_only, pass_fds=(theirs.fileno(),), gpus=gpus)
            finally:
                theirs.close()
            last = time.monotonic()
            judging = 0.0  # seconds spent on the judge's own turns
            while judge.running() or lines.read(0):
                turn = lines.records[-1].get("event") in _JUDGES_TURN if lines.records else False
                if lines.read(0.05):
                    if turn:
                        judging += time.monotonic() - last
                    last = time.monotonic()
                now = time.monotonic()
                limit = JUDGE_LIMIT if turn else case_limit
                if now - last > limit or now - start - judging > total_limit or stopped():
                    s.timed_out = True
                    break
                if not runner.running() and runner.stopped_for:
                    break  # over the disk limit: the judge sees the runner go
            grace = time.monotonic() + 2
            while runner.running() and time.monotonic() < grace and not s.timed_out:
                time.sleep(0.02)  # a runner told "bye" ends on its own
    finally:
        theirs.close()
        if runner is not None:
            s.runner = runner.finish(s.timed_out)
        if judge is not None:
            s.judge = judge.finish(s.timed_out)
        while lines.read(0):
            pass
        os.close(rfd)
    s.records, s.arrived, s.seconds = lines.records, lines.arrived, time.monotonic() - lines.t0
    return s


class Forbidden(Exception):
    """The runner's process loaded a library the assignment forbids, or ran code no file of the system
    holds."""


def forbidden_message(record: dict) -> str:
    """The verdict's words for the judge's forbidden_library record, by the check that found it (its
    kind): a forbidden library by its file name, code from no file of the system as wire::foreign_code
    describes it, or a memory map the runner made unreadable."""
    what, where, kind = record.get("library", ""), f"(in case {record.get('case')})", record.get("kind")
    if kind == "unreadable":
        return f"kernel.cu's process made its memory map unreadable: what it runs cannot be checked {where}"
    if kind == "foreign":
        return f"kernel.cu's process ran code no file of the system holds: {what} {where}"
    return f"kernel.cu's process loaded a library this assignment forbids: {what} {where}"


def session(task, work: Path, arch: str, plan: str, label: str, case_limit: float, ncases: int,
            secret: Optional[int], gpus: Optional[tuple] = None, timed: bool = False) -> Session:
    """The judge and the student's runner (work/runner) on `plan`; stopped when any one case runs
    longer than case_limit seconds. A failing judge is the kit's problem, not the student's: KitError."""
    args = ("--secret", str(secret)) if secret is not None else ()
    s = run(build.checker_path(task, arch), plan, [str(work / "runner")], work, label, case_limit,
            case_limit * ncases + 60, view="run", read_only=(work / "runner",), judge_args=args, gpus=gpus,
            timed=timed)
    judge_failed(task, s)
    bad = next((r for r in s.records if r.get("event") == "forbidden_library"), None)
    if bad:
        raise Forbidden(forbidden_message(bad))
    return s


def judge_failed(task, s: Session) -> None:
    """KitError where the judge failed; KeyboardInterrupt where it was stopped from outside."""
    if s.judge is not None and s.judge.returncode in (-signal.SIGTERM, -signal.SIGINT):
        # Stopped from outside (Ctrl-C, a TERM from scancel or a time limit reaches every process of
        # the job): no verdict, the grading stops as the grader does.
        raise KeyboardInterrupt
    if s.judge is None or s.timed_out or s.judge.returncode in (0, -9):
        return
    raise build.KitError(f"the {task.name} judge failed (exit {s.judge.returncode}):\n{s.judge.output}")
