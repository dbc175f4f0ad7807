"""broker: what carrying a run costs nats-server, by how it travels: one message a run (the design
card's form) on a file-stored stream, the same on a memory-stored stream, and messages of 25 runs
(MESSAGE_RUNS, the app's default) and of 100 (docs/bench.md, verdict 29).

Every variant sends the same noop-run entries through the app's own pieces: the dispatcher's
Publisher (pipelined, every PubAck checked) into a stream made by the app's stream_config, then the
worker's PullConsumer (fetches of worker_fetch_batch) and one ack per message, as the worker acks.
Variants alternate within each round. Measured: nats-server's CPU per run (from /proc), this
client's CPU per run, and the rate of the whole cycle (publish everything, then pull and ack it)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.js.api import StorageType

from app.bus.jetstream import Lane, consumer_config, lanes, stream_config
from app.bus.message import RunMessage, message_of
from app.bus.publisher import Outgoing, Publisher
from app.bus.pull import PullConsumer
from app.config import Settings
from bench.measure import cpu_seconds, rate
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench, delete_stream, stream_messages

NAME = "broker"
HELP = "nats-server CPU per run: one run a message vs memory storage vs 25 (the default) and 100 a message"
ONE = "file, 1 run/message"


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    storage: StorageType
    runs_per_message: int


VARIANTS = (
    Variant(ONE, StorageType.FILE, 1),
    Variant("memory, 1 run/message", StorageType.MEMORY, 1),
    Variant("file, 25 runs/message (default)", StorageType.FILE, 25),
    Variant("file, 100 runs/message", StorageType.FILE, 100),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, help="runs per variant and round (default 20000; smoke 500)")
    p.add_argument("--rounds", type=int, help="rounds of every variant, alternated (default 3; smoke 1)")


@dataclasses.dataclass(frozen=True)
class Run:
    subject: str
    entry: bytes
    msg_id: str


def noop_runs(n: int, subject_prefix: str, tenants: int = 50) -> list[Run]:
    """Entries shaped like the engine's for a noop run, each with a traceparent of its own."""
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        traceparent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
        m = RunMessage(
            uuid.uuid4(), now, f"t{i % tenants:03d}", "noop", 1, 1, {}, {"type": "noop"}, 30.0, traceparent
        )
        out.append(Run(f"{subject_prefix}.{m.tenant_id}", m.entry(), m.msg_id))
    return out


def grouped(runs: list[Run], per: int) -> list[Outgoing]:
    """`per` runs of one subject in each message, named by its first run as the engine names them."""
    by_subject: dict[str, list[Run]] = {}
    for run in runs:
        by_subject.setdefault(run.subject, []).append(run)
    out = []
    for subject, of_subject in by_subject.items():
        for i in range(0, len(of_subject), per):
            group = of_subject[i : i + per]
            body = message_of([r.entry for r in group])
            out.append(Outgoing(subject, body, {"Nats-Msg-Id": group[0].msg_id}))
    return out


async def _cycle(
    nc: NATS, s: Settings, lane: Lane, variant: Variant, runs: list[Run], bar: Any
) -> dict[str, float]:
    js = nc.jetstream()
    await js.add_stream(dataclasses.replace(stream_config(lane), storage=variant.storage))
    await js.add_consumer(lane.stream, consumer_config(lane, s))
    msgs = grouped(runs, variant.runs_per_message)
    publisher, pull = Publisher(nc), PullConsumer(nc, lane)
    await pull.start()
    server0, client0, t0 = (
        cpu_seconds({}, ("nats-server",))["nats-server"],
        time.process_time(),
        time.perf_counter(),
    )
    failed = 0
    for i in range(0, len(msgs), s.batch_size):
        oks = await publisher.publish(msgs[i : i + s.batch_size], s.publish_timeout_seconds)
        failed += oks.count(False)
    acked = 0
    while acked < len(msgs) - failed:
        got = await pull.fetch(s.worker_fetch_batch, timeout=5.0)
        if not got:
            raise RuntimeError(f"{variant.name}: {acked} of {len(msgs) - failed} messages came back")
        for msg in got:
            await msg.ack()
        acked += len(got)
        bar.update(len(got) * variant.runs_per_message)
    await nc.flush()
    elapsed = time.perf_counter() - t0
    client = time.process_time() - client0
    server = cpu_seconds({}, ("nats-server",))["nats-server"] - server0
    await pull.stop()
    await publisher.stop()
    # Work-queue retention: every ack removes its message. A stream that does not empty means acks
    # were lost, and the figures would price less work than the worker's.
    for _ in range(50):
        left = await stream_messages(nc, lane.stream)
        if left == 0:
            break
        await asyncio.sleep(0.1)
    else:
        raise RuntimeError(f"{variant.name}: {left} messages still in the stream after every ack")
    n = len(runs) - failed * variant.runs_per_message
    return {
        "rate": rate(n, elapsed),
        "server_us": server / n * 1e6,
        "client_us": client / n * 1e6,
        "failed": failed,
    }


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.runs, full=20_000, smoke=500, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=3, smoke=1, is_smoke=bench.smoke)
    base = bench.settings()
    report.workload = {
        "runs per variant and round": n,
        "rounds": rounds,
        "tenants (a message carries one tenant's runs)": 50,
        "run entry bytes": len(noop_runs(1, "x")[0].entry),
        "publish batch (the engine's batch_size)": base.batch_size,
        "fetch batch (the worker's worker_fetch_batch)": base.worker_fetch_batch,
        "stream": "the app's stream_config and consumer_config; storage as the variant says",
    }
    nc = await bench.nats()
    results: dict[str, list[dict[str, float]]] = {v.name: [] for v in VARIANTS}
    used: list[Settings] = []
    try:
        for r in range(rounds):
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                s = bench.settings()
                used.append(s)
                lane = lanes(s)[0]
                # Fresh runs on this stream's subjects (prefixes may not overlap between streams).
                mine = noop_runs(n, lane.subject_prefix)
                with tqdm(
                    total=n, desc=f"{variant.name} (round {r + 1}/{rounds})", unit="run", leave=False
                ) as bar:
                    results[variant.name].append(await _cycle(nc, s, lane, variant, mine, bar))
                await delete_stream(nc, s)
    finally:
        for s in used:
            await delete_stream(nc, s)
        await nc.close()

    def med(name: str, key: str) -> float:
        return statistics.median(x[key] for x in results[name])

    # No ratio when nats-server used no clock tick in the one-run rounds (a smoke's few runs).
    one_server = med(ONE, "server_us")
    rows = [
        [
            v.name,
            med(v.name, "rate"),
            med(v.name, "server_us"),
            med(v.name, "server_us") / one_server if one_server else None,
            med(v.name, "client_us"),
            " / ".join(f"{x['server_us']:.1f}" for x in results[v.name]),
            sum(int(x["failed"]) for x in results[v.name]),
        ]
        for v in VARIANTS
    ]
    report.table(
        "Carrying a run through JetStream (median of rounds)",
        [
            "variant",
            "runs/s",
            "nats-server us/run",
            "x 1 run/message",
            "client us/run",
            "rounds (server us/run)",
            "failed",
        ],
        rows,
    )
    report.data = {"results": results}
    report.notes.append(
        "nats-server's CPU is every process of that name on this host (from /proc): read it on a quiet "
        "host. The client's CPU is this bench process publishing, pulling and acking (its Python, not "
        "the engine's or the worker's whole work per run)."
    )
    report.not_mean = (
        "These price the broker's share of a run in isolation: no database, no claim, no execution, one "
        "client publishing everything and then pulling it back, so the rates are not a drain's, and the "
        "client's CPU is not the engine's or the worker's. A memory-stored stream, priced here, is not "
        "what the app does: it loses every message in it when nats-server stops. Several runs in a "
        "message share one Nats-Msg-Id, one ack and one redelivery. " + shared_host(report, "the NATS server")
    )
    return report
