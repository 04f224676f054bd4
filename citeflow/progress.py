"""Progress a user can watch during a long stage: a tqdm bar on a terminal, elsewhere (a run log, an Airflow task
log, a pipe) a plain line at least every `LINE_SECONDS`: done of total, the rate, the stage's own figures (a
loss) and the time left.

    with Progress("train_encoder", total=600, unit="step", rate_of=16, rate_unit="triplets") as progress:
        for step in ...:
            progress.update(1, loss=0.81)

A child process cannot see the user's terminal: its parent says which form to use in `PROGRESS_ENV` (`bar` or
`lines`; `mode_for_child`), and relays the child's lines into its own log (`is_progress_line`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

# the longest a user waits between two progress lines (docs/train_encoder.md)
LINE_SECONDS = 30.0
PROGRESS_ENV = "CITEFLOW_PROGRESS"
# every line starts so, after the stage's name: how a parent tells them from the rest of a child's output
MARK = " progress: "


def mode_for_child() -> str:
    """`bar` where this process writes to a terminal, else `lines`: the form a child process should use."""
    return "bar" if sys.stderr.isatty() else "lines"


def to_log_files(line: str, name: str = "citeflow.child") -> None:
    """`line` to the files the root logger writes (the run log), not to the terminal: a child's tracebacks and
    warnings belong in the log the one-line error names."""
    import logging

    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(logging.LogRecord(name, logging.INFO, __file__, 0, "%s", (line,), None))


def is_progress_line(line: str) -> bool:
    head, _, _ = line.partition(MARK)
    return MARK in line and head.isidentifier()


def duration(seconds: float) -> str:
    """3h02m, 7m40s or 12s."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Done of `total` `unit`s, shown as a bar (`mode` bar) or as lines through `emit` (`mode` lines) at most
    `every` seconds apart (and at the end). `rate_of`: what one unit is worth in `rate_unit` (a step of 16
    triplets: rate in triplets/s). `mode` None: the environment's `PROGRESS_ENV`, else a bar on a terminal."""

    def __init__(
        self,
        name: str,
        *,
        total: int | None,
        unit: str,
        initial: int = 0,
        rate_of: float = 1.0,
        rate_unit: str | None = None,
        emit: Callable[[str], None] | None = None,
        every: float = LINE_SECONDS,
        mode: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.total, self.unit, self.done, self.start_done = name, total, unit, initial, initial
        self.rate_of, self.rate_unit = rate_of, rate_unit or unit + "s"
        self.emit = emit or (lambda line: print(line, flush=True))
        self.every, self.clock = every, clock
        self.mode = mode or os.environ.get(PROGRESS_ENV) or ("bar" if sys.stderr.isatty() else "lines")
        self.started = self.last = clock()
        self.figures: dict[str, str] = {}
        self.left: float | None = None
        self.closed = False
        self.bar = None
        if self.mode == "bar":
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=name, unit=unit, file=sys.stderr)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def update(self, n: int = 1, *, left: float | None = None, **figures: float | str) -> None:
        """`n` more done; `left`: the caller's own estimate of the seconds left (a trainer knows its evaluations
        to come), else the mean rate's; `figures`: shown as they are given (floats to 3 decimals)."""
        self.done += n
        self.left = left
        self.figures.update({k: f"{v:.3f}" if isinstance(v, float) else str(v) for k, v in figures.items()})
        if self.bar is not None:
            self.bar.update(n)
            if self.figures:
                self.bar.set_postfix(self.figures, refresh=False)
            return
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.emit(self.line(now))

    def line(self, now: float | None = None) -> str:
        """`train_encoder progress: step 120/600 (20%), 10.9 triplets/s, loss 0.812, 7m40s left`."""
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = (self.done - self.start_done) / elapsed
        share = f"/{self.total:,} ({100 * self.done / max(self.total, 1):.0f}%)" if self.total else ""
        parts = [f"{self.unit} {self.done:,}{share}"]
        parts.append(f"{rate * self.rate_of:.1f} {self.rate_unit}/s")
        parts += [f"{k} {v}" for k, v in self.figures.items()]
        if self.total and self.left is not None:
            parts.append(f"{duration(self.left)} left")
        elif self.total and rate > 0:
            parts.append(f"{duration((self.total - self.done) / rate)} left")
        else:
            parts.append(f"{duration(elapsed)} so far")
        return f"{self.name}{MARK}" + ", ".join(parts)

    def close(self) -> None:
        """Ends the bar, or emits the last line (where any work was done)."""
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif self.done > self.start_done:
            self.emit(self.line())
