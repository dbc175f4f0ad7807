"""Small measuring tools: percentiles, a parsed /metrics scrape that can be diffed, and waiting for
a count to reach a target with a progress bar."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.progress import tqdm

Labels = frozenset[tuple[str, str]]


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def latency_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds of samples in seconds."""
    return {
        "p50_ms": percentile(samples, 50) * 1000,
        "p95_ms": percentile(samples, 95) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "max_ms": max(samples, default=math.nan) * 1000,
        "samples": len(samples),
    }


@dataclass
class Metrics:
    """One Prometheus text scrape. `after - before` keeps only what happened in between."""

    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Metrics:
        out: dict[tuple[str, Labels], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, frozenset(s.labels.items()))] = float(s.value)
        return cls(out)

    def __sub__(self, before: Metrics) -> Metrics:
        return Metrics({k: v - before.samples.get(k, 0.0) for k, v in self.samples.items()})

    def __add__(self, other: Metrics) -> Metrics:
        keys = self.samples.keys() | other.samples.keys()
        return Metrics({k: self.samples.get(k, 0.0) + other.samples.get(k, 0.0) for k in keys})

    def value(self, name: str, **labels: str) -> float:
        """Sum over every series of `name` whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)

    def quantile(self, histogram: str, q: float, **labels: str) -> float:
        """histogram_quantile() over the `_bucket` series: linear inside the bucket, as Prometheus does."""
        want = set(labels.items())
        buckets: dict[float, float] = {}
        for (n, ls), v in self.samples.items():
            if n == f"{histogram}_bucket" and want <= ls:
                le = float(dict(ls)["le"])
                buckets[le] = buckets.get(le, 0.0) + v
        if not buckets:
            return math.nan
        bounds = sorted(buckets)
        total = buckets[bounds[-1]]
        if total <= 0:
            return math.nan
        rank = q * total
        prev_bound, prev_count = 0.0, 0.0
        for b in bounds:
            if buckets[b] >= rank:
                if math.isinf(b):
                    return prev_bound
                width = buckets[b] - prev_count
                return prev_bound + (b - prev_bound) * ((rank - prev_count) / width if width else 1.0)
            prev_bound, prev_count = b, buckets[b]
        return bounds[-1]


# The shortest wait between two counts: the end of a wait is seen within about this.
FINEST_POLL = 0.01


async def wait_for_count(
    count: Callable[[], Awaitable[int]],
    target: int,
    *,
    desc: str,
    interval: float,
    timeout: float,
    start: float | None = None,
) -> float:
    """Poll `count` until it reaches `target`; returns the perf_counter() at which it was first seen
    there. Raises TimeoutError with the last count if it does not get there in time.

    Polls every `interval` at most, and closer together as the end nears: never longer than half of
    what the rate so far says is left (FINEST_POLL at least). Every `interval` alone put the end on a
    grid of `interval`: 40k runs drained in ~1.6 s came out at 24.7k, 21.2k or 18.8k runs/s, one
    0.25 s step apart (docs/bench.md verdict 42), while the polls that count cost the database."""
    began = time.perf_counter()
    deadline = began + timeout
    seen = 0
    with tqdm(total=target, desc=desc, unit="run", leave=False, dynamic_ncols=True) as bar:
        while True:
            now_count = await count()
            now = time.perf_counter()
            bar.update(max(0, min(now_count, target) - seen))
            seen = max(seen, min(now_count, target))
            if now_count >= target:
                return now
            if now > deadline:
                raise TimeoutError(f"{desc}: {now_count} of {target} after {timeout:.0f}s")
            wait = interval
            if seen > 0:
                left = (target - seen) * (now - began) / seen  # at the rate so far
                wait = max(FINEST_POLL, min(interval, left / 2))
            await asyncio.sleep(wait)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def cpu_seconds(pids: dict[str, int], names: Sequence[str] = ("postgres", "nats-server")) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named pid, and by all processes of each
    command name (every Postgres backend, say, and the backends that exited), from /proc. Empty
    where /proc is not there."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = dict.fromkeys([*pids, *names], 0.0)
    by_pid = {pid: label for label, pid in pids.items()}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        used = (int(fields[11]) + int(fields[12])) / tick
        label = by_pid.get(int(stat.parent.name))
        if label is None and comm in names:
            # With its reaped children's time (cutime + cstime): a Postgres backend that exits between
            # two readings moves its CPU into the postmaster's, so a sum by name never goes backwards.
            label, used = comm, used + (int(fields[13]) + int(fields[14])) / tick
        if label is not None:
            out[label] += used
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, …), from /proc; empty without /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out
