"""publish: one synchronous `js.publish` per message (the reference design's loop) vs the app's
pipelined publish in batches of batch_size vs raw `publish_async` of everything at once — the same
messages, the same NATS, the app's stream configuration, rounds interleaved against drift."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from nats.js import JetStreamContext

from app.bus.jetstream import ensure_stream
from app.bus.message import RunMessage, message_of
from app.bus.publisher import Outgoing, Publisher
from app.config import Settings
from app.domain import DEFAULT_PRIORITY
from bench.measure import rate
from bench.progress import tqdm
from bench.report import Report
from bench.scenarios._common import begin, shared_host, sized
from bench.stack import Bench, delete_stream, stream_messages

NAME = "publish"
HELP = "sequential js.publish vs pipelined batches vs raw publish_async (msg/s)"
VARIANTS = ("sequential", "pipelined", "raw publish_async")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--messages", type=int, help="messages per variant and round (default 20000; smoke 500)")
    p.add_argument(
        "--rounds", type=int, help="rounds of all three variants, interleaved (default 3; smoke 1)"
    )


def messages(n: int, settings: Settings, tenants: int = 50) -> list[Outgoing]:
    """Messages of one noop run each, in the engine's format: the versioned body, a unique
    Nats-Msg-Id (so JetStream's de-duplication does its real work) and a traceparent."""
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        run_id = uuid.uuid4()
        m = RunMessage(run_id, now, f"t{i % tenants:03d}", "noop", 1, 1, {}, {"type": "noop"}, 30.0)
        headers = {
            "Nats-Msg-Id": m.msg_id,
            "traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01",
        }
        out.append(
            Outgoing(settings.subject_for(m.tenant_id, DEFAULT_PRIORITY), message_of([m.entry()]), headers)
        )
    return out


async def _sequential(js: JetStreamContext, msgs: list[Outgoing], bar: Any) -> int:
    failed = 0
    for i, m in enumerate(msgs):
        try:
            await js.publish(m.subject, m.payload, headers=m.headers)
        except Exception:
            failed += 1
        if i % 100 == 99:
            bar.update(100)
    return failed


async def _pipelined(publisher: Publisher, msgs: list[Outgoing], batch: int, timeout: float, bar: Any) -> int:
    failed = 0
    for i in range(0, len(msgs), batch):
        oks = await publisher.publish(msgs[i : i + batch], timeout)
        failed += oks.count(False)
        bar.update(len(oks))
    return failed


async def _raw(js: JetStreamContext, msgs: list[Outgoing], bar: Any) -> int:
    futures = [await js.publish_async(m.subject, m.payload, headers=m.headers) for m in msgs]
    results = await asyncio.gather(*futures, return_exceptions=True)
    bar.update(len(msgs))
    return sum(1 for r in results if isinstance(r, BaseException))


async def run(bench: Bench, args: argparse.Namespace) -> Report:
    report = await begin(bench, NAME)
    n = sized(args.messages, full=20_000, smoke=500, is_smoke=bench.smoke)
    rounds = sized(args.rounds, full=3, smoke=1, is_smoke=bench.smoke)
    base = bench.settings()
    report.workload = {
        "messages per variant and round": n,
        "rounds": rounds,
        "batch_size (pipelined)": base.batch_size,
        "publish_async_max_pending": "nats-py's default (4000)",
        "stream storage": "file (the app's stream_config)",
    }
    msgs = messages(n, base)
    report.workload["message body bytes"] = len(msgs[0].payload)
    nc = await bench.nats()
    js = nc.jetstream()
    publisher = Publisher(nc)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    failures: dict[str, int] = dict.fromkeys(VARIANTS, 0)
    streams: list[Settings] = []
    try:
        for r in range(rounds):
            for variant in VARIANTS:
                s = bench.settings()
                streams.append(s)
                # Same subjects on a stream of its own (subject prefixes may not overlap between streams).
                batch = [
                    Outgoing(
                        s.subject_for(m.subject.rsplit(".", 1)[1], DEFAULT_PRIORITY), m.payload, m.headers
                    )
                    for m in msgs
                ]
                await ensure_stream(js, s)
                with tqdm(
                    total=n, desc=f"{variant} (round {r + 1}/{rounds})", unit="msg", leave=False
                ) as bar:
                    t0 = time.perf_counter()
                    if variant == "sequential":
                        failed = await _sequential(js, batch, bar)
                    elif variant == "pipelined":
                        failed = await _pipelined(
                            publisher, batch, s.batch_size, s.publish_timeout_seconds, bar
                        )
                    else:
                        failed = await _raw(js, batch, bar)
                    elapsed = time.perf_counter() - t0
                stored = await stream_messages(nc, s.stream)
                if stored != n - failed:
                    report.notes.append(
                        f"{variant} round {r + 1}: stream holds {stored} messages, expected {n - failed}"
                    )
                failures[variant] += failed
                rates[variant].append(rate(n - failed, elapsed))
                await delete_stream(nc, s)
    finally:
        for used in streams:
            await delete_stream(nc, used)
        await nc.close()

    med = {v: statistics.median(rs) for v, rs in rates.items()}
    seq = med["sequential"]
    report.table(
        "Publish throughput (median of rounds)",
        ["variant", "msg/s", "x sequential", "rounds (msg/s)", "failed"],
        [[v, med[v], med[v] / seq, " / ".join(f"{x:,.0f}" for x in rates[v]), failures[v]] for v in VARIANTS],
    )
    report.data = {"rates": rates, "median": med, "failures": failures}
    report.notes.append(
        f"pipelined / raw publish_async = {med['pipelined'] / med['raw publish_async']:.2f}x. Pipelined "
        "waits for every PubAck of a batch before it sends the next batch; raw keeps up to "
        "publish_async_max_pending in flight. The dispatcher overlaps that wait with its next claim."
    )
    report.draw = lambda fig: _chart(fig, med)
    report.not_mean = (
        "These are publish rates of one Python client to one NATS server over loopback with file storage and "
        "no replication (R1): the sequential figure is one round trip per message, so it is mostly loopback "
        "latency plus asyncio overhead, and over a real network it would be far lower while the pipelined "
        "figures would fall much less. They are not NATS's ceiling (one client, one connection) and not the "
        "dispatcher's rate (no claim, no database). " + shared_host(report, "the NATS server")
    )
    return report


def _chart(fig: Any, med: dict[str, float]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    names = list(med)
    ax.bar(names, [med[n] for n in names], color=["#999999", "#4c72b0", "#55a868"])
    ax.set_ylabel("messages/s (median of rounds)")
    ax.set_title("JetStream publish: sequential vs pipelined vs raw publish_async")
    for i, n in enumerate(names):
        ax.text(i, med[n], f"{med[n]:,.0f}", ha="center", va="bottom")
