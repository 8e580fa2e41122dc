"""The progress bar: done/total, throughput, ETA, the error count and, when a provider rate-limits
the run, the adaptive limit's state ("rate-limited, waiting 12s, limit 4"), so a paused run does not
look hung; and the spend so far per role with its caps ("spend: judge $0.0412 (caps: judge=$5)")."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class RunProgress:
    def __init__(self, description: str, total: int, done: int, *, enabled: bool = True, console: Console | None = None):
        self.errors = 0
        self._started_at_done = done
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("[red]{task.fields[errors]} errors"),
            TextColumn("[yellow]{task.fields[limits]}"),
            TextColumn("[cyan]{task.fields[spend]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            disable=not enabled,
            transient=False,
            refresh_per_second=4,
        )
        self.task = self.progress.add_task(description, total=total, completed=done, rate="", errors=0, limits="", spend="")

    def __enter__(self) -> "RunProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.__exit__(exc_type, exc, tb)

    def advance(self, error: bool) -> None:
        self.errors += int(error)
        task = self.progress.tasks[0]
        elapsed = task.elapsed or 0.0
        done_here = task.completed + 1 - self._started_at_done
        rate = f"{done_here / elapsed:.1f} samples/s" if elapsed > 0 else ""
        self.progress.update(self.task, advance=1, rate=rate, errors=self.errors)

    def show_spend(self, text: str) -> None:
        """What the run has paid so far, per role, and its caps (`harness.spend`; "" before any call)."""
        self.progress.update(self.task, spend=text)

    def show_limits(self, text: str) -> None:
        """The adaptive limits' state (`harness.limits.describe`; "" when nothing to say)."""
        self.progress.update(self.task, limits=text)
