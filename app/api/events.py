"""Events (fan-out): one POST submits a run of every job of the tenant subscribed to the event."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Path, Request, Response

from app.api.deps import PrincipalDep, StateDep
from app.api.large_bodies import LargeBodiesOffTheLoop
from app.api.routers import api_router
from app.api.schemas.common import TENANT_ID_PATTERN, error_responses, json_response
from app.api.schemas.events import EventPublish, EventRuns
from app.api.schemas.runs import IdempotencyKey
from app.services.events import Publication

router = api_router(tags=["events"], route_class=LargeBodiesOffTheLoop)
TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]
# Checked in the route, not by the path's pattern: a bad name is a 422 naming `name`.
EventNamePath = Annotated[str, Path(max_length=1024, examples=["order.placed"])]


@router.post(
    "/tenants/{tenant_id}/events/{name}",
    status_code=201,
    response_model=EventRuns,
    responses=error_responses(401, 403, 404, 409, 413, 422, 429, success={200: EventRuns}),
)
async def publish_event(
    tenant_id: TenantIdPath,
    name: EventNamePath,
    body: EventPublish,
    request: Request,
    state: StateDep,
    principal: PrincipalDep,
    idempotency_key: Annotated[IdempotencyKey | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    """Submit one run of every job of the tenant subscribed to the event (its `on_events`), all in
    one transaction: all or nothing, under the tenant's backlog quota as one submission of that many
    runs. 201 with the runs made, in job name order; 200 with the same runs when the Idempotency-Key
    was used before with the same body (another body: 422); 200 with no runs when no job subscribes
    (publishing an event nobody listens to is not an error). A paused job's run is made held."""
    principal.require_tenant(tenant_id)
    event = Publication(tenant_id, name, body.payload, idempotency_key, request.headers.get("traceparent"))
    submitted = await state.events.publish(event)
    created = any(s.created for s in submitted)
    return json_response({"runs": [s.run for s in submitted]}, 201 if created else 200)
