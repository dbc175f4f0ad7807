"""The hostile tenant: poison input at the API (each request must be a 4xx with nothing written, or
a 201 when it is valid however large), one poison run put in the database behind the API's back
(the engines must contain it), and runs whose endpoints answer 500 with NUL bytes, stream huge
bodies, or hang until their short timeout — many at once, to fill the workers' slots."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx

from tests.faults.report import Door, PoisonAnswer

TENANT = "hostile"
DEPTH = 254  # one level deeper than orjson allows once the engine wraps the payload in its message
HANG_TIMEOUT = 2  # the hanging job's timeout_seconds: short, so it is hit for real many times
HUGE_BYTES = 8 * 1024 * 1024  # one huge answer; several run at once
PAUSED_JOB = "paused"
PAUSED_RUNS = 40
RETRIES_OF_503 = 20  # a valid request answered 503 (the database away) is sent again, 0.5 s apart

Fetch = Callable[..., Awaitable[list[asyncpg.Record]]]
Request = Callable[..., Awaitable[httpx.Response]]  # Stack.request: to whichever API is alive


def nested(depth: int) -> bytes:
    """A JSON object `depth` levels deep."""
    return b'{"a":' * depth + b"1" + b"}" * depth


def run_body(payload: bytes, job: str = "plain") -> bytes:
    return b'{"job": "' + job.encode() + b'", "payload": ' + payload + b"}"


def jobs(receiver_url: str) -> dict[str, dict[str, Any]]:
    hook = {"type": "http", "url": receiver_url}
    return {
        "plain": {"target": hook, "max_attempts": 2, "backoff_seconds": 0.2, "timeout_seconds": 5},
        "hang": {"target": hook, "max_attempts": 2, "backoff_seconds": 0.2, "timeout_seconds": HANG_TIMEOUT},
        "nul": {"target": hook, "max_attempts": 2, "backoff_seconds": 0.2, "timeout_seconds": 5},
        "huge": {"target": hook, "max_attempts": 2, "backoff_seconds": 0.2, "timeout_seconds": 10},
        # Paused, then its cancelled runs retried (retry_past_a_pause): none may reach the receiver.
        PAUSED_JOB: {"target": hook, "max_attempts": 2, "backoff_seconds": 0.2, "timeout_seconds": 5},
    }


class Hostile:
    def __init__(self, request: Request, auth: dict[str, str], fetch: Fetch, rng: random.Random):
        self.request = request
        self.auth = auth
        self.fetch = fetch
        self.rng = rng
        self.answers: list[PoisonAnswer] = []
        self.poison_run: str | None = None
        self.problems: list[str] = []  # the hostile tenant's own submissions that failed (API gone)
        self.deep_runs: dict[str, str] = {}  # run id -> what its endpoint answers (deep_answers)
        self.paused_runs: list[str] = []  # runs of the paused job retried under its pause

    async def setup(self, receiver_url: str) -> None:
        for name, job in jobs(receiver_url).items():
            r = await self.request("PUT", f"/tenants/{TENANT}/jobs/{name}", json=job, headers=self.auth)
            assert r.status_code == 201, r.text

    async def _rows(self) -> int:
        rows = await self.fetch(
            "SELECT (SELECT count(*) FROM job_runs WHERE tenant_id = $1)"
            " + (SELECT count(*) FROM jobs WHERE tenant_id = $1)"
            " + (SELECT count(*) FROM idempotency_keys WHERE tenant_id = $1) AS n",
            TENANT,
        )
        return int(rows[0]["n"])

    async def _try(self, name: str, method: str, path: str, body: bytes, refuse: bool = True) -> None:
        before = await self._rows()
        headers = {**self.auth, "Content-Type": "application/json"}
        try:
            status = (
                await self.request(method, path, content=body, headers=headers, retry=False)
            ).status_code
        except httpx.TransportError:
            status = 0  # the connection dropped: no answer at all
        self.answers.append(PoisonAnswer(name, status, await self._rows() - before, refuse))

    async def poison_the_api(self) -> None:
        """Invalid input, one request each: every one must be refused with a 4xx, nothing written."""
        runs, batch = f"/tenants/{TENANT}/runs", f"/tenants/{TENANT}/runs/batch"
        deep = nested(DEPTH)
        await self._try(
            "job PUT 254 deep",
            "PUT",
            f"/tenants/{TENANT}/jobs/deep",
            b'{"target": {"type": "noop"}, "payload": ' + deep + b"}",
        )
        await self._try("run POST 254 deep", "POST", runs, run_body(deep))
        await self._try(
            "batch 253 deep",
            "POST",
            batch,
            b'{"runs": [{"job": "plain"}, ' + run_body(nested(DEPTH - 1)) + b"]}",
        )
        for name, literal in (("NaN", b"NaN"), ("Infinity", b"Infinity"), ("1e400", b"1e400")):
            await self._try(f"payload {name}", "POST", runs, run_body(b'{"x": ' + literal + b"}"))
        await self._try("NUL in a payload string", "POST", runs, run_body(b'{"x": "a\\u0000b"}'))
        await self._try("NUL in a job name", "POST", runs, b'{"job": "pl\\u0000ain"}')
        # Valid however large: just under the payload limit; it must be accepted (and then run).
        big = b'{"pad": "' + b"x" * 60_000 + b'"}'
        await self._try("payload of 60 kB", "POST", runs, run_body(big), refuse=False)

    async def poison_the_database(self, due_in: float) -> None:
        """A run written by the API with a tiny payload, then given one 254 deep in SQL — as if it had
        been written before any validation existed. The engines must fail it alone, and live."""
        at = (datetime.now(UTC) + timedelta(seconds=due_in)).isoformat()
        try:
            r = await self.request(
                "POST",
                f"/tenants/{TENANT}/runs",
                json={"job": "plain", "scheduled_at": at},
                headers=self.auth,
            )
        except httpx.TransportError as exc:
            self.problems.append(f"the hostile tenant could not submit its run to poison: {exc!r}")
            return
        if r.status_code != 201:
            self.problems.append(f"the hostile tenant's run to poison was refused: {r.status_code}")
            return
        self.poison_run = r.json()["id"]
        await self.fetch(
            "UPDATE job_runs SET payload = $1::jsonb WHERE id = $2::uuid AND status = 'pending' RETURNING id",
            nested(DEPTH).decode(),
            self.poison_run,
        )

    async def deep_answers(self) -> None:
        """Runs whose endpoint answers JSON 253 and 254 levels deep (what orjson can still write
        inside the run, and one past it), succeeding and failing: stored as the run's result or its
        error, they must not turn reading the run, or listing the tenant's runs, into a 500."""
        for depth, status in ((DEPTH - 1, 200), (DEPTH, 200), (DEPTH, 500)):
            answer = {"status": status, "body": nested(depth).decode(), "content_type": "application/json"}
            try:
                r = await self.request(
                    "POST",
                    f"/tenants/{TENANT}/runs",
                    json={"job": "plain", "payload": {"answer": answer}},
                    headers=self.auth,
                )
            except httpx.TransportError as exc:
                self.problems.append(f"the hostile tenant could not submit a deep-answer run: {exc!r}")
                continue
            if r.status_code != 201:
                self.problems.append(f"the hostile tenant's deep-answer run was refused: {r.status_code}")
                continue
            self.deep_runs[r.json()["id"]] = f"{depth} deep, {status}"

    async def _answer(self, name: str, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """A valid request of the hostile tenant's, its status kept as an answer that must be a 2xx. A
        503 (the database away a moment: a crash the harness caused) is sent again, as a client does."""
        try:
            for _ in range(RETRIES_OF_503):
                r = await self.request(method, path, headers=self.auth, **kwargs)
                if r.status_code != 503:
                    break
                await asyncio.sleep(0.5)
        except httpx.TransportError as exc:
            self.problems.append(f"the hostile tenant's {name} found no API: {exc!r}")
            return None
        self.answers.append(PoisonAnswer(name, r.status_code, 0, refuse=False))
        return r if r.status_code < 300 else None

    async def retry_past_a_pause(self) -> None:
        """Runs of a job made, cancelled, the job paused, then the runs retried — half one by one,
        half in bulk — which makes them due at once: the pause must hold every one of them, so the
        receiver never sees them (checked in report.py, `pause_holds`). A retry once made them due and
        unheld, and the engine, woken by its NOTIFY, claimed them before the keeper held them."""
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        made = await self._answer(
            "submit the runs to pause",
            "POST",
            f"/tenants/{TENANT}/runs/batch",
            json={"runs": [{"job": PAUSED_JOB, "scheduled_at": later}] * PAUSED_RUNS},
        )
        if made is None:
            return
        ids = [run["id"] for run in made.json()["runs"]]
        actions = f"/tenants/{TENANT}/runs/actions"
        await self._answer("cancel them", "POST", actions, json={"action": "cancel", "filter": {"ids": ids}})
        await self._answer("pause their job", "POST", f"/tenants/{TENANT}/jobs/{PAUSED_JOB}/pause")
        half = PAUSED_RUNS // 2
        for run in ids[:half]:
            await self._answer("retry one under the pause", "POST", f"/runs/{run}/retry")
        await self._answer(
            "retry the rest in bulk", "POST", actions, json={"action": "retry", "filter": {"ids": ids[half:]}}
        )
        self.paused_runs = ids

    async def end_the_pause(self, at: float) -> None:
        """At `at` (time.monotonic()), the held runs are cancelled, so every run ends."""
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        if self.paused_runs:
            await self._answer(
                "cancel the held runs",
                "POST",
                f"/tenants/{TENANT}/runs/actions",
                json={"action": "cancel", "filter": {"ids": self.paused_runs}},
            )

    async def read_deep_answers(self, timeout: float = 15.0) -> None:
        """Once the deep-answer runs have ended (or `timeout`), each is read through the API, and the
        tenant's runs are listed: every answer must be a 200."""
        deadline = time.monotonic() + timeout
        while self.deep_runs and time.monotonic() < deadline:
            rows = await self.fetch(
                "SELECT count(*) AS n FROM job_runs WHERE id = ANY($1::uuid[])"
                " AND status NOT IN ('succeeded', 'failed', 'cancelled')",
                list(self.deep_runs),
            )
            if not rows[0]["n"]:
                break
            await asyncio.sleep(0.5)
        reads = [(f"GET a run answered {name}", f"/runs/{run}") for run, name in self.deep_runs.items()]
        if self.deep_runs:
            reads.append(("list runs answered 254 deep", f"/tenants/{TENANT}/runs?limit=200"))
        for name, path in reads:
            try:
                status = (await self.request("GET", path, headers=self.auth, retry=False)).status_code
            except httpx.TransportError:
                status = 0
            self.answers.append(PoisonAnswer(name, status, 0, refuse=False))

    async def submit(
        self, start: float, window: float, bursts: int, hangers: int, answers: tuple[str, ...]
    ) -> int:
        """Hostile work due over [now+start, now+start+window]: `bursts` waves, each of `hangers`
        hanging runs due at one instant (more than the workers' slots), beside NUL and huge answers."""
        now = datetime.now(UTC)
        runs: list[dict[str, Any]] = []
        for i in range(bursts):
            at = (now + timedelta(seconds=start + window * i / max(1, bursts))).isoformat()
            if "hang" in answers:
                runs += [{"job": "hang", "scheduled_at": at, "payload": {"hang": 60}}] * hangers
            if "nul" in answers:
                runs += [{"job": "nul", "scheduled_at": at, "payload": {"nul": True}}] * 4
            if "huge" in answers:
                runs += [
                    {"job": "huge", "scheduled_at": at, "payload": {"huge": HUGE_BYTES, "status": 500}}
                ] * 2
                runs += [{"job": "huge", "scheduled_at": at, "payload": {"huge": HUGE_BYTES, "status": 200}}]
        accepted = 0
        for i in range(0, len(runs), 500):
            try:
                r = await self.request(
                    "POST",
                    f"/tenants/{TENANT}/runs/batch",
                    json={"runs": runs[i : i + 500]},
                    headers=self.auth,
                )
            except httpx.TransportError as exc:
                self.problems.append(f"no API took the hostile tenant's batch: {exc!r}")
                continue
            if r.status_code == 201:
                accepted += len(r.json()["runs"])
            else:
                self.problems.append(f"the hostile tenant's batch answered {r.status_code}")
        return accepted


# ── the front door (issue 29 item 4): slow and half-sent requests beside everyone else ──

HEAD_TIMEOUT = 2.0  # the harness's APIs' SCHEDULER_HTTP_HEAD_TIMEOUT_SECONDS (tests/faults/stack.py)
SLOW_HEAD = b"POST /tenants/victim/runs HTTP/1.1\r\nHost: x\r\nContent-Type: applic"


async def _slow_connection(port: int, source: str, drip: bool, until: float, door: Door) -> None:
    """One slow client, reconnecting whenever the server closes it, until `until`: a head sent a
    byte a second (`drip`) or nothing at all after connecting."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        except OSError:
            door.refused += 1  # the API is gone or refuses: the probes say whether it still serves
            await asyncio.sleep(0.5)
            continue
        door.opened += 1
        opened = time.monotonic()
        try:
            writer.write(SLOW_HEAD[:10] if drip else b"")
            while time.monotonic() < until:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        if not await reader.read(65536):
                            door.cut += 1
                            break
                        continue  # an answer (408): the close follows
                if drip:
                    writer.write(b"x")
        except ConnectionError:
            door.cut += 1
        finally:
            door.longest = max(door.longest, time.monotonic() - opened)
            writer.close()


async def _probe(port: int, until: float, door: Door) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                ok = (await api.get("/healthz")).status_code == 200
            except httpx.TransportError:
                ok = False
            door.probes += 1
            door.probe_failures += not ok
            door.slowest_probe = max(door.slowest_probe, time.monotonic() - started)
            await asyncio.sleep(0.5)


async def hold_the_door(ports: list[int], per_port: int, seconds: float) -> Door:
    """`per_port` slow connections to each API from other loopback addresses (127.0.0.2-11), half
    dripping a request head, half sending nothing, for `seconds`, while /healthz is probed. Each API
    must cut them at its head timeout and keep answering."""
    door = Door(HEAD_TIMEOUT)
    until = time.monotonic() + seconds
    await asyncio.gather(
        *(
            _slow_connection(port, f"127.0.0.{2 + i % 10}", i % 2 == 0, until, door)
            for port in ports
            for i in range(per_port)
        ),
        *(_probe(port, until, door) for port in ports),
    )
    return door
