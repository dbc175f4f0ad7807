"""The bench's wait for a count (bench/measure.py): it sees the end when it comes, not on the grid
of its polling interval."""

from __future__ import annotations

import time

from bench.measure import wait_for_count


async def test_the_end_is_seen_within_a_fine_poll_not_on_the_intervals_grid() -> None:
    # 10,000 done in 0.6 s: polled every 0.25 s only, the end was seen at 0.75 s (a 25 % error).
    began = time.perf_counter()

    async def done() -> int:
        return min(10_000, int((time.perf_counter() - began) / 0.6 * 10_000))

    seen = await wait_for_count(done, 10_000, desc="t", interval=0.25, timeout=10)
    assert 0.6 <= seen - began < 0.66
