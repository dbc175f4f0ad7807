"""The receiver's hostile answers, which the harness and the isolation tests rely on: a hang is held
until the caller's timeout and recorded as abandoned, a NUL body and a huge streamed body arrive as
scripted (by the body itself, a run's payload, or by the payload inside an envelope), and a body the receiver cannot parse (not JSON, or nested past the parser) answers 200. And
its count of a key's requests in flight, which the concurrency-limit check relies on: overlapping
requests beyond a limit are reported, sequential ones are not, a killed caller's request stops
counting when its connection closes."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.faults.hostile import nested
from tests.faults.report import over_limit, peaks
from tests.receiver import NUL_BODY, running_receiver


def enveloped(payload: object, kind: str = "run.attempt") -> dict[str, object]:
    """What a worker posts to a target with `"body": "envelope"` (or, as `run.completed`, to a
    callback): the run's payload inside. By default it posts the payload itself."""
    return {"type": kind, "timestamp": "2026-12-01T00:00:00Z", "data": {"payload": payload}}


async def test_a_hang_is_held_until_the_caller_gives_up_and_recorded_as_abandoned() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(receiver.url, json={"hang": 30}, timeout=0.5)
        for _ in range(40):
            if receiver.calls[0].ended is not None:
                break
            await asyncio.sleep(0.05)
        [call] = receiver.calls
        assert call.behaviour == "hang" and call.abandoned
        assert call.ended is not None and 0.4 < call.ended - call.started < 2.0


async def test_nul_and_huge_answers_and_unparseable_bodies() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient(timeout=10) as client:
        r = await client.post(receiver.url, json=enveloped({"nul": True}))
        assert r.status_code == 500 and r.content == NUL_BODY and b"\x00" in r.content
        r = await client.post(receiver.url, json={"huge": 3_000_000, "status": 200})
        assert r.status_code == 200 and len(r.content) == 3_000_000
        r = await client.post(receiver.url, json=enveloped({"huge": 100_000}))
        assert r.status_code == 500 and len(r.content) == 100_000
        assert (await client.post(receiver.url, content=nested(2000))).status_code == 200
        assert (await client.post(receiver.url, content=b"not json")).status_code == 200
        assert [c.behaviour for c in receiver.calls] == ["nul", "huge", "huge", "", ""]
        assert not any(c.abandoned for c in receiver.calls)


# ── the overlap count behind the concurrency-limit check (tests/faults/report.py limits_hold) ──


def keyed(key: str, sleep: float, run: str) -> tuple[dict[str, object], dict[str, str]]:
    return {"k": key, "sleep": sleep}, {"scheduler-run-id": run, "scheduler-epoch": "1"}


async def test_overlapping_requests_of_a_key_beyond_the_limit_are_reported() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient(timeout=10) as client:
        # Three of key a at once (one over a limit of 2), one of b beside them, then one more of a
        # alone after they ended.
        sends = [
            client.post(receiver.url, json=body, headers=h)
            for body, h in (
                keyed("a", 0.6, "r1"),
                keyed("a", 0.6, "r2"),
                keyed("a", 0.6, "r3"),
                keyed("b", 0.6, "r4"),
            )
        ]
        assert all(r.status_code == 200 for r in await asyncio.gather(*sends))
        body, headers = keyed("a", 0.05, "r5")
        await client.post(receiver.url, json=body, headers=headers)
        # A callback (its body carries the run's payload too) and an unkeyed attempt are not counted.
        await client.post(
            receiver.url,
            json=enveloped({"k": "a"}, "run.completed"),
            headers={"scheduler-callback-attempt": "1"},
        )
        await client.post(receiver.url, json={"sleep": 0.01})
        assert peaks(receiver.calls) == {"a": 3, "b": 1}
        assert receiver.calls[4].concurrent == 1  # r5: the others had been answered
        assert receiver.in_flight == {"a": 0, "b": 0}
        [violation] = over_limit(receiver.calls, 2)
        assert "epoch 1 key 'a': 3 in flight" in violation
        assert over_limit(receiver.calls, 3) == []


async def test_a_request_is_counted_until_its_response_is_sent() -> None:
    """Two requests of a key one after the other (the second sent once the first's answer is read)
    never overlap: the count drops before the caller can see the answer."""
    async with running_receiver() as receiver, httpx.AsyncClient(timeout=10) as client:
        for run in ("r1", "r2", "r3"):
            body, headers = keyed("a", 0.05, run)
            assert (await client.post(receiver.url, json=body, headers=headers)).status_code == 200
        assert peaks(receiver.calls) == {"a": 1}


async def test_a_killed_callers_request_stops_counting_when_its_connection_closes() -> None:
    """A worker killed with kill -9 mid-request: the kernel closes its socket, the receiver sees the
    disconnect while it holds the request and counts it off within a poll — not after the request's
    sleep, nor when the scheduler's reaper frees the slot (a lease later)."""
    async with running_receiver() as receiver:
        body, headers = keyed("a", 30, "orphan")
        client = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import httpx, json, sys; "
                "httpx.post(sys.argv[1], json=json.loads(sys.argv[2]), headers=json.loads(sys.argv[3]), timeout=60)",
                receiver.url,
                json.dumps(body),
                json.dumps(headers),
            ]
        )
        try:
            for _ in range(200):
                if receiver.in_flight["a"] == 1:
                    break
                await asyncio.sleep(0.05)
            assert receiver.in_flight["a"] == 1, "the request never arrived"
            client.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await asyncio.to_thread(client.wait, 10)
            while receiver.in_flight["a"] and time.monotonic() < killed + 5:
                await asyncio.sleep(0.01)
            assert receiver.in_flight["a"] == 0
            [call] = receiver.calls
            assert call.abandoned and call.ended is not None and call.ended - killed < 0.5
        finally:
            if client.poll() is None:
                client.kill()
