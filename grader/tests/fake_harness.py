"""A stand-in for the runner and the checker that replays what the real ones recorded on a GPU.

  fake_harness.py runner PLAN DUMPS RESULTS
  fake_harness.py checker check PLAN DUMPS RESULTS | checker baseline PLAN RESULTS

The fixture folder (KIT_FAKE_FIXTURE) holds the recorded JSON lines: runner.jsonl (every runner
record, by case), check.jsonl, timed.jsonl, check-timed.jsonl, baseline.jsonl. The runner replays
each planned case's records and ends as the real one did: exit 4 after a launch error, 5 after a
fault, hanging forever after a start with no end (a timeout).
"""
import json
import os
import sys
import time
from pathlib import Path

EXIT = {"launch_error": 4, "runtime_error": 5}
fixture = Path(os.environ["KIT_FAKE_FIXTURE"])


def records(name):
    path = fixture / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def planned(plan):
    return [(line.split()[0], dict(w.split("=", 1) for w in line.split()[1:])["id"])
            for line in Path(plan).read_text().splitlines() if line.strip()]


def emit(out, rec):
    out.write(json.dumps(rec) + "\n")
    out.flush()


def runner(plan, results):
    with open(results, "a") as out:
        for kind, case in planned(plan):
            if kind == "timed":
                for rec in records("timed.jsonl"):
                    emit(out, rec)
                continue
            mine = [r for r in records("runner.jsonl") if r["case"] == case]
            ends = [r for r in mine if r["event"] != "start"]
            emit(out, {"event": "start", "case": case})
            if not ends:
                time.sleep(3600)
            emit(out, ends[0])
            if ends[0]["event"] in EXIT:
                sys.exit(EXIT[ends[0]["event"]])


def checker(mode, plan, results):
    with open(results, "a") as out:
        if mode == "baseline":
            for rec in records("baseline.jsonl"):
                emit(out, rec)
            return
        for kind, case in planned(plan):
            for rec in records("check-timed.jsonl" if kind == "timed" else "check.jsonl"):
                if rec["case"] == case:
                    emit(out, rec)


if __name__ == "__main__":
    if sys.argv[1] == "runner":
        runner(sys.argv[2], sys.argv[4])
    else:
        checker(sys.argv[2], sys.argv[3], sys.argv[-1])
