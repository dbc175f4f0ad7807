"""`scheduler dev`'s echo receiver: a webhook target on the dev API itself, so a newcomer's first
job has somewhere to call. Dev only; never part of the real API or its contract."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

log = logging.getLogger("app.devstack")
ECHO_PATH = "/dev/echo"


def add_echo_receiver(app: FastAPI) -> None:
    """A webhook receiver on the dev API itself, for jobs to point at: answers 200 (or the status
    given by `?status=`), and logs what it received. Dev only; never part of the real API."""

    async def echo(request: Request) -> Response:
        body = await request.body()
        run = request.headers.get("webhook-id") or request.headers.get("scheduler-run-id") or "-"
        attempt = request.headers.get("scheduler-attempt", "-")
        wanted = request.query_params.get("status", "200")
        status = int(wanted) if wanted.isdigit() and 200 <= int(wanted) <= 599 else 400
        log.info(
            "echo receiver: %s %s run %s attempt %s, %d bytes: %.200r -> %d",
            request.method,
            request.url.path,
            run,
            attempt,
            len(body),
            body,
            status,
        )
        return Response(
            json.dumps({"received": len(body), "run": run, "status": status}),
            status_code=status,
            media_type="application/json",
        )

    # A plain Starlette route: outside the OpenAPI contract, and no FastAPI signature inspection.
    app.add_route(ECHO_PATH, echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
