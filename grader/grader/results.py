"""What grading produces: plain dataclasses, written as JSON and read back by the reports."""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Optional


class Verdict(str, enum.Enum):
    """The outcome of a submission, or of one of its cases."""

    CORRECT = "correct"
    BUILD_ERROR = "build_error"                  # the compiler or the linker refused it
    FORBIDDEN_CALL = "forbidden_call"            # it calls a library the assignment forbids
    LAUNCH_ERROR = "launch_error"                # a kernel launch was rejected: nothing ran
    RUNTIME_ERROR = "runtime_error"              # it faulted (illegal address, trap) or exited
    TIMEOUT = "timeout"                          # it did not finish in time
    INCORRECT = "incorrect"                      # it ran, and the output is wrong
    RACE = "race"                                # compute-sanitizer found a data race, right result or not
    INVALID_MEASUREMENT = "invalid_measurement"  # correct, but timed above the GPU's peak
    NOT_RUN = "not_run"                          # a case skipped after an earlier timeout
    SKIPPED = "skipped"                          # not graded on this machine (too few GPUs)


@dataclass
class CaseResult:
    id: str
    """The case's id in the task file."""
    params: dict
    """The problem sizes of the case (e.g. {"n": 17})."""
    verdict: Verdict
    """CORRECT, or what went wrong in this case."""
    message: str = ""
    """One line for the student: how far off, what was never written, which error."""
    rel_error: Optional[float] = None
    """||out - ref|| / ||ref|| of the worst output array, when the case ran to the end."""
    tolerance: Optional[float] = None
    """The relative error allowed."""
    seconds: Optional[float] = None
    """Wall time of the submission's call in this case (not a performance figure)."""


@dataclass
class Timing:
    times_ms: list
    """Every timed run, in milliseconds, in the order taken (five bursts at least 0.4 s apart), each on fresh
    inputs after an L2 flush."""
    warmup: int
    """Untimed calls before the timed ones."""
    waits_ms: list = field(default_factory=list)
    """For each timed run, the milliseconds the judge's thread and the one serving it spent waiting for a
    CPU while other processes had it (-1: the system does not say). Near zero on an idle machine."""
    others_cpu_ms: list = field(default_factory=list)
    """For each of the student's timed runs, the milliseconds of CPU its program's other threads and
    processes used meanwhile (-1: the system does not say): a run that waited while they ran was slowed by
    the program itself."""

    @property
    def median_ms(self) -> float:
        t = sorted(self.times_ms)
        mid = len(t) // 2
        return t[mid] if len(t) % 2 else 0.5 * (t[mid - 1] + t[mid])

    @property
    def spread(self) -> float:
        """(max - min) / median: how much the runs disagree."""
        return (max(self.times_ms) - min(self.times_ms)) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass
class Thresholds:
    source: str
    """Where the rates come from: a measured profile, an estimate, or the baseline measured now."""
    rates: list
    """Rate needed for each tier, in the assignment's metric, increasing."""
    points: list
    """Performance points for reaching each tier."""
    estimated: bool = False
    """True when not measured on this GPU model (derived on the spot or from datasheets)."""


@dataclass
class Baseline:
    name: str
    """The library route, as the harness names it (e.g. cublasDgemm route)."""
    rate: float
    """Its rate in the assignment's metric."""
    timing: Timing
    """Its timed runs, taken exactly like the submission's."""


@dataclass
class Performance:
    case_id: str
    """The graded case."""
    params: dict
    """Its sizes."""
    metric: str
    """GFLOPS, GB/s or MLUPS."""
    timing: Timing
    """The submission's timed runs."""
    rate: float
    """Work / median time, in the metric."""
    gbs: Optional[float]
    """Bytes that must move / median time, in GB/s, where the task counts bytes."""
    baseline_name: str = ""
    """The library the rate is compared with and thresholds derive from (e.g. cublasDtrmm)."""
    baseline_rate: Optional[float] = None
    """That library's rate on the same GPU, same size, measured in this grading (in a batch: measured
    once for the class, baseline_note)."""
    baseline_note: str = ""
    """Where the library's times come from when not from this grading (a batch's shared measurement)."""
    baselines: list = field(default_factory=list)
    """Every library route timed in this grading (Baseline), the one above included."""
    peak: Optional[float] = None
    """The GPU's physical peak in the metric; a rate above it is an invalid measurement."""
    thresholds: Optional[Thresholds] = None
    """The tiers used for the score."""
    points: float = 0.0
    """Performance points earned by this graded case, out of all of them (the task's score averages
    them over its graded cases)."""
    judge_read_ms: Optional[float] = None
    """What the judge's round trip costs (an empty call through it, served by the checker after the
    runner is gone: ringing, the switches between GPU contexts, the judge's read), taken off every
    timed run of the submission and of the library."""


@dataclass
class GpuInfo:
    name: str
    """The device name the driver reports."""
    arch: str
    """sm_XY of the compute capability."""
    sm_count: int = 0
    l2_bytes: int = 0
    clock_khz: int = 0
    mem_clock_khz: int = 0
    bus_width_bits: int = 0
    driver: str = ""
    """Driver (CUDA) version."""
    count: int = 1
    """How many CUDA GPUs the machine has (the others are taken to be the same model)."""
    model: Optional[str] = None
    """The model key in assignments/gpus.json, or None for a GPU the kit does not know."""
    memory_bytes: int = 0
    """Device memory (0: not known)."""


@dataclass
class GradeResult:
    assignment: str
    """The assignment's name in the registry."""
    submission: str
    """Path of the graded kernel.cu."""
    verdict: Verdict
    """CORRECT, INVALID_MEASUREMENT, or the first failure in case order."""
    message: str
    """One line saying why, for the student."""
    score: float
    """Points earned."""
    max_score: float
    """Points possible."""
    correctness_points: float = 0.0
    """Share of the correctness points: one equal share per passing scored case."""
    performance: list = field(default_factory=list)
    """One Performance per graded case; only when every case was correct."""
    cases: list = field(default_factory=list)
    """One CaseResult per correctness case, in the task file's order."""
    gpu: Optional[GpuInfo] = None
    """The GPU it ran on."""
    build_log: str = ""
    """The compiler's and linker's messages (the compiler's error for BUILD_ERROR)."""
    stage_seconds: dict = field(default_factory=dict)
    """Wall time of each stage: build, correctness, performance."""
    sanitizer_note: str = ""
    """What compute-sanitizer checked (or why it did not run), for tasks that ask for it."""
    seed_note: str = ""
    """Whether the inputs were drawn from a secret per-run value or a fixed one."""
    profile: dict = field(default_factory=dict)
    """With --profile, after a graded run: Nsight Compute's numbers per kernel, hints and the roofline
    (profile/run.py), or {"note"} saying why there are none. Never part of the score."""

    def to_json(self) -> dict:
        d = asdict(self)
        for p, out in zip(self.performance, d["performance"]):
            out["median_ms"] = p.timing.median_ms
            out["spread"] = p.timing.spread
        return d
