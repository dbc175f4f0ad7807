"""Progress bars: tqdm's when it is installed (the dev extra), else a plain one with the surface the
scenarios use, so `scheduler bench` runs after a plain `pip install -e .`."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any


class _Plain:
    """What the bench uses of tqdm: a context manager with update(), iteration, and write(). Draws
    `desc: n/total` on one line of a terminal at most twice a second; nothing when stderr is a file."""

    def __init__(
        self, iterable: Iterable[Any] | None = None, desc: str = "", total: int | None = None, **_: Any
    ) -> None:
        self._iterable = iterable
        self._desc = desc
        self._total = total if total is not None else _len(iterable)
        self._n = 0
        self._drawn = 0.0
        self._tty = sys.stderr.isatty()

    def __enter__(self) -> _Plain:
        return self

    def __exit__(self, *_: object) -> None:
        if self._tty and self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def __iter__(self) -> Iterator[Any]:
        with self:
            for item in self._iterable or ():
                yield item
                self.update()

    def update(self, n: int = 1) -> None:
        self._n += n
        now = time.monotonic()
        if self._tty and now - self._drawn >= 0.5:
            self._drawn = now
            of = f"/{self._total:,}" if self._total is not None else ""
            sys.stderr.write(f"\r\033[K{self._desc}: {self._n:,}{of}")
            sys.stderr.flush()

    @staticmethod
    def write(text: str) -> None:
        print(text, flush=True)


def _len(iterable: Iterable[Any] | None) -> int | None:
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None


try:
    from tqdm import tqdm
except ImportError:  # the dev extra is not installed
    tqdm = _Plain  # type: ignore[assignment,misc]

__all__ = ["tqdm"]
