"""The one message the engine sends a worker. Versioned: a worker refuses a version it does not know
rather than guessing (it naks it for a newer replica)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

VERSION = 1


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

    @property
    def msg_id(self) -> str:
        """JetStream de-duplicates on it inside the duplicate window: one message per (run, epoch)."""
        return f"{self.run_id}:{self.epoch}"

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "v": VERSION,
                "run_id": str(self.run_id),
                "scheduled_at": self.scheduled_at.isoformat(),
                "tenant_id": self.tenant_id,
                "job": self.job,
                "attempt": self.attempt,
                "epoch": self.epoch,
                "payload": self.payload,
                "target": self.target,
                "timeout_seconds": self.timeout_seconds,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> RunMessage:
        raw = orjson.loads(data)
        if raw.get("v") != VERSION:
            raise UnknownVersion(raw.get("v"))
        return cls(
            run_id=UUID(raw["run_id"]),
            scheduled_at=datetime.fromisoformat(raw["scheduled_at"]),
            tenant_id=raw["tenant_id"],
            job=raw["job"],
            attempt=raw["attempt"],
            epoch=raw["epoch"],
            payload=raw["payload"],
            target=raw["target"],
            timeout_seconds=raw["timeout_seconds"],
        )

    @classmethod
    def from_claimed(cls, row: Any) -> RunMessage:
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
        )


class UnknownVersion(ValueError):
    pass
