"""The faults, one cycle of seven. Each waits (bounded) until work is in flight where it strikes and
records how much it found, so a fault that hit an idle part is visible as one that did not land:

- kill -9 an API process while victim requests are in flight to it (its engine dies with it);
- kill -9 the standalone engine while it holds claims (`dispatched` under its lease owner);
- kill -9 a worker with runs `running` under its lease owner;
- kill -9 nats-server while the stream holds messages; its file store must come back with them;
- crash Postgres (`pg_ctl -m immediate`) with runs in flight; its log must show crash recovery;
- SIGSTOP a worker holding running runs for three leases, then SIGCONT: its runs were rescued
  under a newer epoch meanwhile, so its late results must be discarded;
- kill -9 a worker while it holds completion callbacks mid-delivery (`delivering` under its name):
  their claims lapse and another worker delivers them (at least once).

Killed processes are replaced, as an orchestrator would. The kills of a worker, of NATS and the
Postgres crash also wait (bounded) for runs of the concurrency-limited job holding a slot — first
submitting a burst of them due now when none is in flight, so the precondition is arranged, not
hoped for — and record how many they struck (`Fault.limited`); the worker's kill prefers a worker with limited attempts in
flight at the receiver, and waits to see the receiver count them off (their connection closed by the
kernel with the process) before the lease could free their slots. The kills of an engine and a
worker and the Postgres crash first wait (bounded) for runs of the victim's graphs with dependents
in flight (tests/faults/graphs.py: the graphs go on being submitted through the window), and record
how many there were as they struck (`Fault.parents`): parents finishing under the fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import asyncpg
import httpx
from nats.js.errors import NotFoundError

from tests.faults import graphs, limited
from tests.faults.stack import Stack, stale_counters

if TYPE_CHECKING:
    from tests.faults.victim import Victim
    from tests.processes import Process
    from tests.receiver import Call, Receiver

SECONDS_PER_FAULT = 6.0
WAIT_FOR_WORK = 15.0  # seconds a fault waits for work in flight before striking anyway
WAIT_FOR_PARENTS = 3.0  # seconds one waits for the graphs' parents in flight (submitted every second)
# The worker kill strikes requests of the limited job at most this old: each is held at least
# limited.SLEEP[0] (0.3 s), so one this young is still open when the kill follows the probe.
YOUNG_REQUEST_SECONDS = 0.1


async def _until(
    probe: Callable[[], Awaitable[int]], timeout: float = WAIT_FOR_WORK, every: float = 0.01
) -> int:
    """Polls `probe` until it finds work in flight (> 0) or the timeout passes; returns its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        found = await probe()
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(every)


class Injector:
    def __init__(
        self,
        stack: Stack,
        victim: Victim,
        duration: float,
        receiver: Receiver,
        limited_auth: dict[str, str] | None = None,
    ):
        self.s = stack
        self.victim = victim
        self.duration = duration
        self.receiver = receiver
        self.limited_auth = limited_auth  # None: the harness runs no limited job

    async def _parents_in_flight(self) -> int:
        return await graphs.parents_in_flight(self.s.fetch)

    async def _wait_for_parents(self) -> None:
        await _until(self._parents_in_flight, timeout=WAIT_FOR_PARENTS, every=0.02)

    async def _limited_in_flight(self) -> int:
        """Runs of the limited job holding a slot and claimed or started (none if it has no runs)."""
        rows = await self.s.fetch(
            "SELECT count(*) AS n FROM job_runs WHERE tenant_id = $1 AND status IN ('dispatched', 'running')",
            limited.TENANT,
        )
        return int(rows[0]["n"])

    async def _wait_for_limited(self) -> None:
        """Until the limited job has runs in flight (bounded; at once when the harness runs none). A
        fault that must strike them arranges it rather than hoping: when none is in flight, a burst
        of the limited job's runs is submitted due now, more than its slots, and waited for."""
        if self.limited_auth is None:
            return
        if not await self._limited_in_flight():
            await self._limited_burst(2 * limited.LIMIT * len(limited.KEYS))
        await _until(self._limited_in_flight, every=0.02)

    async def _limited_struck(self, also: Callable[[], Awaitable[int]]) -> tuple[int, int]:
        """The limited job's runs in flight, read last before a strike, and what `also` (the fault's
        other wait) found; both waited for again, a few times, while either finds none: on a busy
        host the runs found first may finish during the other wait."""
        struck = found = 0
        for _ in range(5):
            await self._wait_for_limited()
            found = await also()
            struck = await self._limited_in_flight()
            if (struck or self.limited_auth is None) and found:
                break
        return struck, found

    async def _limited_burst(self, n: int) -> None:
        auth = self.limited_auth
        assert auth is not None
        await self._through_an_api(lambda api: limited.submit(api, auth, random.Random(n), n, 0.0, 0.0))

    async def _through_an_api(self, submit: Callable[[httpx.AsyncClient], Awaitable[object]]) -> None:
        """`submit` through the newest live API; a request that fails is the harness's loss, not a
        finding (the runs it did make are checked like any other)."""
        if not self.s.api_ports():
            return
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.s.api_ports()[-1]}", timeout=30
        ) as api:
            with contextlib.suppress(httpx.HTTPError, AssertionError):
                await submit(api)

    async def inject(self, window_end: float) -> None:
        cycle = [
            self.kill_api,
            self.kill_engine,
            self.kill_worker,
            self.kill_nats,
            self.crash_postgres,
            self.freeze_worker,
            self.kill_worker_delivering,
        ]
        faults = cycle * max(1, round(self.duration / (SECONDS_PER_FAULT * len(cycle))))
        slot = (window_end - time.monotonic()) / (len(faults) + 1)
        for i, fault in enumerate(faults):
            await asyncio.sleep(max(0.0, window_end - slot * (len(faults) - i) - time.monotonic()))
            await fault()

    async def _held(self, status: str, owner: str) -> list[asyncpg.Record]:
        return await self.s.fetch(
            "SELECT id, epoch, tenant_id FROM job_runs WHERE status = $1 AND lease_owner = $2", status, owner
        )

    # ── processes ──

    async def _kill(self, owner: str, doomed: Process) -> bool:
        """kill -9; returns whether it was alive. One that had died on its own interrupted nothing (the
        fault did not land) and is a finding of its own."""
        if doomed.proc.poll() is not None:
            self.s.troubles.append(
                f"{owner} had exited {doomed.proc.returncode} before the harness killed it ({doomed.log_path})"
            )
            return False
        await asyncio.to_thread(doomed.kill)
        return True

    async def kill_api(self) -> None:
        owner, doomed = next(iter(self.s.roles["api"].items()))
        stop = asyncio.Event()
        # The doomed API is first in the list, so the senders' first tries go to it; a try cut by
        # the kill goes to the next live API with the same Idempotency-Key.
        senders = asyncio.create_task(self.victim.senders(self.s.api_ports, stop))
        in_flight = await _until(lambda: _now(self.victim.in_flight[doomed.port]))
        claims = len(await self._held("dispatched", owner))
        del self.s.roles["api"][owner]
        alive = await self._kill(owner, doomed)
        await asyncio.sleep(1.0)  # the cut requests are retried on the other API meanwhile
        stop.set()
        await senders
        self.s.note(
            "kill -9 api",
            f"{owner} on :{doomed.port} (pid {doomed.proc.pid}); {self.victim.cut[doomed.port]} requests cut, "
            f"retried elsewhere with their Idempotency-Key; its engine held {claims} claims",
            in_flight if alive else 0,
        )
        self.s.note("start api", f"{await self.s.spawn('api')} started")

    async def kill_engine(self) -> None:
        owner, doomed = next(iter(self.s.roles["engine"].items()))
        held: list[asyncpg.Record] = []
        parents = 0
        for _ in range(5):  # a burst of due runs, so that every engine claims some
            # Graph parents are waited for each time: a burst and its claims may take seconds on a
            # busy host, time enough for the parents found before it to finish.
            await self._wait_for_parents()
            await self._victim_burst(100)
            held = await _until_rows(lambda: self._held("dispatched", owner), timeout=3.0)
            parents = await self._parents_in_flight()
            if held and parents:
                break
        del self.s.roles["engine"][owner]
        alive = await self._kill(owner, doomed)
        self.s.note(
            "kill -9 engine",
            f"{owner} (pid {doomed.proc.pid}) holding {len(held)} claims not yet started",
            len(held) if alive else 0,
            held=tuple((str(r["id"]), int(r["epoch"])) for r in held),
            limited=sum(1 for r in held if r["tenant_id"] == limited.TENANT) if alive else 0,
            parents=parents if alive else 0,
        )
        self.s.note("start engine", f"{await self.s.spawn('engine')} started")

    async def _victim_burst(self, n: int) -> None:
        await self._through_an_api(lambda api: self.victim.submit_spread(api, n, 0.0, 0.0))

    async def busiest_worker(self) -> tuple[str, list[asyncpg.Record]]:
        """A live worker with runs running (waits for one), and those runs."""
        found: dict[str, list[asyncpg.Record]] = {}

        async def probe() -> int:
            found.clear()
            for row in await self.s.fetch(
                "SELECT id, epoch, lease_owner FROM job_runs WHERE status = 'running'"
            ):
                if row["lease_owner"] in self.s.roles["worker"]:
                    found.setdefault(row["lease_owner"], []).append(row)
            return len(found)

        await _until(probe, every=0.02)
        owner = max(self.s.roles["worker"], key=lambda o: len(found.get(o, [])))
        return owner, found.get(owner, [])

    async def kill_worker(self) -> None:
        """kill -9 of a worker with attempts of the limited job open at the receiver (if that job has
        runs; waits, bounded, for one): orphans the receiver counts as in flight until it sees their
        connection close."""
        open_at_kill: list[Call] = []
        owner = ""
        await self._wait_for_parents()
        # Counted before the probe below, which picks the moment of the kill for the limited job's
        # requests open at the receiver (short: one more read would let them end first).
        parents = await self._parents_in_flight()
        # The limited job's backlog may have drained by now (the faults before this one wait for
        # their own preconditions): a burst of its runs is arranged then, as for NATS and Postgres.
        await self._wait_for_limited()
        if await self._limited_in_flight() or await self._limited_pending():

            async def probe() -> int:
                nonlocal owner
                # Only requests that arrived within YOUNG_REQUEST_SECONDS (each sleeps at least
                # limited.SLEEP[0]), and only those still open after the read below, which a busy
                # host may stretch: the kill follows the probe at once.
                young = time.monotonic() - YOUNG_REQUEST_SECONDS
                calls = [
                    c
                    for c in self.receiver.calls
                    if c.key is not None and c.ended is None and c.started > young
                ]
                if not calls:
                    return 0
                by_run = {c.headers.get("scheduler-run-id", ""): c for c in calls}
                rows = await self.s.fetch(
                    "SELECT id::text AS id, lease_owner FROM job_runs WHERE id = ANY($1::uuid[])"
                    " AND status = 'running'",
                    list(by_run),
                )
                workers = self.s.roles["worker"]
                rows = [r for r in rows if r["lease_owner"] in workers and by_run[r["id"]].ended is None]
                owners = Counter(r["lease_owner"] for r in rows)
                if not owners:
                    return 0
                owner = owners.most_common(1)[0][0]
                open_at_kill[:] = [by_run[r["id"]] for r in rows if r["lease_owner"] == owner]
                return len(open_at_kill)

            await _until(probe, every=0.01)
        if not owner:
            owner, _running = await self.busiest_worker()
            open_at_kill.clear()
        doomed = self.s.roles["worker"].pop(owner)
        # Only those still open now count as struck (one may have been answered since the probe).
        open_at_kill = [c for c in open_at_kill if c.ended is None]
        killed_at = time.monotonic()
        alive = await self._kill(owner, doomed)
        # Read after the kill, which must follow the probe at once: the dead worker's runs stay
        # `running` until the reaper takes them back, a lease after their last heartbeat.
        running = await self._held("running", owner)
        # The kernel closes a killed process's sockets: the receiver's handler sees the disconnect
        # (it polls for it while holding the request) and counts the request off, long before the
        # reaper can free its slot (lease_seconds after the last heartbeat) for another attempt. So
        # an orphan the receiver still counts is not excused by the check: it must be gone by then.
        lease = self.s.settings.lease_seconds
        while any(c.ended is None for c in open_at_kill) and time.monotonic() < killed_at + 2 * lease:
            await asyncio.sleep(0.01)
        slowest = max((c.ended - killed_at if c.ended else math.inf for c in open_at_kill), default=0.0)
        mine = sum(1 for r in running if r["tenant_id"] == limited.TENANT)
        # `abandoned`: the receiver saw the connection close before its answer (the kill), not the
        # request's sleep ending by chance at the same moment.
        cut = sum(1 for c in open_at_kill if c.abandoned)
        orphaned = (
            f", {mine} of the limited job, {len(open_at_kill)} of whose requests were open at the receiver; "
            f"it saw {cut} of them hang up and counted all off {max(0.0, slowest):.2f}s after the kill at the latest"
            if mine
            else ""
        )
        self.s.note(
            "kill -9 worker",
            f"{owner} (pid {doomed.proc.pid}) with {len(running)} runs running{orphaned}",
            len(running) if alive else 0,
            ""
            if slowest < lease
            else f"an orphaned request stayed counted {slowest:.2f}s (lease {lease:g}s)",
            limited=len(open_at_kill) if alive else 0,
            parents=parents if alive else 0,
        )
        self.s.note("start worker", f"{await self.s.spawn('worker')} started")

    async def _limited_pending(self) -> bool:
        rows = await self.s.fetch(
            "SELECT count(*) AS n FROM job_runs WHERE tenant_id = $1 AND status = 'pending'", limited.TENANT
        )
        return bool(rows[0]["n"])

    async def kill_worker_delivering(self) -> None:
        found: dict[str, int] = {}

        async def probe() -> int:
            found.clear()
            for row in await self.s.fetch(
                "SELECT lease_owner, count(*) AS n FROM run_callbacks WHERE status = 'delivering'"
                " AND due_at > now() GROUP BY lease_owner"
            ):
                if row["lease_owner"] in self.s.roles["worker"]:
                    found[row["lease_owner"]] = int(row["n"])
            return sum(found.values())

        await _until(probe, every=0.01)
        owner = max(self.s.roles["worker"], key=lambda o: found.get(o, 0))
        doomed = self.s.roles["worker"].pop(owner)
        alive = await self._kill(owner, doomed)
        self.s.note(
            "kill -9 worker delivering callbacks",
            f"{owner} (pid {doomed.proc.pid}) with {found.get(owner, 0)} callbacks mid-delivery",
            found.get(owner, 0) if alive else 0,
        )
        self.s.note("start worker", f"{await self.s.spawn('worker')} started")

    async def freeze_worker(self) -> None:
        pause = 3 * self.s.settings.lease_seconds
        held: list[asyncpg.Record] = []
        for _ in range(5):
            owner, _running = await self.busiest_worker()
            frozen = self.s.roles["worker"][owner]
            before = stale_counters(await frozen.metrics())
            frozen.signal(signal.SIGSTOP)
            await asyncio.sleep(0.3)  # an outcome already on its way to Postgres lands first
            # What the frozen worker still holds, read from the database: its late results are these.
            held = await self._held("running", owner)
            if held:
                break
            frozen.signal(signal.SIGCONT)  # its requests all finished just before the stop: again
        self.s.note("SIGSTOP worker", f"{owner} holding {len(held)} running runs, for {pause:g}s", len(held))
        await asyncio.sleep(pause)
        epochs = await self.s.fetch(
            "SELECT id, epoch FROM job_runs WHERE id = ANY($1::uuid[])", [r["id"] for r in held]
        )
        now = {r["id"]: r["epoch"] for r in epochs}
        rescued = sum(1 for r in held if now.get(r["id"], 0) > r["epoch"])
        frozen.signal(signal.SIGCONT)
        deadline = time.monotonic() + 15
        while (
            stale_counters(await frozen.metrics())["finish"] <= before["finish"]
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # the rest of its late results
        discarded = stale_counters(await frozen.metrics())["finish"] - before["finish"]
        self.s.late_results_discarded += discarded
        self.s.note(
            "SIGCONT worker",
            f"{owner}: {rescued} of its runs were rescued under a newer epoch meanwhile; "
            f"its late results discarded: {discarded:g}",
        )

    # ── servers ──

    async def _stream(self) -> tuple[int, int] | None:
        """(messages, last sequence) of the runs stream; None when it does not exist."""
        try:
            info = await self.s.nc.jetstream().stream_info(self.s.settings.stream)
        except NotFoundError:
            return None
        return info.state.messages, info.state.last_seq

    async def kill_nats(self) -> None:
        state: tuple[int, int] | None = None

        async def probe() -> int:
            nonlocal state
            with contextlib.suppress(Exception):
                state = await self._stream()
            return state[0] if state else 0

        struck, messages = await self._limited_struck(lambda: _until(probe, every=0.05))
        last_seq = state[1] if state else 0
        await asyncio.to_thread(self.s.nats.crash_restart)
        after: tuple[int, int] | None = None
        problem = ""
        for _ in range(100):  # the harness's own connection reconnects first
            try:
                after = await self._stream()
                break
            except Exception:
                await asyncio.sleep(0.2)
        if after is None:
            problem = "the stream is gone after the restart (its store did not survive)"
        elif after[1] < last_seq:
            problem = (
                f"the stream's last sequence went back from {last_seq} to {after[1]} (its store was lost)"
            )
        self.s.note(
            "kill -9 nats",
            f"{messages} messages in the stream (last seq {last_seq}); after the restart: "
            f"{after and f'{after[0]} messages, last seq {after[1]}'}",
            messages,
            problem,
            limited=struck,
        )

    async def crash_postgres(self) -> None:
        async def probe() -> int:
            rows = await self.s.fetch(
                "SELECT count(*) AS n FROM job_runs WHERE status IN ('dispatched', 'running')"
            )
            return int(rows[0]["n"])

        in_flight = await _until(probe, every=0.05)
        struck, parents = await self._limited_struck(
            lambda: _until(self._parents_in_flight, timeout=WAIT_FOR_PARENTS, every=0.02)
        )
        started = time.monotonic()
        recovered = await asyncio.to_thread(self.s.postgres.crash_restart)
        self.s.note(
            "crash postgres",
            f"pg_ctl -m immediate with {in_flight} runs dispatched or running; back after "
            f"{time.monotonic() - started:.1f}s, crash recovery {'ran' if recovered else 'NOT seen in the log'}",
            in_flight,
            "" if recovered else "no crash recovery in the server log",
            limited=struck,
            parents=parents,
        )


async def _now(value: int) -> int:
    return value


async def _until_rows(
    probe: Callable[[], Awaitable[list[asyncpg.Record]]], timeout: float
) -> list[asyncpg.Record]:
    found: list[asyncpg.Record] = []

    async def count() -> int:
        nonlocal found
        found = await probe()
        return len(found)

    await _until(count, timeout=timeout, every=0.005)
    return found
