"""Fault harness: a victim tenant's webhook runs drain through two API processes (each with its
engine), a standalone engine and two workers, beside a hostile tenant, while the harness kills,
crashes and freezes the parts; then it checks the run state machine's promises (DESIGN.md §3) and
tenant isolation in SQL and at the webhook receiver (tests/faults/report.py says how).

    python -m tests.faults.harness --runs 2000 --duration 120     # long mode, by hand
    pytest tests/faults/test_faults.py                            # short mode, in CI

It owns its Postgres and NATS (embedded, in a temp dir), since it crashes them. The victim's runs
come due over three phases: `quiet` (alone), `hostile` (beside the hostile tenant: poison input,
NUL and huge answers, hanging endpoints that hit their timeouts) and `faults` (the same, under the
faults of tests/faults/inject.py). Through the hostile phase, slow and half-sent connections are
held at each API (hostile.hold_the_door): each must be cut at the API's head timeout while /healthz
keeps answering. The report gives the victim's due lag per phase. Beside them, a
third tenant's concurrency-limited job (tests/faults/limited.py) has a backlog held behind its
slots throughout the fault window, and the receiver counts its requests in flight per key.
Through the fault window the victim also submits small graphs of dependent runs (tests/faults/graphs.py),
checked by tests/faults/dependencies.py; its batches submitted ahead are groups (tests/faults/groups.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from app.bus.jetstream import close, connect
from tests.faults import dependencies, graphs, groups, hostile, limited, victim
from tests.faults.graphs import Graphs
from tests.faults.hostile import Hostile
from tests.faults.inject import SECONDS_PER_FAULT, Injector
from tests.faults.report import HOSTILE_BEHAVIOURS, Door, Outcome, Report, Run, check
from tests.faults.stack import Stack, embedded, stack_settings, stale_counters
from tests.faults.victim import Victim
from tests.processes import processes
from tests.receiver import Receiver, running_receiver

TRICKLE_SENDERS = 2  # clients submitting one run after another through the fault window


@dataclass(frozen=True)
class Config:
    runs: int = 400  # the victim's runs submitted ahead (the harness adds some around the kills)
    quiet: float = 8.0  # seconds the victim is alone
    calm: float = 12.0  # seconds beside the hostile tenant, before the faults
    duration: float = 36.0  # the fault window
    max_attempts: int = 25
    max_sleep: float = 0.8  # each victim run's payload holds the receiver's answer up to this long
    hostile: bool = True  # False: the victim alone throughout (a baseline, and a check of the harness)
    poison: bool = True  # False: the hostile tenant's endpoints only, no poison input (to tell bugs apart)
    answers: tuple[str, ...] = HOSTILE_BEHAVIOURS  # which hostile endpoints (to tell findings apart)
    hangers: int = 96  # hanging runs per hostile burst: more than the workers' slots (2 x 32)
    burst_every: float = 5.0
    # Seconds a victim run may wait past due, per phase (quiet, hostile, faults). Measured on a shared
    # 2-core box: alone p99 0.2 s; under the six faults alone max 3.2 s; beside hanging endpoints
    # (no fair share of worker slots) p99 4.6 s and, under faults, 25 s — which these must catch.
    lag_bounds: tuple[float, float, float] = (2.0, 2.0, 15.0)
    seed: int = 8
    drain_timeout: float = 90.0  # after the window, for the last runs to finish
    # Runs of the concurrency-limited job (0: none), due over the first part of the fault window:
    # faster than its slots (LIMIT x 3 keys, ~1 s a run) free up, so a backlog waits held under
    # every fault of the cycle.
    limited_runs: int = 180
    # Slow and half-sent connections held at each API through the hostile phase (0: none).
    slow_connections: int = 100


class Harness:
    def __init__(self, config: Config, stack: Stack, receiver: Receiver):
        self.config = config
        self.stack = stack
        self.receiver = receiver
        self.rng = random.Random(config.seed)
        self.door: Door | None = None

    async def _tenant(self, api: httpx.AsyncClient, tenant: str) -> dict[str, str]:
        r = await api.post(
            "/tenants",
            json={"id": tenant},
            headers={"Authorization": f"Bearer {self.stack.settings.admin_token}"},
        )
        assert r.status_code == 201, r.text
        return {"Authorization": f"Bearer {r.json()['api_key']}"}

    async def run(self) -> Report:
        c, s = self.config, self.stack
        for role, n in (("api", 2), ("engine", 1), ("worker", 2)):
            await asyncio.gather(*(s.spawn(role) for _ in range(n)))
        print(f"  stack ready after {time.monotonic() - s.started:.1f}s", flush=True)
        sampler = asyncio.create_task(s.sample_rss())
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{s.api_ports()[0]}", timeout=60) as api:
            good = Victim(await self._tenant(api, victim.TENANT), self.rng, c.max_sleep)
            r = await api.put(
                f"/tenants/{victim.TENANT}/jobs/{victim.JOB}",
                json=good.job(self.receiver.url, c.max_attempts),
                headers=good.auth,
            )
            assert r.status_code == 201, r.text
            r = await api.put(
                f"/tenants/{victim.TENANT}/jobs/{groups.COMPLETION_JOB}",
                json=groups.COMPLETION_JOB_BODY,
                headers=good.auth,
            )
            assert r.status_code == 201, r.text
            for name, body in graphs.jobs(self.receiver.url).items():
                r = await api.put(f"/tenants/{victim.TENANT}/jobs/{name}", json=body, headers=good.auth)
                assert r.status_code == 201, r.text
            dependent = Graphs(good, self.rng)
            bad = Hostile(s.request, await self._tenant(api, hostile.TENANT), s.fetch, self.rng)
            limited_auth: dict[str, str] = {}
            if c.limited_runs:
                limited_auth = await self._tenant(api, limited.TENANT)
                r = await api.put(
                    f"/tenants/{limited.TENANT}/jobs/{limited.JOB}",
                    json=limited.job(self.receiver.url, c.max_attempts),
                    headers=limited_auth,
                )
                assert r.status_code == 201, r.text
            await bad.setup(self.receiver.url)
            t0 = datetime.now(UTC) + timedelta(seconds=1)
            total = c.quiet + c.calm + c.duration
            phases = {
                "quiet": (0.0, c.quiet),
                "hostile": (c.quiet, c.quiet + c.calm),
                "faults": (c.quiet + c.calm, total),
            }
            for start, end in phases.values():
                await good.submit_spread(api, round(c.runs * (end - start) / total), 1 + start, 1 + end)
            if c.limited_runs:
                start = 1 + c.quiet + c.calm
                await limited.submit(
                    api, limited_auth, self.rng, c.limited_runs, start, start + 0.6 * c.duration
                )
            window_end = time.monotonic() + 1 + total
            await asyncio.sleep(1 + c.quiet)
            door: asyncio.Task[Door] | None = None
            if c.hostile:
                print(f"  t={time.monotonic() - s.started:6.1f}s the hostile tenant starts", flush=True)
                if c.slow_connections:
                    held = max(1.0, window_end - c.duration - time.monotonic() - 1)
                    door = asyncio.create_task(hostile.hold_the_door(s.api_ports(), c.slow_connections, held))
                if c.poison:
                    await bad.poison_the_api()
                    await bad.poison_the_database(due_in=1.0)
                    await bad.deep_answers()
                    await bad.retry_past_a_pause()
                left = window_end - time.monotonic()
                n = await bad.submit(0.5, left, max(1, round(left / c.burst_every)), c.hangers, c.answers)
                print(
                    f"  hostile: {n} runs; poison answers {[(a.name, a.status) for a in bad.answers]}",
                    flush=True,
                )
            if bad.deep_runs:
                await bad.read_deep_answers()
            await asyncio.sleep(max(0.0, window_end - c.duration - time.monotonic()))
            if door is not None:
                self.door = await door
            injector = Injector(s, good, c.duration, self.receiver, limited_auth if c.limited_runs else None)
            faults = asyncio.create_task(injector.inject(window_end))
            # Submissions go on through the fault window, one by one (each fault's first 2xx after it).
            trickle_stop = asyncio.Event()
            trickle = asyncio.create_task(good.senders(s.api_ports, trickle_stop, TRICKLE_SENDERS))
            graph_senders = asyncio.create_task(dependent.senders(s.api_ports, trickle_stop))
            faults.add_done_callback(lambda _: trickle_stop.set())  # the window's end, not the drain's
            pause_ends = asyncio.create_task(bad.end_the_pause(window_end))  # held through the faults
            drained = await self.drain(window_end, window_end + c.drain_timeout)
            await faults
            await trickle
            await graph_senders
            await pause_ends
            # The injector may finish after the window (a fault waits for work in flight): what its
            # last fault disturbed drains too (briefly, if the drain already timed out: long enough
            # for a killed deliverer's claims to lapse and be delivered by another worker).
            await self.drain(time.monotonic(), time.monotonic() + (c.drain_timeout if drained else 30))
        await asyncio.sleep(1.0)  # any late call reaches the receiver before it is read
        sampler.cancel()
        return check(await self.outcome(good, bad, dependent, t0, phases))

    async def drain(self, not_before: float, deadline: float) -> bool:
        """Waits until every run of both tenants is terminal (not before `not_before`) or `deadline`."""
        last = 0.0
        while time.monotonic() < deadline:
            rows = await self.stack.fetch(
                "SELECT tenant_id, status, count(*) AS n FROM job_runs GROUP BY 1, 2"
            )
            counts = {(r["tenant_id"], r["status"]): r["n"] for r in rows}
            if time.monotonic() - last > 5:
                print(f"  t={time.monotonic() - self.stack.started:6.1f}s {counts}", flush=True)
                last = time.monotonic()
            open_runs = any(
                status not in ("succeeded", "failed", "cancelled", "expired") for _, status in counts
            )
            owed = await self.stack.fetch(
                "SELECT count(*) AS n FROM run_callbacks WHERE status IN ('pending', 'delivering')"
            )
            unfired = await self.stack.fetch("SELECT count(*) AS n FROM run_groups WHERE fired_at IS NULL")
            if not open_runs and not owed[0]["n"] and not unfired[0]["n"] and time.monotonic() > not_before:
                return True
            await asyncio.sleep(0.25)
        return False

    async def outcome(
        self,
        good: Victim,
        bad: Hostile,
        dependent: Graphs,
        t0: datetime,
        phases: dict[str, tuple[float, float]],
    ) -> Outcome:
        s = self.stack
        rows = await s.fetch(
            "SELECT id::text AS id, tenant_id, status, attempt, max_attempts, epoch, scheduled_at,"
            " COALESCE(held_due_at, due_at) AS due_at, started_at,"
            # A run still waiting has waited now() - due_at so far (none, if not due yet); a started
            # one, started_at - due_at.
            " CASE WHEN status IN ('pending', 'dispatched') AND due_at > now() THEN NULL"
            " WHEN status IN ('pending', 'dispatched') THEN extract(epoch FROM now() - due_at)"
            " ELSE extract(epoch FROM started_at - due_at) END::float8 AS lag"
            # Completion runs and graphs' runs: the groups' and the dependencies' checks.
            " FROM job_runs WHERE tenant_id = ANY($1) AND job <> ALL($2::text[])",
            [victim.TENANT, hostile.TENANT, limited.TENANT],
            [groups.COMPLETION_JOB, *graphs.JOBS],
        )

        began = datetime.now(UTC) - timedelta(seconds=time.monotonic() - s.started)

        def since(at: datetime | None) -> float | None:  # on Fault.at's clock ('infinity': None)
            return None if at is None or at.year >= 9999 else (at - began).total_seconds()

        def phase(at: datetime) -> str:
            offset = (at - t0).total_seconds()
            return next((name for name, (_, end) in phases.items() if offset < end), "faults")

        runs = [
            Run(
                r["id"],
                r["tenant_id"],
                r["status"],
                r["attempt"],
                r["max_attempts"],
                r["epoch"],
                phase(r["scheduled_at"]),
                r["lag"],
                since(r["due_at"]),
                since(r["started_at"]),
            )
            for r in rows
        ]
        died = [
            f"{p.role} on :{p.port} exited {p.proc.returncode} ({p.log_path})"
            for p in s.every_process()
            if p.proc.poll() is not None
        ] + s.troubles
        # Each run's latest obligation (a run owes one per time it ends).
        callbacks = await s.fetch(
            "SELECT DISTINCT ON (run_id) run_id::text AS id, status FROM run_callbacks"
            " WHERE tenant_id = $1 ORDER BY run_id, id DESC",
            victim.TENANT,
        )
        stale = {}
        for owner, worker in s.roles["worker"].items():
            if worker.proc.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    for stage, value in stale_counters(await worker.metrics()).items():
                        stale[f"{owner} {stage}"] = value
        return Outcome(
            accepted=good.accepted,
            runs=runs,
            calls=list(self.receiver.calls),
            faults=s.faults,
            lag_bounds=dict(zip(phases, self.config.lag_bounds, strict=True)),
            poison_answers=bad.answers,
            poison_run=bad.poison_run,
            paused_runs=bad.paused_runs,
            answered=[(t - s.started, status) for t, status in good.answered],
            problems=bad.problems + good.problems,
            hostile_answers=self.config.answers if self.config.hostile else (),
            died=died,
            late_results_discarded=s.late_results_discarded,
            stale=stale,
            worker_rss_mib=s.rss_peak,
            elapsed=time.monotonic() - s.started,
            callbacks={r["id"]: r["status"] for r in callbacks},
            limit=limited.LIMIT if self.config.limited_runs else 0,
            door=self.door,
            groups=await groups.gather(s.fetch, victim.TENANT),
            groups_submitted=good.groups,
            graph_steps=await dependencies.gather(s.fetch, victim.TENANT),
            graph_accepted=dependent.accepted,
            deadlocks=s.postgres.deadlocks(),
        )


async def run(config: Config, root: Path) -> Report:
    """The whole harness in `root` (process logs stay in root/logs)."""
    started = time.monotonic()
    (root / "logs").mkdir(parents=True, exist_ok=True)
    async with embedded(root) as (postgres, nats, database_url, nats_url):
        settings = stack_settings(database_url, nats_url)
        pool = await asyncpg.create_pool(database_url, min_size=0, max_size=3)
        nc = await connect(nats_url, "fault-harness")
        try:
            async with running_receiver() as receiver, processes(settings, root / "logs") as spawn:
                stack = Stack(settings, spawn, postgres, nats, pool, nc, started)
                return await Harness(config, stack, receiver).run()
        finally:
            await close(nc)
            pool.terminate()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.harness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=Config.runs, help="victim runs submitted ahead")
    parser.add_argument("--duration", type=float, default=Config.duration, help="seconds of the fault window")
    parser.add_argument("--quiet", type=float, default=Config.quiet, help="seconds the victim is alone first")
    parser.add_argument(
        "--calm", type=float, default=Config.calm, help="seconds beside the hostile tenant, no faults"
    )
    parser.add_argument("--no-hostile", action="store_true", help="the victim alone, no hostile tenant")
    parser.add_argument("--no-poison", action="store_true", help="hostile endpoints only, no poison input")
    parser.add_argument(
        "--answers", default=",".join(HOSTILE_BEHAVIOURS), help="the hostile endpoints, of: hang,nul,huge"
    )
    parser.add_argument("--hangers", type=int, default=Config.hangers, help="hanging runs per hostile burst")
    parser.add_argument(
        "--lag-bounds",
        default=",".join(f"{b:g}" for b in Config.lag_bounds),
        help="quiet,hostile,faults seconds",
    )
    parser.add_argument(
        "--limited-runs", type=int, default=Config.limited_runs, help="runs of the limited job (0: none)"
    )
    parser.add_argument(
        "--slow-connections",
        type=int,
        default=Config.slow_connections,
        help="slow connections held at each API through the hostile phase (0: none)",
    )
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data) afterwards")
    args = parser.parse_args(argv)
    config = Config(
        runs=args.runs,
        duration=args.duration,
        quiet=args.quiet,
        calm=args.calm,
        hangers=args.hangers,
        hostile=not args.no_hostile,
        poison=not args.no_poison,
        answers=tuple(a for a in args.answers.split(",") if a),
        lag_bounds=tuple(float(b) for b in args.lag_bounds.split(",")),  # type: ignore[arg-type]
        seed=args.seed,
        limited_runs=args.limited_runs,
        slow_connections=args.slow_connections,
    )
    root = Path(tempfile.mkdtemp(prefix="scheduler-faults-"))
    print(
        f"fault harness: {args.runs} victim runs over {config.quiet:g}+{config.calm:g}+{config.duration:g}s "
        f"(~{config.duration / SECONDS_PER_FAULT:.0f} faults), logs in {root / 'logs'}",
        flush=True,
    )
    report = asyncio.run(run(config, root))
    print(report.render())
    failed = bool(report.violations())
    if failed or args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
