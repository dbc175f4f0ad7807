"""What the engine sends a worker: one message carries the runs of one tenant and lane that one claim
took (up to MESSAGE_RUNS of them). Versioned: a worker refuses a version it does not know rather than
guessing (it naks it for a newer replica).

Version 2 is `{"v": 2, "runs": [run, …]}`, each run with its own dispatch traceparent (a run, not a
message, is what a trace follows). Several runs a message because
JetStream's cost is per message: one run a message cost nats-server 27 µs a run (56 with the
traceparent in its headers), 25 a message 4 (bench `broker`, docs/bench.md verdict 29)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
from asyncpg.pgproto.pgproto import UUID as FastUUID

VERSION = 2


@dataclass(frozen=True, slots=True)
class RunMessage:
    run_id: UUID
    scheduled_at: datetime
    tenant_id: str
    job: str
    attempt: int  # the attempt this delivery will be, once started
    epoch: int  # the lease fence: every transition must match it
    payload: Any
    target: dict[str, Any]
    timeout_seconds: float
    traceparent: str | None = None  # of the run's dispatch span: its execution span's parent

    @property
    def msg_id(self) -> str:
        """JetStream de-duplicates on it inside the duplicate window: one message per (run, epoch)."""
        return f"{self.run_id}:{self.epoch}"

    def entry(self) -> bytes:
        """The run as an entry of a message (encoded one run at a time, so one that cannot be
        encoded fails alone)."""
        return orjson.dumps(
            {
                "run_id": str(self.run_id),
                "scheduled_at": self.scheduled_at.isoformat(),
                "tenant_id": self.tenant_id,
                "job": self.job,
                "attempt": self.attempt,
                "epoch": self.epoch,
                "payload": self.payload,
                "target": self.target,
                "timeout_seconds": self.timeout_seconds,
                "traceparent": self.traceparent,
            }
        )

    @classmethod
    def from_entry(cls, raw: Any) -> RunMessage:
        carried = raw.get("traceparent")
        return cls(
            # asyncpg's own UUID, a subclass of uuid.UUID, equal to and hashed as the standard one:
            # parsed in 0.12 µs against 0.82, printed in 0.06 against 0.94, ordered (a fence's id
            # order) and encoded into a statement faster (docs/bench.md verdict 44).
            run_id=FastUUID(raw["run_id"]),
            scheduled_at=datetime.fromisoformat(raw["scheduled_at"]),
            tenant_id=raw["tenant_id"],
            job=raw["job"],
            attempt=raw["attempt"],
            epoch=raw["epoch"],
            payload=raw["payload"],
            target=raw["target"],
            timeout_seconds=raw["timeout_seconds"],
            traceparent=carried if isinstance(carried, str) else None,
        )

    @classmethod
    def from_claimed(cls, row: Any, traceparent: str | None = None) -> RunMessage:
        """From a claimed row. The claim hands payload and target over as JSON text, decoded here one
        run at a time: decoded by the driver, one undecodable value (jsonb stores numbers like 1e400
        and depths orjson refuses) failed the fetch of the whole claimed batch, after the claim had
        committed. Raises on such a run; the dispatcher fails that run alone."""
        return cls(
            run_id=row["id"],
            scheduled_at=row["scheduled_at"],
            tenant_id=row["tenant_id"],
            job=row["job"],
            attempt=row["attempt"] + 1,
            epoch=row["epoch"],
            payload=orjson.loads(row["payload_json"]),
            target=orjson.loads(row["target_json"]),
            timeout_seconds=row["timeout_seconds"],
            traceparent=traceparent,
        )


def message_of(entries: Sequence[bytes]) -> bytes:
    """A message of runs already encoded (RunMessage.entry): joined, not encoded again."""
    return b'{"v":2,"runs":[' + b",".join(entries) + b"]}"


def decode(data: bytes) -> list[RunMessage]:
    """The runs a message carries. Raises UnknownVersion for a version this worker does not know,
    ValueError for a malformed message."""
    raw = orjson.loads(data)
    if not isinstance(raw, dict):
        raise ValueError("a message is a JSON object")
    version = raw.get("v")
    if version != VERSION:
        raise UnknownVersion(version)
    entries = raw.get("runs")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise ValueError("a message carries a list of runs")
    try:
        return [RunMessage.from_entry(e) for e in entries]
    except (KeyError, TypeError, AttributeError) as exc:  # a field missing, or of another type
        raise ValueError(f"a malformed run: {exc!r}") from exc


class UnknownVersion(ValueError):
    pass
