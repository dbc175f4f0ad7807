"""ingest's comparison of submissions by their job's rule: plain ones against unique-keyed and
debounced ones (migration 0021), alternated round by round in one run, so that whatever the machine
does meanwhile falls on every kind alike."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.measure import latency_ms, rate
from bench.report import Report

UNIQUE = {"unique": {"key": "payload.k"}}
DEBOUNCE = {"debounce": {"key": "payload.k", "period_seconds": 3600, "max_delay_seconds": 86_400}}
DEBOUNCED_KEYS = 100  # debounced submissions spread over this many keys: nearly all of them fold

# kind -> (job, its rule, what one submission is, the n-th submission's payload)
KINDS: dict[str, tuple[str, dict[str, Any], str, Callable[[int], Any]]] = {
    "plain": ("noop", {}, "a job without a rule: the default path", lambda n: {"k": n}),
    "unique": ("unique", UNIQUE, "unique job, a new key each: every one creates its run", lambda n: {"k": n}),
    "duplicate": (
        "unique",
        UNIQUE,
        "unique job, one key: every one is answered 200 with the run",
        lambda n: {"k": -1},
    ),
    "debounce": (
        "debounce",
        DEBOUNCE,
        f"debounced job, {DEBOUNCED_KEYS} keys: each folds into its key's pending run",
        lambda n: {"k": n % DEBOUNCED_KEYS},
    ),
}


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # of 200 and 201 answers
    runs: int = 0  # submissions answered (single) or items answered (batch)
    errors: int = 0
    seconds: float = 0.0


async def put_jobs(client: httpx.AsyncClient, tenant: str, auth: dict[str, str], kinds: list[str]) -> None:
    for job, rule, _, _ in {KINDS[k][0]: KINDS[k] for k in kinds if KINDS[k][1]}.values():
        r = await client.put(
            f"/tenants/{tenant}/jobs/{job}", json={"target": {"type": "noop"}, **rule}, headers=auth
        )
        r.raise_for_status()


async def compare(
    client: httpx.AsyncClient,
    tenant: str,
    auth: dict[str, str],
    kinds: list[str],
    *,
    concurrency: int,
    seconds_per_round: float,
    batches_per_round: int,
    rounds: int,
) -> dict[str, dict[str, Tally]]:
    """Each round runs every kind in turn (in a rotated order): single POSTs for `seconds_per_round`
    at `concurrency`, then `batches_per_round` batches of 1000, one at a time."""
    counter = itertools.count(1)
    out = {k: {"single": Tally(), "batch": Tally()} for k in kinds}
    for round_no in range(rounds):
        print(f"  rules, round {round_no + 1} of {rounds}: {', '.join(kinds)}…", flush=True)
        for kind in kinds[round_no % len(kinds) :] + kinds[: round_no % len(kinds)]:
            job, _, _, payload = KINDS[kind]
            single, batch = out[kind]["single"], out[kind]["batch"]
            await _single_load(
                client, tenant, auth, job, payload, counter, concurrency, seconds_per_round, single
            )
            for _ in range(batches_per_round):
                body = {"runs": [{"job": job, "payload": payload(next(counter))} for _ in range(1000)]}
                start = time.perf_counter()
                r = await client.post(f"/tenants/{tenant}/runs/batch", json=body, headers=auth)
                batch.seconds += time.perf_counter() - start
                if r.status_code == 201:
                    batch.latencies.append(time.perf_counter() - start)
                    batch.runs += 1000
                else:
                    batch.errors += 1
    return out


async def _single_load(
    client: httpx.AsyncClient,
    tenant: str,
    auth: dict[str, str],
    job: str,
    payload: Callable[[int], Any],
    counter: itertools.count[int],
    concurrency: int,
    seconds: float,
    tally: Tally,
) -> None:
    t0 = time.perf_counter()
    deadline = t0 + seconds

    async def one_client() -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            r = await client.post(
                f"/tenants/{tenant}/runs", json={"job": job, "payload": payload(next(counter))}, headers=auth
            )
            if r.status_code in (200, 201):
                tally.latencies.append(time.perf_counter() - start)
                tally.runs += 1
            else:
                tally.errors += 1

    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    tally.seconds += time.perf_counter() - t0


def rows(results: dict[str, dict[str, Tally]]) -> list[list[Any]]:
    """The report's table: one row per kind."""
    out = []
    for kind, by in results.items():
        single, batch = by["single"], by["batch"]
        s, b = latency_ms(single.latencies), latency_ms(batch.latencies)
        out.append(
            [
                kind,
                KINDS[kind][2],
                single.runs,
                single.errors + batch.errors,
                rate(single.runs, single.seconds),
                s["p50_ms"],
                s["p99_ms"],
                rate(batch.runs, batch.seconds),
                b["p50_ms"],
            ]
        )
    return out


COLUMNS = [
    "kind",
    "submissions",
    "single ok",
    "errors",
    "single req/s",
    "p50 ms",
    "p99 ms",
    "batch items/s",
    "batch p50 ms",
]


async def measure(
    report: Report,
    client: httpx.AsyncClient,
    tenant: str,
    auth: dict[str, str],
    args: argparse.Namespace,
    duration: float,
) -> None:
    """The comparison `--rules` asks for, as a table of the report (and its data, under "rules")."""
    kinds = [k for k in args.rules.split(",") if k]
    await put_jobs(client, tenant, auth, kinds)
    results = await compare(
        client,
        tenant,
        auth,
        kinds,
        concurrency=args.concurrency,
        seconds_per_round=duration / args.rule_rounds,
        batches_per_round=args.rule_batches,
        rounds=args.rule_rounds,
    )
    table = rows(results)
    report.table(
        f"Submissions by job rule, alternated in {args.rule_rounds} rounds (httpx, {args.concurrency} in "
        "flight; batches of 1000 one at a time)",
        COLUMNS,
        table,
    )
    report.data["rules"] = {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in table}
    report.notes.append(
        "By job rule: each kind's figures add up its slices of every round (a kind runs "
        f"{duration / args.rule_rounds:g} s of single POSTs, then {args.rule_batches} batches, per round); "
        "`single ok` counts 201 and 200 answers alike: a duplicate or a folded submission is answered 200."
    )
