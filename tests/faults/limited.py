"""The limited tenant: one job limited to `LIMIT` runs in flight per key (`payload.k`, a few keys),
whose runs are attempts the receiver holds open a while (their payload's sleep), so requests of a
key overlap at the receiver unless the limit keeps them apart. Its runs come due faster than its
slots free up during the fault window, so most wait held back for a slot while workers, engines,
NATS and Postgres are killed under them; report.py's `limits_hold` checks the receiver never saw more
than `LIMIT` of a key at once."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

TENANT = "limited"
JOB = "limited"
LIMIT = 2
KEYS = ("a", "b", "c")
# Each attempt is held at the receiver this long: long enough for attempts of a key to overlap if
# the limit failed, and shorter than what the lease leaves a frozen or cut-off worker (2 s, renewed
# every 0.67 s: at least 1.3 s) — a request it sent before losing its lease ends before the slot
# can be granted again, so the receiver's count tests the slots, not how long an orphan lingers.
SLEEP = (0.3, 0.8)


def job(receiver_url: str, max_attempts: int) -> dict[str, Any]:
    return {
        "target": {"type": "http", "url": receiver_url},
        "max_attempts": max_attempts,
        "backoff_seconds": 0.2,
        "timeout_seconds": 10,
        "concurrency": {"limit": LIMIT, "key": "payload.k"},
    }


async def submit(
    api: httpx.AsyncClient, auth: dict[str, str], rng: random.Random, n: int, start: float, end: float
) -> list[str]:
    """`n` runs, keys in turn, due at random moments between now+start and now+end seconds."""
    now = datetime.now(UTC)
    runs = [
        {
            "job": JOB,
            "scheduled_at": (now + timedelta(seconds=rng.uniform(start, end))).isoformat(),
            "payload": {"k": KEYS[i % len(KEYS)], "sleep": round(rng.uniform(*SLEEP), 3)},
        }
        for i in range(n)
    ]
    r = await api.post(f"/tenants/{TENANT}/runs/batch", json={"runs": runs}, headers=auth)
    assert r.status_code == 201, r.text
    return [run["id"] for run in r.json()["runs"]]
