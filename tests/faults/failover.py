"""Postgres failover under load: the scheduler's API, a standalone engine and a worker run against a
Patroni cluster (stack/patroni.py) through a URL naming every server, while clients submit runs and
the worker drains them; then the primary is lost (kill -9 of its whole node) or handed over (a
planned switchover), and the scenario checks what the clients and the database saw.

Clients submit one run after another, each with its own Idempotency-Key, and retry a 503 or a
transport error with the same key every RETRY_SECONDS (faster than the API's Retry-After, to time the
outage closely). The victim's runs are webhooks to a local receiver answered after a short sleep, so
runs are in flight at the receiver as well as in the API when the fault strikes.

The checks reuse the fault harness's (tests/faults/report.py): no accepted run lost, none the API
never answered for (two runs for one key), every run terminal, no (run, epoch) called twice. And the
API's answers: only 2xx and 503, never another 5xx.

    python -m tests.faults.failover kill          # by hand; prints the figures
    python -m tests.faults.failover switchover
    SCHEDULER_TEST_KEEP_PATRONI=1 python -m …      # keeps the cluster's directory: Postgres's logs
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx

from app.config import Settings
from app.db.errors import DB_ERRORS
from app.db.migrations import migrate
from stack.patroni import PatroniCluster
from stack.settings import isolated_settings
from tests.faults import victim
from tests.faults.report import Outcome, Report, Run, check, every_run_ends, no_run_lost, one_start_per_epoch
from tests.processes import processes
from tests.receiver import Receiver, running_receiver
from tests.support import ADMIN_TOKEN, bearer, delete_stream

FAULTS = ("kill", "switchover")
RETRY_SECONDS = 0.2
SENDERS = 8
TERMINAL = ("succeeded", "failed", "cancelled", "expired")


@dataclass
class Attempt:
    at: float  # time.monotonic() the request was sent
    answered: float
    status: int | None  # None: a transport error
    error: str = ""


@dataclass
class Submissions:
    """Every request the clients sent and every run the API accepted."""

    attempts: list[Attempt] = field(default_factory=list)
    accepted: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> run id
    tries: Counter[str] = field(default_factory=Counter)  # Idempotency-Key -> requests sent with it
    in_flight: int = 0  # requests sent, not yet answered
    unanswered: list[str] = field(default_factory=list)  # keys never accepted before the clients stopped
    refused: list[str] = field(default_factory=list)  # "<key>: <status> <body>": a 4xx, never expected

    def statuses(self, after: float = 0.0) -> Counter[str]:
        return Counter(
            str(a.status) if a.status is not None else a.error for a in self.attempts if a.at >= after
        )


@dataclass
class Figures:
    fault: str
    detail: str
    sync_standby: str | None  # at the fault: the one server that holds every acknowledged commit
    promoted: str | None  # the leader once the load ended
    submissions_in_flight: int  # at the fault
    runs_in_flight: int  # not terminal in the database just before it
    calls_in_flight: int  # at the receiver at that moment
    first_submission: float | None  # seconds from the fault to the first 2xx of a request sent after it
    first_start: float | None  # seconds from the fault to the first run started after it (database)
    write_outage: float  # the longest stretch from the fault on without a 2xx answer
    start_outage: float  # the longest stretch from the fault on without a run started (database)
    answers: Counter[str]  # status (or transport error) -> count, over the whole load
    retried_keys: int  # submissions that needed more than one request
    refused: list[str]  # "<key>: <status> <body>" of each 4xx
    report: Report

    @property
    def other_5xx(self) -> int:
        return sum(n for status, n in self.answers.items() if status.startswith("5") and status != "503")

    def violations(self) -> list[str]:
        out = [*no_run_lost(self.report), *every_run_ends(self.report), *one_start_per_epoch(self.report)]
        if self.other_5xx:
            out.append(f"the API answered a 5xx other than 503: {dict(self.answers)}")
        if unexpected := [s for s in self.answers if not (s.startswith("2") or s == "503")]:
            out.append(f"answers other than 2xx and 503: {unexpected} ({dict(self.answers)})")
        if self.promoted is None or self.promoted != self.sync_standby:
            out.append(f"promoted {self.promoted}, not the synchronous standby {self.sync_standby}")
        if self.first_submission is None:
            out.append("no submission succeeded after the fault")
        if self.first_start is None:
            out.append("no run started after the fault")
        if not self.submissions_in_flight or not (self.runs_in_flight or self.calls_in_flight):
            out.append(
                f"the fault did not land with work in flight: {self.submissions_in_flight} submissions, "
                f"{self.runs_in_flight} runs, {self.calls_in_flight} calls"
            )
        return out

    def render(self) -> str:
        def seconds(value: float | None) -> str:
            return "never" if value is None else f"{value:.1f}s"

        statuses = self.report.statuses.get("victim", {})
        return "\n".join(
            [
                f"── postgres {self.fault}: {self.detail} ──",
                f"promoted                   {self.promoted} (the synchronous standby: {self.sync_standby})",
                f"in flight at the fault     {self.submissions_in_flight} submissions, {self.runs_in_flight} "
                f"runs not terminal, {self.calls_in_flight} calls at the receiver",
                f"first submission after it  {seconds(self.first_submission)}",
                f"first run started after it {seconds(self.first_start)}",
                f"longest without a 2xx      {self.write_outage:.1f}s; without a run started "
                f"{self.start_outage:.1f}s",
                f"answers                    {dict(self.answers)}: 503 x{self.answers.get('503', 0)}, "
                f"other 5xx x{self.other_5xx}; {self.retried_keys} submissions retried",
                f"runs                       {len(self.report.outcome.accepted)} accepted, {statuses}, "
                f"lost {len(self.report.lost)}, unasked {len(self.report.unasked)}, "
                f"same-epoch repeats {sum(n - 1 for n in self.report.same_epoch_duplicates.values())}, "
                f"redeliveries {self.report.redeliveries}",
                *(f"refused                    {r}" for r in self.refused[:5]),
                "verdict                    "
                + ("OK" if not self.violations() else "; ".join(self.violations())),
            ]
        )


class Clients:
    """SENDERS clients, each submitting one run after another until stopped."""

    def __init__(self, base_url: str, good: victim.Victim):
        self.base_url = base_url
        self.good = good
        self.seen = Submissions()
        self.stop = asyncio.Event()
        self.keys = itertools.count()

    async def submit(self, client: httpx.AsyncClient, give_up: float) -> None:
        key = f"failover-{next(self.keys)}"
        body = self.good._run()
        while time.monotonic() < give_up:
            sent = time.monotonic()
            self.seen.tries[key] += 1
            self.seen.in_flight += 1
            try:
                r = await client.post(
                    f"/tenants/{victim.TENANT}/runs",
                    json=body,
                    headers={**self.good.auth, "Idempotency-Key": key},
                )
            except httpx.TransportError as exc:
                self.seen.attempts.append(Attempt(sent, time.monotonic(), None, type(exc).__name__))
                await asyncio.sleep(RETRY_SECONDS)
                continue
            finally:
                self.seen.in_flight -= 1
            self.seen.attempts.append(Attempt(sent, time.monotonic(), r.status_code))
            if r.status_code in (200, 201):  # 200: the run an earlier, unanswered, request made
                self.seen.accepted[key] = r.json()["id"]
                return
            if r.status_code < 500:
                self.seen.refused.append(f"{key}: {r.status_code} {r.text[:200]}")
                return
            await asyncio.sleep(RETRY_SECONDS)  # a 503 (or a 500, which the checks count) again later
        self.seen.unanswered.append(key)

    async def run(self, give_up_after: float) -> None:
        # A fresh connection per client and no keep-alive past a second: no request races the
        # server closing an idle connection (uvicorn: 5 s).
        limits = httpx.Limits(max_keepalive_connections=SENDERS, keepalive_expiry=1.0)

        async def sender() -> None:
            async with httpx.AsyncClient(base_url=self.base_url, timeout=30, limits=limits) as client:
                while not self.stop.is_set():
                    await self.submit(client, time.monotonic() + give_up_after)

        await asyncio.gather(*(sender() for _ in range(SENDERS)))


def failover_settings(database_url: str, nats_url: str, redis_url: str | None) -> Settings:
    """The fault harness's short leases (tests/faults/stack.py), under names of their own on the
    shared NATS."""
    return isolated_settings(
        database_url=database_url,
        nats_url=nats_url,
        redis_url=redis_url or "redis://127.0.0.1:1/0",  # the hot index is off: never dialled
        admin_token=ADMIN_TOKEN,
        prefix="failover",
        lease_seconds=2.0,
        dispatch_lease_seconds=5.0,
        ack_wait_seconds=3.0,
        reap_interval_seconds=0.3,
        poll_interval_seconds=0.2,
        worker_grace_seconds=2.0,
        worker_concurrency=32,
        callback_backoff_seconds=0.2,
        callback_poll_seconds=0.2,
        callback_timeout_seconds=5.0,
        callback_max_attempts=25,
    )


@contextlib.asynccontextmanager
async def patroni_database(nodes: int = 3) -> AsyncIterator[tuple[PatroniCluster, str]]:
    """A Patroni cluster with a migrated database `scheduler`; the URL names every server."""
    cluster = PatroniCluster(nodes, keep=bool(os.environ.get("SCHEDULER_TEST_KEEP_PATRONI")))
    try:
        await asyncio.to_thread(cluster.start)
        admin = await asyncpg.connect(cluster.url("postgres"))
        try:
            await admin.execute('CREATE DATABASE "scheduler"')
        finally:
            await admin.close()
        url = cluster.url("scheduler")
        await asyncio.to_thread(migrate, url)  # alembic, over the multi-host URL
        yield cluster, url
    finally:
        await asyncio.to_thread(cluster.stop)


async def _fetch(pool: asyncpg.Pool, sql: str, *args: object) -> list[asyncpg.Record]:
    """The scenario's own reads ride out the failover it causes (60 s at most)."""
    for _ in range(120):
        with contextlib.suppress(*DB_ERRORS):
            rows: list[asyncpg.Record] = await pool.fetch(sql, *args)
            return rows
        await asyncio.sleep(0.5)
    rows = await pool.fetch(sql, *args)
    return rows


async def _drain(pool: asyncpg.Pool, ids: set[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await _fetch(
            pool, "SELECT id::text AS id, status FROM job_runs WHERE tenant_id = $1", victim.TENANT
        )
        done = {r["id"] for r in rows if r["status"] in TERMINAL}
        if ids <= done and len(done) == len(rows):
            return
        await asyncio.sleep(0.25)


async def run(fault: str, nats_url: str, redis_url: str | None, log_dir: Path) -> Figures:
    """The whole scenario: cluster, processes, load, the fault, recovery, drain, checks."""
    assert fault in FAULTS, fault
    async with (
        patroni_database() as (cluster, url),
        running_receiver() as receiver,
    ):
        settings = failover_settings(url, nats_url, redis_url)
        pool = await asyncpg.create_pool(url, min_size=0, max_size=2, timeout=5)
        try:
            async with processes(settings, log_dir) as spawn:
                api, engine, worker = spawn("api", SCHEDULER_ENGINE="off"), spawn("engine"), spawn("worker")
                await asyncio.gather(*(p.wait_ready() for p in (api, engine, worker)))
                return await _scenario(fault, cluster, pool, api.base_url, receiver)
        finally:
            pool.terminate()
            await delete_stream(settings)


async def _scenario(
    fault: str, cluster: PatroniCluster, pool: asyncpg.Pool, base_url: str, receiver: Receiver
) -> Figures:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as api:
        r = await api.post("/tenants", json={"id": victim.TENANT}, headers=bearer(ADMIN_TOKEN))
        assert r.status_code == 201, r.text
        good = victim.Victim(bearer(r.json()["api_key"]), random.Random(30), max_sleep=0.4)
        r = await api.put(
            f"/tenants/{victim.TENANT}/jobs/{victim.JOB}", json=good.job(receiver.url, 25), headers=good.auth
        )
        assert r.status_code == 201, r.text
    clients = Clients(base_url, good)
    load = asyncio.create_task(clients.run(give_up_after=60.0))
    await asyncio.sleep(4.0)  # runs flowing: submitted, claimed, at the receiver, finishing
    runs_in_flight = (
        await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status NOT IN ('succeeded', 'failed', 'cancelled')",
            victim.TENANT,
        )
        or 0
    )
    leader, sync_standby = cluster.leader(), cluster.sync_standby()
    assert leader is not None
    struck, at_wall = time.monotonic(), datetime.now(UTC)
    submissions_in_flight = clients.seen.in_flight
    calls_in_flight = sum(1 for c in receiver.calls if c.ended is None and not c.is_callback)
    if fault == "kill":
        pids = await asyncio.to_thread(cluster.kill, leader)
        detail = f"kill -9 of {leader}'s Patroni and Postgres ({len(pids)} processes)"
    else:
        target = await asyncio.to_thread(cluster.switchover)
        detail = f"switchover {leader} -> {target}"
    print(f"  {at_wall.isoformat(timespec='milliseconds')} {detail}", flush=True)

    def first_success() -> float | None:
        return min(
            (a.answered for a in clients.seen.attempts if a.at >= struck and a.status in (200, 201)),
            default=None,
        )

    deadline = time.monotonic() + 60
    while first_success() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(3.0)  # the load goes on after the recovery
    clients.stop.set()
    await load
    promoted = cluster.leader()
    print(f"  leader {promoted}, members {[(m['name'], m['role']) for m in cluster.members()]}", flush=True)
    await _drain(pool, set(clients.seen.accepted.values()), timeout=45)
    await asyncio.sleep(0.5)  # a late call reaches the receiver before it is read
    started = await _fetch(
        pool,
        "SELECT min(started_at) AS at FROM job_runs WHERE tenant_id = $1 AND started_at > $2",
        victim.TENANT,
        at_wall,
    )
    first_start = (started[0]["at"] - at_wall).total_seconds() if started and started[0]["at"] else None
    starts = await _fetch(
        pool,
        "SELECT started_at AS at FROM job_runs WHERE tenant_id = $1 AND started_at > $2 ORDER BY 1",
        victim.TENANT,
        at_wall,
    )
    start_times = [0.0] + [(r["at"] - at_wall).total_seconds() for r in starts]
    successes = [
        a.answered - struck for a in clients.seen.attempts if a.answered >= struck and a.status in (200, 201)
    ]
    answered = [0.0, *sorted(successes)]
    rows = await _fetch(
        pool,
        "SELECT id::text AS id, status, attempt, max_attempts, epoch FROM job_runs WHERE tenant_id = $1",
        victim.TENANT,
    )
    runs = [
        Run(r["id"], victim.TENANT, r["status"], r["attempt"], r["max_attempts"], r["epoch"]) for r in rows
    ]
    outcome = Outcome(
        accepted=list(clients.seen.accepted.values()),
        runs=runs,
        calls=list(receiver.calls),
        faults=[],
        lag_bounds={},
        problems=clients.seen.refused + [f"never accepted: {k}" for k in clients.seen.unanswered],
    )
    success = first_success()
    return Figures(
        fault=fault,
        detail=detail,
        sync_standby=sync_standby,
        promoted=promoted,
        submissions_in_flight=submissions_in_flight,
        runs_in_flight=int(runs_in_flight),
        calls_in_flight=calls_in_flight,
        first_submission=None if success is None else success - struck,
        first_start=first_start,
        write_outage=max(b - a for a, b in itertools.pairwise(answered)) if len(answered) > 1 else math.inf,
        start_outage=max(b - a for a, b in itertools.pairwise(start_times))
        if len(start_times) > 1
        else math.inf,
        answers=clients.seen.statuses(),
        refused=clients.seen.refused,
        retried_keys=sum(1 for n in clients.seen.tries.values() if n > 1),
        report=check(outcome),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.failover", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("fault", choices=FAULTS)
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--keep", action="store_true", help="keep the process logs")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="scheduler-failover-"))
    figures = asyncio.run(run(args.fault, args.nats_url, None, root))
    print(figures.render())
    failed = bool(figures.violations())
    if failed or args.keep:
        print(f"process logs in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
