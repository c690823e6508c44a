"""A stand-in for the judge (the checker) and the runner that replays what the real ones recorded on a GPU.

  fake_harness.py runner SOCKET_FD
  fake_harness.py checker judge PLAN --socket FD --results FD [...] | checker serve SOCKET_FD

The fixture folder (KIT_FAKE_FIXTURE) holds the recorded JSON lines: runner.jsonl (the start, done and
fault records of every case, as the judge writes them), check.jsonl, timed.jsonl, check-timed.jsonl,
baseline.jsonl. The runner says hello on the socket and waits for the judge to close it. The judge
waits for that hello (a runner that ends first is a runner gone, as for the real judge), then
replays each planned case's records, ends its session after a fault as the real one does, and hangs
after a start with no end (a runner that never answers: a timeout).
"""
import json
import os
import socket
import sys
import time
from pathlib import Path

FAULTS = ("launch_error", "runtime_error")
fixture = Path(os.environ["KIT_FAKE_FIXTURE"])


def records(name):
    path = fixture / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def planned(plan):
    text = sys.stdin.read() if plan == "-" else Path(plan).read_text()
    return [(line.split()[0], dict(w.split("=", 1) for w in line.split()[1:])["id"])
            for line in text.splitlines() if line.strip()]


def runner(fd):
    s = socket.socket(fileno=fd)
    s.send(b"hello")
    while s.recv(64):
        pass


def judge(plan, sock, out, baseline, route=None):
    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    log = os.environ.get("KIT_FAKE_GPU_LOG")  # which GPU each judge was given, and when it ran
    t0 = time.time()
    if log:
        time.sleep(float(os.environ.get("KIT_FAKE_SECONDS", "0")))
        with open(log, "a") as f:
            f.write(json.dumps({"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": t0, "end": time.time()}) + "\n")

    plan = planned(plan)
    emit({"event": "ready"})
    s = socket.socket(fileno=sock)
    if s.recv(64) != b"hello":
        emit({"event": "start", "case": plan[0][1]})
        emit({"event": "runner_gone", "case": plan[0][1], "message": "the other side has gone"})
        return
    if baseline:
        for rec in records("baseline.jsonl"):
            if route is None or rec["event"] == "overhead" or rec["library"] == route:
                emit(rec)
        return
    for kind, case in plan:
        if kind == "timed":
            for rec in records("timed.jsonl") + records("check-timed.jsonl"):
                emit(rec)
            emit({"event": "checked", "case": case})  # as the judge ends every case (after the recording was made)
            continue
        mine = [r for r in records("runner.jsonl") if r["case"] == case]
        ends = [r for r in mine if r["event"] != "start"]
        emit({"event": "start", "case": case})
        if not ends:
            time.sleep(3600)
        emit(ends[0])
        if ends[0]["event"] in FAULTS:
            return
        for rec in records("check.jsonl"):
            if rec["case"] == case:
                emit(rec)


def note_environment(program):
    """Appends the program's CUDA settings to KIT_FAKE_ENV_LOG, where a test asks what each one was given."""
    log = os.environ.get("KIT_FAKE_ENV_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"program": program,
                                "connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}) + "\n")


if __name__ == "__main__":
    note_environment(sys.argv[1] if sys.argv[1] == "runner" else sys.argv[2])
    if sys.argv[1] == "runner":
        runner(int(sys.argv[2]))
    elif sys.argv[2] == "serve":
        runner(int(sys.argv[3]))
    else:
        a = sys.argv[3:]
        opts = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i] in ("--socket", "--results", "--route")}
        with os.fdopen(int(opts["--results"]), "w") as results:
            judge(sys.argv[3], int(opts["--socket"]), results, "--baseline" in a, opts.get("--route"))
