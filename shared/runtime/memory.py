"""Freed heap memory given back to the system after a large read (glibc's ``malloc_trim``).

A probe that reads a hostile 20 MB reply (the read caps stop it, but it reads up to
them in 64 kB pieces) leaves the freed pieces in the C heap, where glibc keeps them
for reuse: the process's RSS stays about 25-35 MB above what it holds, and a long run
with such replies now and then shows a step up that looks like growth (the 1,000-cycle
soak of ``benchmarks/soak.py``: a prober 229 -> 239 MB after a cycle of 20 MB replies).
``malloc_trim(0)`` returns it (measured: 113 -> 90 MB after eight such reads).

:class:`HeapTrimmer` trims after a read of at least ``after_bytes``, at most once every
``every_s`` seconds (a burst's last large read is trimmed at the first read after that); a
trim takes a few milliseconds.  Where the C library has no
``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

#: Bytes read by one request after which the heap is trimmed (4 MiB: a healthy reply is kilobytes).
TRIM_AFTER_BYTES = 4 * 1024 * 1024
#: At most one trim in this many seconds (s).
TRIM_EVERY_S = 10.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class HeapTrimmer:
    """Trims the C heap after large reads: :meth:`read` after each request with the bytes it read.

    Args:
        after_bytes: the smallest read that asks for a trim (bytes).
        every_s: the shortest time between two trims (s).
        clock: a monotonic clock (s).
    """

    def __init__(self, *, after_bytes: int = TRIM_AFTER_BYTES, every_s: float = TRIM_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, trim: Callable[[int], int] | None = None) -> None:
        self.after_bytes = after_bytes
        self.every_s = every_s
        self.clock = clock
        self._trim = trim if trim is not None else _malloc_trim()
        self._last: float | None = None
        self._pending = False
        self.trims = 0

    def read(self, nbytes: int) -> bool:
        """A request read ``nbytes``; ``True`` when the heap was trimmed now.

        A large read asks for a trim; the trim runs at once, or, within ``every_s`` of
        the last one, at the first read (of any size) after that: the last of a burst of
        large reads is given back too.
        """
        if self._trim is None:
            return False
        if nbytes >= self.after_bytes:
            self._pending = True
        if not self._pending:
            return False
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            return False
        self._last = now
        self._pending = False
        self._trim(0)
        self.trims += 1
        return True
