"""The known submissions of assignments/<name>/tests/ (each file's first line is `// expect: VERDICT`),
with every assignment's hidden reference and unfilled skeleton, graded once per test session as one
class in a batch, as a TA grades: in the jail where bubblewrap is installed, else without it. The
builds of the next entries overlap the GPU stages of the current one, and no file is graded twice:
the per-file verdict tests and the jail's tests read the same records. Each graded case is timed
TIMED_RUNS times, the fewest a batch allows (a task asks for 10 or 20), in bursts BURST_GAP_MS apart.

In the jail the class also holds the hostile corpus (fixtures/batch/hostile/*.cu: conv1d kernels that
write outside their folder, read secrets, fork, fill the disk or the GPU, call the network, leave
daemons, make their own timed runs wait for a CPU), and the batch is watched from outside: the kit,
the class folder, a stand-in for the TA's home and another checkout are hashed before and after, a
socket on the grader's machine listens for connections, and the host's /tmp and process table are
read once the batch is over (a Watch). Those entries are never graded unjailed.

  known()                         (assignment, file) of every known submission
  hostile()                       the hostile corpus's files
  expectation(file, jailed)       what its header lines promise
  grade_class(gpu, root)          the batch, graded: a Corpus
  Background(gpu, root)           the harnesses built, then the same started on a thread
                                  (conftest.py starts it after collection: the CPU tests run meanwhile)
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import build, tasks

ROOT = tasks.ROOT
HOSTILE = Path(__file__).parent / "fixtures" / "batch" / "hostile"


def known() -> list:
    """(assignment, file) for every file whose first line is `// expect: VERDICT`."""
    out = []
    for name in tasks.registry():
        for f in sorted((ROOT / "assignments" / name / "tests").glob("*.cu")):
            lines = f.read_text().splitlines()
            if lines and lines[0].startswith("// expect:"):
                out.append((name, f))
    return out


@dataclass
class Expectation:
    verdict: str
    """`// expect:`, or in a jailed batch `// expect-batch:` where the jail changes the outcome."""
    message: str = ""
    """`// expect-message:` words the verdict's message must contain."""
    message_absent: str = ""
    """`// expect-message-absent:` words it must not contain ("" for none)."""
    performance_below: float = None
    """`// expect-performance-below: F`: a correct submission earns less than this fraction of the
    performance points (right, but slow)."""

    def says(self, message: str) -> bool:
        """Whether a verdict's message has the words it must and none of those it must not."""
        return self.message in message and not (self.message_absent and self.message_absent in message)


def hostile() -> list:
    """The hostile corpus: conv1d kernel.cu files, each graded only in the jail."""
    return sorted(HOSTILE.glob("*.cu"))


def expectation(path: Path, jailed: bool) -> Expectation:
    head = path.read_text().splitlines()[:6]
    extra = {h[3:].split(":", 1)[0]: h.split(":", 1)[1].strip() for h in head[1:] if h.startswith("// expect-")}
    below = extra.get("expect-performance-below")
    absent = extra.get("expect-message-absent", "")
    if jailed and "expect-batch" in extra:  # the message named the outcome the jail prevents
        return Expectation(extra["expect-batch"], "", absent, float(below) if below else None)
    return Expectation(head[0].split(":", 1)[1].strip(), extra.get("expect-message", ""), absent,
                       float(below) if below else None)


def jail_changes(path: Path) -> bool:
    """Whether the file says the jail changes its outcome (`// expect-batch:`)."""
    return expectation(path, jailed=True) != expectation(path, jailed=False)


def student(name: str, path: Path) -> str:
    """The entry a file is in the class: <assignment>-<file stem>, or <assignment>-the-reference and
    <assignment>-the-skeleton for the hidden reference and the unfilled skeleton."""
    if path == reference(name):
        return f"{name}-the-reference"
    if path == skeleton(name):
        return f"{name}-the-skeleton"
    if path.parent == HOSTILE:
        return f"{name}-hostile-{path.stem}"
    return f"{name}-{path.stem}"


def reference(name: str) -> Path:
    return ROOT / "reference" / name / "kernel.cu"


def skeleton(name: str) -> Path:
    return ROOT / "student_template" / name / "kernel.cu"


TIMED_RUNS = 10
BURST_GAP_MS = 50
"""The class's bursts of timed runs start 50 ms apart, not 400 (batch --burst-gap-ms): the same bursts,
checks in the gaps and re-warming calls, 1.4 s less per timed case. Less of the GPU's drift is
averaged out; no verdict of the class rests on a rate near a tier's edge."""
DISK_GIB = 1
"""Each work folder's disk (batch --disk-gib; 8 GiB by default): no entry of the class writes more than a
few MiB there but hostile/disk_fill.cu, whose 8 GiB held its check for 26 s beside others on an H200, and
18 s more when it was checked again alone."""

MEMORY_GIB = 8
"""The host memory of each submission's processes together (batch --memory-gib; 16 GiB by default). No
honest entry comes near it; hostile/hog.cu and memory_fork.cu touch memory until it stops them, which at
16 GiB took hog 21 s beside others on an H200, past the 20 s case limit: a timeout, checked again alone
for 11 s more."""


@dataclass
class Watch:
    """What the grader's machine saw of a jailed class from outside it."""
    changed: list
    """Files outside the output folder (the kit, the class, the TA's home, another checkout) that
    changed, appeared or went away."""
    connections: int
    """Connections made to a socket listening on the grader's machine."""
    tmp_left: list
    """Names the batch left in the host's /tmp that an escape would leave ("escaped", "pwned")."""
    processes_left: list
    """Processes of the class still running once the batch was over."""


@dataclass
class Corpus:
    out: Path
    """The batch's output folder."""
    exit_code: int
    jailed: bool
    graded: set = field(default_factory=set)
    """The assignments in the class (those this machine has enough GPUs for)."""
    watch: Watch = None
    """What was seen from outside, when the class held the hostile corpus (jailed)."""
    hostile: list = field(default_factory=list)
    """(assignment, file) of the hostile entries in the class."""
    log: Path = None
    """The batch's output (its progress lines and summary)."""

    def failures(self) -> str:
        """What a failing batch says of it: its lines about entries not graded or errors (anywhere in
        its output, which lists 75 entries), then its last lines."""
        text = self.log.read_text(errors="replace") if self.log and self.log.is_file() else ""
        said = [line for line in text.splitlines() if "not graded" in line or "not_graded" in line or "Traceback" in line]
        return "\n".join(said[:40] + ["...", text[-1500:]])

    def record(self, name: str, path: Path) -> dict:
        """The file's record; a missing one fails with the end of the batch's output, which says why."""
        f = self.out / "records" / student(name, path) / f"{name}.json"
        if not f.is_file():
            tail = self.log.read_text()[-2000:] if self.log and self.log.is_file() else ""
            raise AssertionError(f"the batch (exit {self.exit_code}) left no record for {student(name, path)}:\n{tail}")
        return json.loads(f.read_text())


NOT_HASHED = ("__pycache__", ".pytest_cache", ".venv", ".git")


def snapshot(*paths: Path) -> dict:
    """path -> SHA-256 of every file given and every file under the folders given (caches of Python
    and pytest, virtual environments and git's own files left out)."""
    out = {}
    for top in paths:
        if top.is_file() and not top.is_symlink():
            out[str(top)] = hashlib.sha256(top.read_bytes()).hexdigest()
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in NOT_HASHED]
            for f in files:
                p = Path(dirpath) / f
                if p.is_file() and not p.is_symlink():
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Listener:
    """A socket on the grader's machine that counts the connections made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.reached = []
        self.stop = threading.Event()
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self):
        while not self.stop.is_set():
            try:
                self.reached.append(self.sock.accept()[1])
            except OSError:
                pass

    def close(self) -> int:
        self.stop.set()
        self.sock.close()
        return len(self.reached)


def grader_command(*args: str, **env: str) -> tuple:
    """(command, environment) that run `python3 -m grader ARGS` from this checkout, as a TA runs it."""
    path = [str(ROOT / "grader")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [sys.executable, "-m", "grader", *args], dict(os.environ, PYTHONPATH=os.pathsep.join(path), **env)


def graded_here(gpu) -> set:
    """The assignments of the class: those this machine has enough GPUs for."""
    return {name for name in tasks.registry() if tasks.load(name).gpus_required <= gpu.count}


def build_harnesses(gpu, root: Path) -> None:
    build.build_harnesses([tasks.load(n) for n in sorted(graded_here(gpu))], gpu.arch, root / "harness.log")


def harnesses(gpu, names) -> list:
    """The harness programs the class runs, under build/: the kit's own tests build into build/ while
    the class is graded (their harness, the handouts), so of build/ only these are watched."""
    return [ROOT / "build" / gpu.arch / d for d in ("harness", *sorted(names))]


def grade_class(gpu, root: Path, running: list = None, built: bool = False) -> Corpus:
    """The class graded by `python3 -m grader batch` (the batch's process is added to `running`);
    `built`: the harnesses are built already (Background)."""
    subs, out, home, other = root / "class", root / "out", root / "ta-home", root / "other-kit"
    graded = graded_here(gpu)
    files = known() + [(name, f) for name in tasks.registry() for f in (reference(name), skeleton(name))]
    for name, f in files:
        if name in graded:
            (subs / student(name, f) / name).mkdir(parents=True)
            shutil.copy(f, subs / student(name, f) / name / "kernel.cu")
    jailed = shutil.which("bwrap") is not None
    hostile_entries = [("conv1d", f) for f in hostile()] if jailed and "conv1d" in graded else []
    listener = Listener() if hostile_entries else None
    if hostile_entries:
        home.mkdir()
        (home / "secret.txt").write_text("the TA's own file\n")
        (other / "reference" / "conv1d").mkdir(parents=True)
        shutil.copy(reference("conv1d"), other / "reference" / "conv1d" / "kernel.cu")
        honest = subs / student("conv1d", reference("conv1d")) / "conv1d" / "kernel.cu"
        for name, f in hostile_entries:
            text = f.read_text()
            for key, value in (("@KIT@", ROOT), ("@SUBMISSIONS@", subs), ("@OUT@", out), ("@HOME@", home),
                               ("@OTHER@", other), ("@PORT@", listener.port), ("@HONEST@", honest)):
                text = text.replace(key, str(value))
            (subs / student(name, f) / name).mkdir(parents=True)
            (subs / student(name, f) / name / "kernel.cu").write_text(text)
    tmp = root / "tmp"  # the batch's work folders: a process of the class left behind has it in its command line
    tmp.mkdir()
    for d in (root, tmp):  # the jail's user must be able to pass through to the work folders
        os.chmod(d, 0o755)
    cmd, env = grader_command("batch", str(subs), "--out", str(out), "--jobs", str(os.cpu_count() or 4),
                              "--assignments", *sorted(graded), "--timed-runs", str(TIMED_RUNS),
                              "--burst-gap-ms", str(BURST_GAP_MS), "--no-reference",
                              "--memory-gib", str(MEMORY_GIB), "--disk-gib", str(DISK_GIB), *([] if jailed else ["--no-isolation"]), TMPDIR=str(tmp))
    try:
        if not built:
            build_harnesses(gpu, root)
        outside = [*(p for p in ROOT.iterdir() if p.name not in ("build", *NOT_HASHED)), *harnesses(gpu, graded), subs,
                   home, other]
        before = snapshot(*outside) if hostile_entries else None
        tmp_before = set(os.listdir("/tmp"))
        with open(root / "batch.log", "w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            if running is not None:
                running.append(proc)
            rc = proc.wait()
    finally:
        connections = listener.close() if listener else 0
    watch = None
    if hostile_entries:
        after = snapshot(*outside)
        left = subprocess.run(["pgrep", "-f", str(tmp)], capture_output=True, text=True).stdout.split()
        watch = Watch(changed=sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)),
                      connections=connections,
                      tmp_left=[n for n in set(os.listdir("/tmp")) - tmp_before if "escaped" in n or "pwned" in n],
                      processes_left=left)
    return Corpus(out, rc, jailed, graded, watch, hostile_entries, root / "batch.log")


class Background:
    """grade_class on a thread of its own, started at once; result() waits for it."""

    def __init__(self, gpu, root: Path):
        self.root, self.corpus, self.error, self.running, self.thread = root, None, None, [], None
        self.times = {"start": time.monotonic()}  # when each stage ended (build, graded, waited)
        try:
            # The harnesses before anything else: the kit's tests make some of the same files (test_protocol).
            build_harnesses(gpu, root)
        except Exception as e:  # noqa: BLE001 - handed to the tests that need the class
            self.error = e
            return
        finally:
            self.times["build"] = time.monotonic()
        self.thread = threading.Thread(target=self._grade, args=(gpu, root), daemon=True, name="corpus")
        self.thread.start()

    def _grade(self, gpu, root):
        try:
            self.corpus = grade_class(gpu, root, self.running, built=True)
        except BaseException as e:  # noqa: BLE001 - handed to the tests that need the class
            self.error = e
        finally:
            self.times["graded"] = time.monotonic()

    def wait(self) -> None:
        if self.thread is not None:
            self.times.setdefault("asked", time.monotonic())
            self.thread.join()

    def timeline(self) -> str:
        """How long the harnesses took to build and the class to grade, and how long the GPU tests
        waited for it (the CPU tests ran meanwhile): where the time of a `make test` goes."""
        t = self.times
        if "graded" not in t:
            return ""
        line = f"the known corpus: harnesses built in {t['build'] - t['start']:.0f} s, class graded in " \
               f"{t['graded'] - t['build']:.0f} s"
        if "asked" in t:
            line += f"; the GPU tests waited {max(0.0, t['graded'] - t['asked']):.0f} s for it"
        return line

    def stop(self) -> None:
        """Ends the batch if it is still grading (a test session cut short): SIGTERM stops it as Ctrl-C does."""
        for p in self.running:
            if p.poll() is None:
                p.terminate()
        if self.thread is not None:
            self.thread.join(timeout=60)

    def result(self) -> Corpus:
        self.wait()
        if self.error is not None:
            raise self.error
        return self.corpus
