"""A small progress bar for management commands (stderr, redrawn in place on a terminal, line by line
otherwise)."""

from __future__ import annotations

import sys
import time
from typing import Protocol


class TextStream(Protocol):
    """What the bar writes to: a text file such as sys.stderr, or a management command's self.stderr."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


class ProgressBar:
    def __init__(self, total: int, label: str, *, stream: TextStream | None = None, width: int = 30) -> None:
        self.total = max(0, total)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self._tty and now - self._last_draw < 0.1 and self.done < self.total:
            return
        if not self._tty and now - self._last_draw < 2.0 and self.done < self.total:
            return
        self._last_draw = now
        self._draw()

    def _draw(self) -> None:
        fraction = self.done / self.total if self.total else 1.0
        filled = int(self.width * min(1.0, fraction))
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
            f"({fraction:.0%}, {rate:.1f}/s)"
        )
        self.stream.write(("\r" + line) if self._tty else (line + "\n"))
        self.stream.flush()

    def finish(self) -> None:
        self._draw()
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()
