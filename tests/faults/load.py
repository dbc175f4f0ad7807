"""Load: sustained submission over real HTTP to a `scheduler api` subprocess (its engine on) while a
`scheduler worker` drains, then the backlog quota under a flood.

    python -m tests.faults.load --rps 300 --seconds 60         # by hand; prints the figures
    pytest tests/faults/test_load.py                           # the short CI variant

Phase 1 is open loop: one POST /tenants/steady/runs every 1/rps seconds whatever the answers take, so a
slow server shows up as latency, not as a lower offered rate. Every answer must be 201 and every
accepted run must reach `succeeded`. Phase 2 floods tenant `flood` with batches of runs due in an hour
(they stay pending) until it passes SCHEDULER_TENANT_MAX_PENDING: it must get 429 with Retry-After and
nothing written, while tenant `steady` keeps submitting and keeps getting 201.

Services are the machine's (SCHEDULER_TEST_* URLs) or embedded ones, as for the tests. Latencies are
figures to read, not assertions: timing claims belong to the bench.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from app.config import Settings
from tests.processes import processes
from tests.support import ADMIN_TOKEN, bearer

TERMINAL = ("succeeded", "failed", "cancelled", "expired")
SENDERS = 64  # requests in flight at most


@dataclass
class LoadReport:
    rps: float
    seconds: float
    quota: int
    sent: int = 0
    accepted: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)  # transport errors retried with the same key
    unasked: int = 0  # runs in the database beyond those accepted: a retry that created a second run
    latencies: list[float] = field(default_factory=list)  # from when each request was due
    service: list[float] = field(default_factory=list)  # from when it was sent: the server's share
    submit_seconds: float = 0.0
    drain_seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    flood_accepted: int = 0
    flood_refusals: list[tuple[int, str | None, str]] = field(
        default_factory=list
    )  # status, Retry-After, error
    flood_pending: int = 0
    flood_errors: Counter[str] = field(default_factory=Counter)
    steady_during_flood: Counter[str] = field(default_factory=Counter)

    def percentile(self, q: float, of: str = "latencies") -> float:
        ordered = sorted(getattr(self, of))
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    def violations(self) -> list[str]:
        out = []
        if self.errors:
            out.append(f"sustained phase errors: {dict(self.errors)}")
        if self.lost:
            out.append(f"{self.lost} accepted runs lost")
        if self.unasked:
            out.append(f"{self.unasked} runs created beyond those accepted (a retry was not idempotent)")
        if self.statuses != {"succeeded": self.accepted}:
            out.append(f"accepted runs did not all succeed: {self.statuses}")
        if not self.flood_refusals:
            out.append("the flood was never refused")
        if any(status != 429 or not (retry or "").isdigit() for status, retry, _ in self.flood_refusals):
            out.append(f"a refusal was not 429 with Retry-After: {self.flood_refusals}")
        if self.flood_pending != self.flood_accepted:
            out.append(
                f"flood: {self.flood_pending} pending for {self.flood_accepted} accepted (a 429 wrote?)"
            )
        if self.flood_accepted > self.quota:
            out.append(f"flood: {self.flood_accepted} accepted past the quota of {self.quota}")
        if self.flood_errors:
            out.append(f"flood: unexpected answers {dict(self.flood_errors)}")
        if set(self.steady_during_flood) != {"201"}:
            out.append(f"the other tenant was not isolated from the flood: {dict(self.steady_during_flood)}")
        return out

    def render(self) -> str:
        achieved = self.sent / self.submit_seconds if self.submit_seconds else 0.0
        refusal = self.flood_refusals[0] if self.flood_refusals else None
        lines = [
            "── load ──",
            f"offered                 {self.rps:g} rps for {self.seconds:g}s (open loop), "
            f"achieved {achieved:.1f} rps",
            f"requests                {self.sent} sent, {self.accepted} accepted, "
            f"errors {dict(self.errors)}, retried {dict(self.retried)}",
            f"latency (ms, from due)  p50 {self.percentile(0.50):.1f}  p90 {self.percentile(0.90):.1f}  "
            f"p99 {self.percentile(0.99):.1f}  max {self.percentile(1.0):.1f}",
            f"latency (ms, from send) p50 {self.percentile(0.50, 'service'):.1f}  "
            f"p90 {self.percentile(0.90, 'service'):.1f}  p99 {self.percentile(0.99, 'service'):.1f}  "
            f"max {self.percentile(1.0, 'service'):.1f}",
            f"drained                 {self.statuses} {self.drain_seconds:.1f}s after the last submission",
            f"runs lost               {self.lost}",
            f"quota flood             {self.flood_accepted} runs accepted under a quota of {self.quota}, "
            f"then {len(self.flood_refusals)} refusals (first: {refusal}); {self.flood_pending} pending",
            f"other tenant meanwhile  {dict(self.steady_during_flood)}",
        ]
        if achieved < 0.9 * self.rps:
            lines.append(
                f"note                    the offered rate was not sustained ({achieved:.1f} of {self.rps:g} "
                "rps): requests queued, and the latencies show that queue"
            )
        violations = self.violations()
        lines.append(
            "verdict                 " + ("OK" if not violations else "FAILED: " + "; ".join(violations))
        )
        return "\n".join(lines)


async def _submit_one(
    client: httpx.AsyncClient, auth: dict[str, str], report: LoadReport, ids: list[str], due: float
) -> None:
    """One run. A transport error (the connection dropped, the answer lost) is retried with the same
    Idempotency-Key, as a careful client would: the API answers a replay with the run it created."""
    report.sent += 1
    body = {"job": "work", "payload": {"n": report.sent}}
    headers = {**auth, "Idempotency-Key": f"load-{report.sent}"}
    sent = time.perf_counter()
    for attempt in range(3):
        try:
            r = await client.post("/tenants/steady/runs", json=body, headers=headers)
            break
        except httpx.TransportError as exc:
            if attempt == 2:
                report.errors[type(exc).__name__] += 1
                return
            report.retried[type(exc).__name__] += 1
    # From when the request was due, not when a sender got to it: time spent queued at the client
    # while the server is behind counts (no coordinated omission).
    report.latencies.append(time.perf_counter() - due)
    report.service.append(time.perf_counter() - sent)
    if r.status_code in (200, 201):  # 200: a retry's replay of the run the lost answer created
        ids.append(r.json()["id"])
    else:
        report.errors[str(r.status_code)] += 1


async def sustain(client: httpx.AsyncClient, auth: dict[str, str], report: LoadReport) -> list[str]:
    """Open loop: request n is due at start + n/rps whatever earlier ones took. SENDERS coroutines
    send them (a few thousand queued in the HTTP client's pool made the client itself the bottleneck);
    when all are busy, requests go out late and the lateness shows in the latency."""
    ids: list[str] = []
    total = int(report.rps * report.seconds)
    start = time.perf_counter() + 0.1
    schedule = itertools.count()

    async def sender() -> None:
        while (n := next(schedule)) < total:
            due = start + n / report.rps
            if (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            await _submit_one(client, auth, report, ids, due)

    progress = asyncio.create_task(_progress(report, ids))
    await asyncio.gather(*(sender() for _ in range(SENDERS)))
    progress.cancel()
    report.submit_seconds = time.perf_counter() - start
    report.accepted = len(ids)
    return ids


async def _progress(report: LoadReport, ids: list[str]) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(5)
        answered = len(report.latencies) + sum(report.errors.values())
        print(
            f"  t={time.monotonic() - started:5.1f}s sent {report.sent} answered {answered} "
            f"(201: {len(ids)}, errors: {dict(report.errors)})",
            flush=True,
        )


async def drain(pool: asyncpg.Pool, ids: list[str], report: LoadReport, timeout: float) -> None:
    started = time.monotonic()
    while True:
        rows = await pool.fetch("SELECT id::text AS id, status FROM job_runs WHERE tenant_id = 'steady'")
        found = {r["id"]: r["status"] for r in rows}
        done = all(found.get(i) in TERMINAL for i in ids)
        if done or time.monotonic() - started > timeout:
            report.drain_seconds = time.monotonic() - started
            report.lost = sum(1 for i in ids if i not in found)
            report.unasked = len(found.keys() - set(ids))
            report.statuses = dict(Counter(found[i] for i in ids if i in found))
            return
        await asyncio.sleep(0.25)


async def flood(
    client: httpx.AsyncClient, pool: asyncpg.Pool, steady_auth: dict[str, str], report: LoadReport
) -> None:
    """Tenant `flood` submits batches due in an hour until refused three times; `steady` trickles
    single runs meanwhile."""
    flood_auth = bearer((await _tenant(client, "flood"))["api_key"])
    await _job(client, "flood", flood_auth)
    stop = asyncio.Event()

    async def trickle() -> None:
        while not stop.is_set():
            try:
                r = await client.post("/tenants/steady/runs", json={"job": "work"}, headers=steady_auth)
                report.steady_during_flood[str(r.status_code)] += 1
            except httpx.HTTPError as exc:
                report.steady_during_flood[type(exc).__name__] += 1
            await asyncio.sleep(0.02)

    steady = asyncio.create_task(trickle())
    size = max(1, min(1000, report.quota // 5))
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    try:
        for _ in range(report.quota // size + 10):
            r = await client.post(
                "/tenants/flood/runs/batch",
                json={"runs": [{"job": "work", "scheduled_at": later}] * size},
                headers=flood_auth,
            )
            if r.status_code == 201:
                report.flood_accepted += size
            elif r.status_code == 429:
                report.flood_refusals.append((429, r.headers.get("retry-after"), r.json().get("code")))
                if len(report.flood_refusals) == 3:
                    break
                await asyncio.sleep(0.5)
            else:
                report.flood_errors[str(r.status_code)] += 1
    finally:
        stop.set()
        await steady
    report.flood_pending = await pool.fetchval(
        "SELECT count(*) FROM job_runs WHERE tenant_id = 'flood' AND status = 'pending'"
    )


async def _tenant(client: httpx.AsyncClient, tenant_id: str) -> dict[str, str]:
    r = await client.post("/tenants", json={"id": tenant_id}, headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _job(client: httpx.AsyncClient, tenant_id: str, auth: dict[str, str]) -> None:
    r = await client.put(f"/tenants/{tenant_id}/jobs/work", json={"target": {"type": "noop"}}, headers=auth)
    assert r.status_code == 201, r.text


async def run(
    settings: Settings, log_dir: Path, rps: float, seconds: float, quota: int, timeout: float = 120.0
) -> LoadReport:
    """Both phases against an API and a worker started here with `settings` (and the quota)."""
    report = LoadReport(rps=rps, seconds=seconds, quota=quota)
    settings = settings.model_copy(update={"tenant_max_pending": quota, "engine": "on"})
    assert settings.database_url
    pool = await asyncpg.create_pool(settings.database_url, min_size=1, max_size=2)
    # Idle connections are dropped well before the server's keep-alive timeout (uvicorn: 5 s), or a
    # request races the server closing the connection under it.
    limits = httpx.Limits(max_connections=SENDERS, max_keepalive_connections=SENDERS, keepalive_expiry=1.0)
    try:
        async with processes(settings, log_dir) as spawn:
            api, worker = spawn("api"), spawn("worker")
            await asyncio.gather(api.wait_ready(), worker.wait_ready())
            base = f"http://127.0.0.1:{api.port}"
            async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
                auth = bearer((await _tenant(client, "steady"))["api_key"])
                await _job(client, "steady", auth)
                ids = await sustain(client, auth, report)
                await drain(pool, ids, report, timeout=max(60.0, seconds * 2))
                await flood(client, pool, auth, report)
    finally:
        await pool.close()
    return report


async def _main(args: argparse.Namespace, root: Path) -> LoadReport:
    from tests.support import clone_database, create_template, drop_database, make_settings, start_services

    services = start_services()
    try:
        template = await create_template(services)
        database = await clone_database(services, template)
        try:
            settings = make_settings(services, database)
            return await run(settings, root, args.rps, args.seconds, args.quota, args.timeout)
        finally:
            await drop_database(services, database)
            await drop_database(services, template)
    finally:
        services.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rps", type=float, default=300)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--quota", type=int, default=5000, help="SCHEDULER_TENANT_MAX_PENDING for the run")
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a request is an error")
    parser.add_argument("--keep", action="store_true", help="keep the process logs")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="scheduler-load-"))
    print(
        f"load: {args.rps:g} rps for {args.seconds:g}s, then a flood past a quota of {args.quota}", flush=True
    )
    report = asyncio.run(_main(args, root))
    print(report.render())
    failed = bool(report.violations())
    if failed or args.keep:
        print(f"process logs in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
