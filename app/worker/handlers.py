"""Python handlers this package registers (entry-point group `scheduler.handlers`).

A deployment registers its own in its package's metadata:

    [project.entry-points."scheduler.handlers"]
    "send-report" = "mycompany.jobs:send_report"

A handler is `async def handler(payload, context) -> Any`: what it returns (JSON; anything else is
kept as its text) becomes the run's `result`, bounded by SCHEDULER_MAX_RESULT_BYTES; raising fails
the attempt."""

from __future__ import annotations

import asyncio
from typing import Any

from app.worker.targets import RunContext


async def echo(payload: Any, context: RunContext) -> Any:
    """Succeeds; `{"sleep": s}` waits s seconds first, `{"fail": "why"}` fails with that message and
    `{"return": value}` returns the value (the run's result). For demos and tests."""
    if isinstance(payload, dict):
        if payload.get("sleep"):
            await asyncio.sleep(float(payload["sleep"]))
        if payload.get("fail"):
            raise RuntimeError(str(payload["fail"]))
        return payload.get("return")
    return None
