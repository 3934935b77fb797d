"""A live status for long work on a terminal: what is being done, how far, how fast.

The back ends, the compiler and the bitstream flow report through a plain callback,
``progress(what, done, total)`` (:data:`openvta.runtime.Progress`); this module draws
it with `rich <https://rich.readthedocs.io>`_ on standard error, and only when that
is a terminal, the caller is not ``--quiet``, and the work has already taken
``delay_s`` seconds — short runs and pipes see nothing.

>>> import io
>>> from rich.console import Console
>>> console = Console(file=io.StringIO(), force_terminal=True, width=80)
>>> with ProgressDisplay("running", console=console, delay_s=0) as show:
...     show("instructions", 50, 100)
>>> "instructions" in console.file.getvalue()
True
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

__all__ = ["ProgressDisplay"]


class _Count(ProgressColumn):
    """``1,234 / 5,000`` (or ``1,234`` without a total), then the rate per second."""

    def render(self, task: Task) -> Text:
        if not task.completed and task.total is None:
            return Text("")
        count = f"{int(task.completed):,}"
        if task.total is not None:
            count += f" / {int(task.total):,}"
        speed = task.finished_speed or task.speed
        if speed:
            count += f"  {speed:,.0f}/s"
        return Text(count)


class ProgressDisplay:
    """Draw ``progress(what, done, total)`` calls as one live line on standard error.

    Parameters
    ----------
    title :
        what the whole job is (``"running c5.npz on cycle"``), shown before the phase.
    enabled :
        draw at all; by default only when standard error is a terminal.
    console :
        where to draw (tests pass a console that writes to a string).
    delay_s :
        show nothing until the work has taken this long.
    """

    def __init__(self, title: str, *, enabled: bool | None = None, console: Console | None = None,
                 delay_s: float = 2.0) -> None:
        if enabled is None:
            enabled = console is not None or sys.stderr.isatty()
        self.enabled = enabled
        self.title = title
        self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                             _Count(), TimeElapsedColumn(),
                             console=console or Console(stderr=True), transient=True)
        self._task = self._bar.add_task(title, total=None)
        self._started = False
        self._timer = threading.Timer(delay_s, self._start)
        self._timer.daemon = True

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            self._timer.start()
        return self

    def __call__(self, what: str, done: int, total: int | None) -> None:
        self._bar.update(self._task, description=f"{self.title}: {what}", completed=done,
                         total=total)

    def line(self, text: str) -> None:
        """A phase without a count (a tool of the bitstream flow, say)."""
        self(text, 0, None)

    def _start(self) -> None:
        self._bar.start()
        self._started = True

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._timer.cancel()
        if self._timer.is_alive():
            self._timer.join()
        if self._started:
            self._bar.stop()
