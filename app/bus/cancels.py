"""Cancel notices: which running runs a cancel just ended, from any API process to every worker.

Postgres decides a cancel: its statement moves the running run to `cancelled` and closes the
attempt. A notice only tells the worker executing it to stop now rather than at its next heartbeat
(the fallback, app/worker/cancels.py). So it travels on core NATS, not JetStream: published once, to
every worker at once (no queue group: only the one running the attempt finds it), and a notice lost
to an outage costs time, never correctness. Its subject, `<SUBJECT_PREFIX>_cancel`, lies outside
every lane's stream (`<prefix>.>`, `<prefix>_urgent.>`), so no stream stores it.

A notice is `[[run_id, epoch], …]`: with the epoch, a notice that arrives late never stops a later
attempt of the same run (a retry starts it under a new epoch)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from uuid import UUID

import orjson
from nats.aio.client import Client as NATS

from app.config import Settings
from app.telemetry import metrics

log = logging.getLogger(__name__)
NOTICE_RUNS = 500  # runs per notice: about 25 kB, far inside NATS's max payload (1 MB by default)

Attempt = tuple[UUID, int]  # (run id, epoch): the attempt a worker stops


def cancel_subject(settings: Settings) -> str:
    return f"{settings.subject_prefix}_cancel"


def encode(attempts: list[Attempt]) -> list[bytes]:
    """The notices that name these attempts, NOTICE_RUNS at most each."""
    return [
        orjson.dumps([[str(run_id), epoch] for run_id, epoch in attempts[i : i + NOTICE_RUNS]])
        for i in range(0, len(attempts), NOTICE_RUNS)
    ]


def decode(data: bytes) -> set[Attempt]:
    """The attempts a notice names; whatever is not a [uuid, integer] pair is ignored."""
    try:
        entries = orjson.loads(data)
    except orjson.JSONDecodeError:
        return set()
    attempts: set[Attempt] = set()
    for entry in entries if isinstance(entries, list) else ():
        if not (isinstance(entry, list) and len(entry) == 2 and type(entry[1]) is int):
            continue
        try:
            attempts.add((UUID(str(entry[0])), entry[1]))
        except ValueError:
            continue
    return attempts


class CancelNotices:
    """The API's side (a StopRunning): publishes the notice for runs a cancel took out of running.
    The connection comes once app.main has reached NATS, or never (no NATS_URL); until then, and if
    it is closed, the notice is counted `unsent` and the workers' heartbeats find the runs instead.
    While NATS reconnects, the client buffers the notice and sends it once it is back."""

    def __init__(self, subject: str):
        self.subject = subject
        self.nc: NATS | None = None

    async def __call__(self, runs: Iterable[Any], /) -> None:
        notices = encode([(r["id"], r["epoch"]) for r in runs])
        for notice in notices:
            nc = self.nc
            if nc is None or nc.is_closed:
                metrics.cancel_notices_total.labels("unsent").inc()
                continue
            try:
                await nc.publish(self.subject, notice)
            except Exception as exc:  # the client's buffer is full while it reconnects, say
                log.warning("cancel notice not sent (%s); the heartbeats will find the runs", exc)
                metrics.cancel_notices_total.labels("unsent").inc()
                continue
            metrics.cancel_notices_total.labels("sent").inc()
