"""Large submission bodies: refused unread when their tenant is known to be full, parsed off the
event loop otherwise (the routes of app.api.runs that take runs)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from app.api.deps import bearer, get_principal, get_state
from app.api.large_json import loads_in_pieces
from app.errors import InvalidInput
from app.services.submission import count_pending

# Bodies at least this large are refused unread when their tenant is known to be full, and parsed
# off the event loop otherwise.
LARGE_BODY_BYTES = 1 << 20
# One thread parses them, one at a time, in pieces (app/api/large_json.py): the parser's C steps
# hold the GIL, and four whole parses at once handed it to one another while the event loop waited
# (1.2 s stalls).
PARSER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="body-parser")


class LargeBodiesOffTheLoop(APIRoute):
    """A large submission of a tenant whose backlog is known to be full is refused before its body
    is read: a 15 MiB batch refused with 429 used to be parsed first, 1.3 s of the shared event
    loop. Smaller bodies are read as before, so an idempotent replay, which creates nothing, is
    still answered 200 when the tenant is full. The caller is authenticated first, so only the
    tenant itself learns that it is full (and only its own requests make admission count again).

    Any other large body is parsed in a thread, in pieces (FastAPI then finds it parsed): the event
    loop, which the engine shares, keeps answering meanwhile, waiting at most for one piece's C
    step, which holds the GIL (a run's field; a whole 16 MiB json.loads held it 0.03-0.5 s)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def refuse_or_handle(request: Request) -> Response:
            if not is_large(request):
                return await handler(request)
            state = await get_state(request)
            tenant_id = request.path_params.get("tenant_id", "")
            if state.admission.may_be_full(tenant_id):
                (await get_principal(request, state, await bearer(request))).require_tenant(tenant_id)
                count = functools.partial(count_pending, state.pool, tenant_id)
                refusal = await state.admission.known_full(tenant_id, count)
                if refusal is not None:
                    raise refusal
            await _parse_off_the_loop(request)
            return await handler(request)

        return refuse_or_handle


async def _parse_off_the_loop(request: Request) -> None:
    """Reads the body and parses it in a thread, where Starlette's `Request.json` (which FastAPI
    calls) finds it. A body that is not JSON is refused as FastAPI refuses it; anything else the
    parser raises is left for FastAPI to meet again and answer as it always has."""
    body = await request.body()
    try:
        request._json = await asyncio.get_running_loop().run_in_executor(PARSER, loads_in_pieces, body)
    except json.JSONDecodeError:
        raise InvalidInput("request body is not valid JSON", field="body") from None
    except (RecursionError, UnicodeDecodeError):
        pass


def is_large(request: Request) -> bool:
    """Whether the request declares a body of LARGE_BODY_BYTES or more."""
    declared = request.headers.get("content-length", "")
    return declared.isdigit() and int(declared) >= LARGE_BODY_BYTES
