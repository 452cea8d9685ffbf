"""The prober gives the C heap back after a large read: trimmed after a big read, at most once a period."""

from __future__ import annotations

from reverie_canary.shared.runtime.memory import TRIM_AFTER_BYTES, HeapTrimmer, _malloc_trim


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_large_read_trims_and_the_next_within_the_period_does_not():
    """4 MiB read: trimmed; another at once: later (at most one per 10 s); small reads alone never."""
    calls: list[int] = []
    clock = Clock()
    heap = HeapTrimmer(clock=clock, trim=lambda pad: calls.append(pad) or 1)
    assert heap.read(64 * 1024) is False and calls == []  # a healthy reply: kilobytes
    assert heap.read(TRIM_AFTER_BYTES) is True and calls == [0]
    clock.t += 9.9
    assert heap.read(20 * 1024 * 1024) is False and calls == [0]
    assert heap.read(1024) is False and calls == [0]  # still within the period: the trim waits
    clock.t += 0.2
    # the burst's last large read is given back at the first read after the period, a small one
    assert heap.read(1024) is True and calls == [0, 0] and heap.trims == 2
    clock.t += 60
    assert heap.read(1024) is False and calls == [0, 0]  # nothing large since: nothing to give back


def test_this_machines_c_library_trims():
    """glibc (the project's Linux images and CI) has malloc_trim; the real call runs and says 0 or 1."""
    trim = _malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)
    assert HeapTrimmer().read(TRIM_AFTER_BYTES) is True
