"""What a batch has graded (state.json), kept so that the same command run again goes on from there:
for every (student, assignment), the file's hash and the verdict, or why it could not be graded."""
from __future__ import annotations

import datetime
import json

from ..report import atomic_write


def plain(record: dict) -> dict:
    """A record as it reads back from its JSON file (verdicts as words)."""
    return json.loads(json.dumps(record, default=str))


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


class State:
    """The state.json part of a Batch (self.out, self.state_path, self.state, self.lock, self.tasks)."""

    def _load_state(self) -> dict:
        try:
            st = json.loads(self.state_path.read_text())
            if isinstance(st, dict) and st.get("version") == 1:
                return st
        except (OSError, ValueError):
            pass
        return {"version": 1, "done": {}, "errors": {}, "entries": {}}

    def _save_state(self) -> None:
        atomic_write(self.state_path, json.dumps(self.state, indent=1, sort_keys=True) + "\n")

    def _remember(self, job, rec: dict, rec_path) -> str:
        """Records how `job` ended in the state (graded, not gradeable here, or failed); returns its verdict."""
        task = self.tasks[job.assignment]
        with self.lock:
            skipped = self.state.setdefault("skipped", {})
            skipped.pop(job.key, None)
            if job.error:
                self.state["errors"][job.key] = {"message": job.error, "sha256": job.digest, "at": now()}
                self.state["done"].pop(job.key, None)
            elif rec["verdict"] == "skipped":  # this machine cannot grade it (too few GPUs): a later batch will
                self.state["errors"].pop(job.key, None)
                self.state["done"].pop(job.key, None)
                skipped[job.key] = {"message": rec.get("message", ""), "sha256": job.digest, "at": now()}
            else:
                self.state["errors"].pop(job.key, None)
                self.state["done"][job.key] = {
                    "sha256": job.digest, "verdict": rec["verdict"], "score": rec["score"],
                    "max_score": task.max_score, "stage_seconds": rec.get("stage_seconds", {}),
                    "seconds": job.seconds, "record": str(rec_path.relative_to(self.out)), "graded_at": now()}
            self._save_state()
            verdict = rec["verdict"]
            self.counts[verdict] = self.counts.get(verdict, 0) + 1
            self.done += 1
        return verdict
