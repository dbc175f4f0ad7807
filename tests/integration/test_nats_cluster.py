"""Lose any one NATS server, lose nothing: a three-server cluster on loopback (stack/nats_cluster.py)
holding the lanes at three replicas, its stream leader killed, frozen (SIGSTOP) and cut off from the
other two under load; and, on one server, the stream losing messages outright (JetStream
acknowledges before it syncs to disk), which Postgres, the truth, makes good through the reaper."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import asyncpg
import nats
import pytest_asyncio
from nats.errors import NoRespondersError

from app.bus.jetstream import close, connect, ensure_consumer, lanes
from app.bus.pull import PullConsumer
from app.config import Settings
from app.engine.engine import Engine
from app.worker.consumer import Worker
from stack.eventually import eventually
from stack.nats_cluster import NatsCluster, running_cluster
from tests import factories
from tests.processes import Process, processes
from tests.receiver import Receiver, running_receiver
from tests.support import Services, make_settings


@pytest_asyncio.fixture(loop_scope="session")
async def cluster() -> AsyncIterator[NatsCluster]:
    async with running_cluster() as c:
        yield c


@pytest_asyncio.fixture(loop_scope="session")
async def partitionable_cluster() -> AsyncIterator[NatsCluster]:
    async with running_cluster(partitionable=True) as c:
        yield c


def on_cluster(services: Services, database: str, cluster: NatsCluster, **overrides: object) -> Settings:
    """A test's settings, NATS_URL naming the cluster's three servers."""
    return make_settings(services, database).model_copy(update={"nats_url": cluster.url, **overrides})


async def webhook_runs(
    pool: asyncpg.Pool, receiver: Receiver, n: int, step: timedelta
) -> list[asyncpg.Record]:
    """`n` runs of a webhook job to the receiver, one due every `step` from a second ago; each call
    takes 0.2 s, so that runs are in flight whenever a fault strikes."""
    target = {"type": "http", "url": receiver.url}
    async with pool.acquire() as conn:
        await factories.job(conn, target=target)
        now = await conn.fetchval("SELECT now()")
        runs = await factories.runs(conn, n, start=now - timedelta(seconds=1), step=step, target=target)
        await conn.execute("""UPDATE job_runs SET payload = '{"sleep": 0.2}'""")
    return runs


async def statuses(pool: asyncpg.Pool) -> Counter[str]:
    rows = await pool.fetch("SELECT status, count(*) AS n FROM job_runs GROUP BY 1")
    return Counter({r["status"]: r["n"] for r in rows})


def starts(receiver: Receiver) -> Counter[tuple[str, str]]:
    """Calls the receiver got, by (run, epoch)."""
    return Counter(
        (c.headers["scheduler-run-id"], c.headers["scheduler-epoch"])
        for c in receiver.calls
        if not c.is_callback
    )


async def test_the_lanes_come_up_with_three_replicas_and_an_existing_stream_is_raised(
    services: Services, database: str, cluster: NatsCluster
) -> None:
    one = on_cluster(services, database, cluster)
    assert len(one.nats_servers) == 3
    three = one.model_copy(update={"stream_replicas": 3})
    nc = await connect(cluster.url, "replicas-test")  # NATS_URL as a list of three servers
    js = nc.jetstream()

    async def replicas() -> list[tuple[int | None, int | None]]:
        return [
            (
                (await js.stream_info(lane.stream)).config.num_replicas,
                (await js.consumer_info(lane.stream, lane.consumer)).config.num_replicas,
            )
            for lane in lanes(one)
        ]

    try:
        await ensure_consumer(js, one)
        assert await replicas() == [(1, 1), (1, 1)]
        await js.publish(one.subject_for("acme", 5), b"kept")
        await ensure_consumer(js, three)  # a start against the R1 lanes raises them
        assert await replicas() == [(3, 3), (3, 3)]
        info = await js.stream_info(one.stream)
        assert info.state.messages == 1 and info.cluster is not None and len(info.cluster.replicas) == 2
        await ensure_consumer(js, one)  # one still configured for fewer never lowers them
        assert await replicas() == [(3, 3), (3, 3)]
    finally:
        await close(nc)


async def test_the_stream_leader_killed_under_load_loses_nothing(
    services: Services, database: str, cluster: NatsCluster, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """kill -9 of the server leading the stream while runs are in flight: publishes during the
    election are sent again, fetches resume, every run succeeds, no (run, epoch) starts twice, and
    neither the engine nor the worker exits."""
    s = on_cluster(services, database, cluster, stream_replicas=3, urgent_priority=-1)
    n = 400
    async with running_receiver() as receiver, processes(s, tmp_path) as spawn:
        engine, worker = spawn("engine"), spawn("worker")
        await asyncio.gather(engine.wait_ready(), worker.wait_ready())
        # Due over the next ten seconds: claims and publishes go on through the election.
        runs = await webhook_runs(pool, receiver, n, timedelta(milliseconds=25))
        nc = await nats.connect(servers=s.nats_servers)
        try:
            await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] >= 40, timeout=30, what="a first drain"
            )
            leader = (await nc.jetstream().stream_info(s.stream)).cluster.leader
            cluster.kill(leader)
            at_kill = await statuses(pool)
            # Runs were dispatched and not all done when the leader went.
            assert at_kill["succeeded"] < n and at_kill["dispatched"] + at_kill["running"] > 0, at_kill
            done = await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] == n, timeout=45, what="every run"
            )
            new_leader = (await nc.jetstream().stream_info(s.stream)).cluster.leader
        finally:
            await nc.close()
        assert done == Counter({"succeeded": n})
        assert new_leader not in (None, leader)
        assert engine.alive() and worker.alive(), (engine.output(), worker.output())
        ids = {str(r["id"]) for r in runs}
        calls = starts(receiver)
        assert {run for run, _ in calls} == ids
        assert max(calls.values()) == 1, [k for k, v in calls.items() if v > 1]
        # Every claim started an attempt (epoch = attempt): what JetStream did not ack during the
        # election was sent again, not released and claimed again (as it was: epochs up to 8 for one
        # attempt, each claim answered "no responders" at once).
        claims = await pool.fetch("SELECT attempt, epoch, count(*) AS n FROM job_runs GROUP BY 1, 2")
        logs = f"engine:\n{engine.output()}\nworker:\n{worker.output()}"
        assert all(r["epoch"] == r["attempt"] for r in claims), ([tuple(r) for r in claims], logs)


async def test_messages_the_stream_loses_are_claimed_again(settings: Settings, pool: asyncpg.Pool) -> None:
    """The stream purged mid-drain (what a server that acknowledged before it synced may lose): the
    runs whose messages went are re-claimed once their dispatch lease lapses; every run succeeds,
    none twice in one epoch."""
    s = settings.model_copy(
        update={
            "dispatch_lease_seconds": 2.0,
            "publish_timeout_seconds": 1.0,
            "reap_interval_seconds": 0.3,
            # A worker holds at most a fetch batch beyond its slots: the rest waits in the stream.
            "worker_concurrency": 32,
            "worker_fetch_batch": 32,
            "message_runs": 1,
            "urgent_priority": -1,
        }
    )
    n = 200
    nc = await nats.connect(servers=s.nats_servers)
    js = nc.jetstream()
    stop = asyncio.Event()
    async with running_receiver() as receiver:
        async with pool.acquire() as conn:
            target = {"type": "http", "url": receiver.url}
            await factories.job(conn, target=target)
            await factories.runs(conn, n, target=target)
            await conn.execute("""UPDATE job_runs SET payload = '{"sleep": 0.05}'""")
        tasks = [
            asyncio.create_task(Engine(s, pool, nc).run(stop)),
            asyncio.create_task(Worker(s, pool, nc).run(stop)),
        ]
        try:

            async def waiting() -> int:
                """Messages no worker has received yet."""
                return int((await js.consumer_info(s.stream, s.consumer)).num_pending)

            await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] >= 32, timeout=30, what="a first drain"
            )
            await eventually(waiting, timeout=10, interval=0.01, what="messages waiting in the stream")
            assert await js.purge_stream(s.stream)
            at_purge = await statuses(pool)
            assert at_purge["succeeded"] < n, at_purge
            await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] == n, timeout=45, what="every run"
            )
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            await nc.close()
        calls = starts(receiver)
    assert max(calls.values()) == 1, [k for k, v in calls.items() if v > 1]
    assert len({run for run, _ in calls}) == n
    epochs = await pool.fetch("SELECT epoch, count(*) AS n FROM job_runs GROUP BY 1 ORDER BY 1")
    again = sum(r["n"] for r in epochs if r["epoch"] > 1)
    # The runs whose messages were purged before any worker had them were claimed again.
    assert again > 0, epochs


async def test_a_pull_during_the_consumers_election_raises_at_once_then_resumes(
    services: Services, database: str, cluster: NatsCluster
) -> None:
    """While the workers' consumer elects a leader, JetStream answers every pull request 503 at once
    (seconds): the fetch raises NoRespondersError, for the worker to wait before it asks again (it
    asked again as fast as the 503s came back, for the whole election), and once a leader is elected
    fetches bring messages again on the same connection."""
    s = on_cluster(services, database, cluster, stream_replicas=3, urgent_priority=-1)
    nc = await connect(cluster.url, "provisioning")
    try:
        await ensure_consumer(nc.jetstream(), s)
        leader = (await nc.jetstream().consumer_info(s.stream, s.consumer)).cluster.leader
    finally:
        await close(nc)
    # Connected to the other two, so that the requests meet the election, not a reconnect.
    survivors = ",".join(server.url() for name, server in cluster.servers.items() if name != leader)
    nc = await connect(survivors, "pull-test")
    js = nc.jetstream()
    try:
        consumer = PullConsumer(nc, lanes(s)[0])
        await consumer.start()
        cluster.kill(leader)

        async def refused_within() -> float | None:
            """How long a pull took to be refused with 503; None if it was not."""
            started = time.monotonic()
            try:
                await consumer.fetch(10, timeout=1.0)
            except NoRespondersError:
                return time.monotonic() - started
            return None

        # The survivors learn of the leader's loss within a few heartbeats (a pull sent before that is
        # lost with it, and waits out its time); from then until a leader is elected, each pull is refused.
        took = await eventually(refused_within, until=lambda t: t is not None, timeout=15, interval=0)
        assert took is not None and took < 1.0

        async def fetched() -> list[bytes]:
            with contextlib.suppress(Exception):
                await js.publish(s.subject_for("acme", 5), b"after", timeout=1)
            with contextlib.suppress(NoRespondersError):
                return [m.data for m in await consumer.fetch(10, timeout=1.0)]
            return []

        assert b"after" in await eventually(
            fetched, timeout=30, interval=0.5, what="a fetch after the election"
        )
        await consumer.stop()
    finally:
        await close(nc)


FAULT_SECONDS = 12.0
MOVED_WITHIN_SECONDS = 28.0


async def published(process: Process) -> float:
    """An engine's scheduler_runs_published_total."""
    found = re.search(r"^scheduler_runs_published_total (\S+)$", await process.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


async def publish_retries(process: Process) -> float:
    found = re.search(r"^scheduler_publish_retries_total (\S+)$", await process.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


async def stream_leader(js: nats.js.JetStreamContext, stream: str) -> str | None:
    """The stream's leader as the servers `js` reaches see it; None while they cannot tell."""
    with contextlib.suppress(Exception):
        info = await js.stream_info(stream)
        return info.cluster.leader if info.cluster is not None else None
    return None


async def all_current(js: nats.js.JetStreamContext, stream: str) -> bool:
    """A leader and both other replicas current."""
    with contextlib.suppress(Exception):
        info = await js.stream_info(stream)
        cluster = info.cluster
        return (
            cluster is not None
            and cluster.leader is not None
            and len(cluster.replicas) == 2
            and all(r.current and not r.offline for r in cluster.replicas)
        )
    return False


async def a_server_faulted_under_load(
    s: Settings,
    cluster: NatsCluster,
    pool: asyncpg.Pool,
    tmp_path: Path,
    fault: Callable[[str], None],
    recover: Callable[[str], None],
    *,
    struck_engine_moves: bool,
) -> dict[str, float]:
    """Runs flowing through two engines and a worker, `fault(leader)` strikes the server leading the
    stream, and `recover(leader)` undoes it once the other two have elected a leader and the drain
    went on through them. One engine is connected to the stream's leader alone, the other and the
    worker to the other two, so the fault lands on a process's connection and a new leader must
    carry the rest. Every run succeeds; no (run, epoch) starts twice; every claim started an attempt
    (nothing released and claimed again); no process exits; the old leader rejoins as a current
    replica. `struck_engine_moves`: the struck engine notices its server is gone (unanswered pings)
    and publishes through another while the fault lasts. Returns what was measured."""
    provisioning = await connect(cluster.url, "provisioning")
    try:
        await ensure_consumer(provisioning.jetstream(), s)
        await eventually(
            lambda: all_current(provisioning.jetstream(timeout=2), s.stream),
            until=bool,
            timeout=30,
            what="three current replicas",
        )
        leader = await stream_leader(provisioning.jetstream(timeout=2), s.stream)
    finally:
        await close(provisioning)
    assert leader is not None
    others = ",".join(server.url() for name, server in cluster.servers.items() if name != leader)
    n = 400
    figures: dict[str, float] = {}
    async with running_receiver() as receiver, processes(s, tmp_path) as spawn:
        on_leader = spawn("engine", SCHEDULER_NATS_URL=cluster.servers[leader].url())
        elsewhere, worker = (
            spawn("engine", SCHEDULER_NATS_URL=others),
            spawn("worker", SCHEDULER_NATS_URL=others),
        )
        await asyncio.gather(on_leader.wait_ready(), elsewhere.wait_ready(), worker.wait_ready())
        # Due over the next twenty seconds: claims and publishes go on through the fault.
        runs = await webhook_runs(pool, receiver, n, timedelta(milliseconds=50))
        nc = await nats.connect(servers=others.split(","))  # the survivors' view
        js = nc.jetstream(timeout=1)
        try:
            await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] >= 40, timeout=30, what="a first drain"
            )
            fault(leader)
            struck = time.monotonic()
            # Its server frozen or without a quorum, the struck engine gets no PubAck from now on.
            before = await published(on_leader)
            at_fault = await statuses(pool)
            # Runs were dispatched and not all done when the fault struck.
            assert at_fault["succeeded"] < n and at_fault["dispatched"] + at_fault["running"] > 0, at_fault
            await eventually(
                lambda: stream_leader(js, s.stream),
                until=lambda name: name not in (None, leader),
                timeout=30,
                interval=0.2,
                what="a new leader",
            )
            figures["new_leader_s"] = time.monotonic() - struck
            at_election = (await statuses(pool))["succeeded"]
            # The other two carry the drain while the struck server is still out.
            await eventually(
                lambda: statuses(pool),
                until=lambda c: c["succeeded"] > at_election,
                timeout=15,
                what="a drain through the other two",
            )

            async def struck_engine_published() -> None:
                await eventually(
                    lambda: published(on_leader),
                    until=lambda count: count > before,
                    # Inside its 30 s of re-sending (PUBLISH_RETRY_SECONDS), or its batch went back
                    # to pending; a connection moved only after 30-40 s fails here.
                    timeout=MOVED_WITHIN_SECONDS - (time.monotonic() - struck),
                    interval=0.1,
                    what="the struck engine publishing again",
                )
                figures["struck_engine_stall_s"] = time.monotonic() - struck

            if struck_engine_moves:
                await struck_engine_published()
            # Past JetStream's election timeout for sure, and within the struck engine's
            # PUBLISH_RETRY_SECONDS (30 s).
            await asyncio.sleep(max(0.0, FAULT_SECONDS - (time.monotonic() - struck)))
            figures["fault_s"] = time.monotonic() - struck
            recover(leader)
            if not struck_engine_moves:  # its batch in flight at the fault: acked once it is back
                await struck_engine_published()
            await eventually(
                lambda: all_current(js, s.stream), until=bool, timeout=30, what="the old leader current again"
            )
            figures["rejoined_s"] = time.monotonic() - struck
            done = await eventually(
                lambda: statuses(pool), until=lambda c: c["succeeded"] == n, timeout=45, what="every run"
            )
        finally:
            await nc.close()
        assert done == Counter({"succeeded": n})
        logs = f"engines:\n{on_leader.output()}\n{elsewhere.output()}\nworker:\n{worker.output()}"
        assert on_leader.alive() and elsewhere.alive() and worker.alive(), logs
        figures["struck_engine_retries"] = await publish_retries(on_leader)
        figures["other_engine_retries"] = await publish_retries(elsewhere)
        # The fault landed on the struck engine: it had messages to re-send.
        assert figures["struck_engine_retries"] > 0, logs
        ids = {str(r["id"]) for r in runs}
        calls = starts(receiver)
        assert {run for run, _ in calls} == ids
        assert max(calls.values()) == 1, [k for k, v in calls.items() if v > 1]
        claims = await pool.fetch("SELECT attempt, epoch, count(*) AS n FROM job_runs GROUP BY 1, 2")
        assert all(r["epoch"] == r["attempt"] for r in claims), ([tuple(r) for r in claims], logs)
        figures["due_lag_p99_s"] = await pool.fetchval(
            "SELECT percentile_cont(0.99) WITHIN GROUP"
            " (ORDER BY extract(epoch FROM started_at - due_at)) FROM job_runs"
        )
    return figures


async def test_the_stream_leader_frozen_past_its_election_timeout_loses_nothing(
    services: Services, database: str, cluster: NatsCluster, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """SIGSTOP of the server leading the stream while runs are in flight, until the other two have
    elected a leader and carried the drain on; then SIGCONT. The frozen server's clients see a
    stalled connection, not a closed one: the engine connected to it re-sends its unacked batch
    (same Nats-Msg-Id) until its unanswered pings move it to another server (10-15 s), where the
    batch is acked within its PUBLISH_RETRY_SECONDS, so nothing goes back to pending; the old leader
    rejoins as a current follower."""
    s = on_cluster(services, database, cluster, stream_replicas=3, urgent_priority=-1)
    figures = await a_server_faulted_under_load(
        s,
        cluster,
        pool,
        tmp_path,
        lambda name: cluster.servers[name].pause(),
        lambda name: cluster.servers[name].resume(),
        struck_engine_moves=True,
    )
    print("frozen leader:", {k: round(v, 2) for k, v in figures.items()})


async def test_the_stream_leader_cut_off_from_the_cluster_loses_nothing(
    services: Services, database: str, partitionable_cluster: NatsCluster, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """The server leading the stream cut off from the other two (its routes dropped and refused, its
    clients still served) while runs are in flight: the other two elect a leader and carry the
    drain; the engine connected only to the cut-off server gets no PubAck (its server answers its
    pings, so it does not move) and re-sends until the partition heals, within its
    PUBLISH_RETRY_SECONDS; then the cluster converges and every run ends once."""
    cluster = partitionable_cluster
    s = on_cluster(services, database, cluster, stream_replicas=3, urgent_priority=-1)
    figures = await a_server_faulted_under_load(
        s, cluster, pool, tmp_path, cluster.partition, lambda _: cluster.heal(), struck_engine_moves=False
    )
    print("partitioned leader:", {k: round(v, 2) for k, v in figures.items()})
