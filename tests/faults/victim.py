"""The victim: a well-behaved tenant whose runs must all succeed within a bounded due lag whatever
the hostile tenant and the faults do. Its runs are webhooks answered after a short sleep, submitted
in bulk ahead of time and, around an API kill, one by one by concurrent senders — each with an
Idempotency-Key, retried on another API after a transport error, as a careful client would. A
quarter of them are urgent (priority 0), so both lanes of the workers' queue go through the faults.
Each batch submitted ahead is a group completing into one run of its own (tests/faults/groups.py)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.faults.groups import COMPLETION_JOB

TENANT = "victim"
JOB = "hook"
BATCH = 500
URGENT_SHARE = 0.25


class Victim:
    def __init__(self, auth: dict[str, str], rng: random.Random, max_sleep: float):
        self.auth = auth
        self.groups: list[str] = []  # each batch submitted ahead is a group (tests/faults/groups.py)
        self.rng = rng
        self.max_sleep = max_sleep
        self.accepted: list[str] = []  # run ids the API answered 201 (or 200: a replay) for
        self.in_flight: Counter[int] = Counter()  # API port -> requests sent, not yet answered
        self.cut: Counter[int] = Counter()  # API port -> requests that died with a transport error
        self._keys = itertools.count()
        self.problems: list[str] = []  # victim requests no API ever accepted
        self.answers: Counter[int] = Counter()  # HTTP status -> answers to submit_one's requests
        self.answered: list[tuple[float, int]] = []  # (time.monotonic(), HTTP status) of each answer

    def job(self, receiver_url: str, max_attempts: int) -> dict[str, Any]:
        return {
            "target": {"type": "http", "url": receiver_url},
            "max_attempts": max_attempts,
            "backoff_seconds": 0.2,
            "timeout_seconds": 10,
            # The run, as it ended, POSTed back (its payload's sleep holds each delivery open too).
            "callback": {"url": receiver_url},
        }

    def _run(self) -> dict[str, Any]:
        """A run's body: the job, its payload and, for a share of them, priority 0 (the urgent lane)."""
        body: dict[str, Any] = {
            "job": JOB,
            "payload": {"sleep": round(self.rng.uniform(0.02, self.max_sleep), 3)},
        }
        if self.rng.random() < URGENT_SHARE:
            body["priority"] = 0
        return body

    async def submit_spread(self, api: httpx.AsyncClient, n: int, start: float, end: float) -> None:
        """`n` runs due at random moments between now+start and now+end seconds."""
        now = datetime.now(UTC)
        runs = [
            {
                **self._run(),
                "scheduled_at": (now + timedelta(seconds=self.rng.uniform(start, end))).isoformat(),
            }
            for _ in range(n)
        ]
        for i in range(0, len(runs), BATCH):
            group = {"name": f"spread-{len(self.groups)}", "on_complete": {"job": COMPLETION_JOB}}
            r = await api.post(
                f"/tenants/{TENANT}/runs/batch",
                json={"runs": runs[i : i + BATCH], "group": group},
                headers=self.auth,
            )
            assert r.status_code == 201, r.text
            self.accepted += [run["id"] for run in r.json()["runs"]]
            self.groups.append(r.json()["group_id"])

    async def submit_one(self, ports: Callable[[], list[int]]) -> None:
        """One run due now, to a live API; a transport error is retried (same key) on another."""
        key = f"victim-{next(self._keys)}"
        r = await self.post(ports, f"/tenants/{TENANT}/runs", self._run(), f"victim run {key}", key)
        if r is not None:
            self.accepted.append(r.json()["id"])

    async def post(
        self, ports: Callable[[], list[int]], path: str, body: Any, what: str, key: str | None = None
    ) -> httpx.Response | None:
        """POSTs `body` (idempotent: `key` as its Idempotency-Key, or keys of its own) to a live API
        until it is accepted (200 or 201): a transport error is retried on another API, a 5xx while
        the database is away and a 409 for a key still in flight after a pause. None, with the
        reason among `problems`, when no API accepted it."""
        headers = self.auth if key is None else {**self.auth, "Idempotency-Key": key}
        tried: list[str] = []  # what each attempt met, for a problem's message
        for attempt in range(20):
            live = ports()
            if not live:
                await asyncio.sleep(0.5)
                continue
            port = live[attempt % len(live)]
            self.in_flight[port] += 1
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as api:
                    r = await api.post(path, json=body, headers=headers)
            except httpx.TransportError as exc:
                tried.append(f"{port}: {exc!r}")
                self.cut[port] += 1
                await asyncio.sleep(0.2)
                continue
            finally:
                self.in_flight[port] -= 1
            self.answers[r.status_code] += 1
            self.answered.append((time.monotonic(), r.status_code))
            tried.append(f"{port}: {r.status_code}")
            if r.status_code in (200, 201):
                return r
            if r.status_code == 409 and r.json().get("field") == "idempotency_key":
                # The same key is still in flight elsewhere (an earlier attempt cut off from us): the
                # API says to retry once it has finished, and the retry replays or makes the run.
                await asyncio.sleep(0.2)
                continue
            if r.status_code < 500:
                self.problems.append(f"{what} refused: {r.status_code} {r.text[:200]} after {tried}")
                return None
            await asyncio.sleep(0.2)  # a 5xx while the API's database is away: try again
        self.problems.append(f"{what} never accepted: no API answered it")
        return None

    async def senders(self, ports: Callable[[], list[int]], stop: asyncio.Event, n: int = 6) -> None:
        """`n` clients submitting one run after another until `stop` (each finishes its run)."""

        async def sender() -> None:
            while not stop.is_set():
                await self.submit_one(ports)

        await asyncio.gather(*(sender() for _ in range(n)))
