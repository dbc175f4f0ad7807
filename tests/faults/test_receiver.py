"""The receiver's hostile answers, which the harness and the isolation tests rely on: a hang is held
until the caller's timeout and recorded as abandoned, a NUL body and a huge streamed body arrive as
scripted, and a body the receiver cannot parse (not JSON, or nested past the parser) answers 200."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.faults.hostile import nested
from tests.receiver import NUL_BODY, running_receiver


def delivery(payload: object) -> dict[str, object]:
    """What a worker posts: the signed Standard Webhooks envelope, the run's payload inside."""
    return {"type": "run.attempt", "timestamp": "2026-12-01T00:00:00Z", "data": {"payload": payload}}


async def test_a_hang_is_held_until_the_caller_gives_up_and_recorded_as_abandoned() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(receiver.url, json=delivery({"hang": 30}), timeout=0.5)
        for _ in range(40):
            if receiver.calls[0].ended is not None:
                break
            await asyncio.sleep(0.05)
        [call] = receiver.calls
        assert call.behaviour == "hang" and call.abandoned
        assert call.ended is not None and 0.4 < call.ended - call.started < 2.0


async def test_nul_and_huge_answers_and_unparseable_bodies() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient(timeout=10) as client:
        r = await client.post(receiver.url, json=delivery({"nul": True}))
        assert r.status_code == 500 and r.content == NUL_BODY and b"\x00" in r.content
        r = await client.post(receiver.url, json=delivery({"huge": 3_000_000, "status": 200}))
        assert r.status_code == 200 and len(r.content) == 3_000_000
        r = await client.post(receiver.url, json=delivery({"huge": 100_000}))
        assert r.status_code == 500 and len(r.content) == 100_000
        assert (await client.post(receiver.url, content=nested(2000))).status_code == 200
        assert (await client.post(receiver.url, content=b"not json")).status_code == 200
        assert [c.behaviour for c in receiver.calls] == ["nul", "huge", "huge", "", ""]
        assert not any(c.abandoned for c in receiver.calls)
