"""Python handlers this package registers (entry-point group `scheduler.handlers`).

A deployment registers its own in its package's metadata:

    [project.entry-points."scheduler.handlers"]
    "send-report" = "mycompany.jobs:send_report"

A handler is `async def handler(payload, context) -> None`; raising fails the attempt."""

from __future__ import annotations

import asyncio
from typing import Any

from app.worker.targets import RunContext


async def echo(payload: Any, context: RunContext) -> None:
    """Succeeds; `{"sleep": s}` waits s seconds first and `{"fail": "why"}` fails with that message.
    For demos and tests."""
    if isinstance(payload, dict):
        if payload.get("sleep"):
            await asyncio.sleep(float(payload["sleep"]))
        if payload.get("fail"):
            raise RuntimeError(str(payload["fail"]))
