"""The one line a batch shows while it runs, and the lines it says."""
from __future__ import annotations

import sys
import time


def fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Progress of a Batch (self.lock, self.tty, self.done, self.total, self.counts, self.started)."""

    def _say(self, line: str) -> None:
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K")
            print(line, file=sys.stderr, flush=True)

    def _progress(self, final: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else None
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        line = (f"[{self.done}/{self.total}] {counts or 'started'} | elapsed {fmt_s(elapsed)}"
                + (f" | left ~{fmt_s(left)}" if left is not None and self.done < self.total else ""))
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K" + line + ("\n" if final else ""))
                sys.stderr.flush()
            elif final:
                print(line, file=sys.stderr, flush=True)
