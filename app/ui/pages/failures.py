"""The Failures page (failed runs grouped by job and error) and the confirmation of a bulk action on
a group, whose runs failure_filter names for both the count here and the action itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated
from uuid import UUID

from fastapi import Query, Request, Response

from app.api.deps import StateDep
from app.domain import CANCELLABLE, RunRecord, RunStatus
from app.services import dashboard
from app.services import runs as run_service
from app.services.run_actions import Action, RunFilter, count_matching
from app.ui.render import page, ui_router
from app.ui.scope import DaysQuery, TenantQuery, scoped_tenant, scoped_tenant_of_run
from app.ui.sessions import SessionDep

router = ui_router()
BULK_LIMIT = 10_000  # a bulk action's runs per request, the API's own most (RunAction.limit)


def failure_filter(record: RunRecord, action: Action, days: int) -> RunFilter:
    """The runs a Failures group's bulk action takes: those of the group's job and error scheduled
    in the page's last `days` days that the action applies to. A retry takes the failed ones; a
    cancel, the pending, dispatched or running ones still retrying after that error."""
    return RunFilter(
        statuses=[RunStatus.FAILED] if action == "retry" else list(CANCELLABLE),
        job=record["job"],
        error=(record["last_error"],),
        scheduled_after=datetime.now(UTC) - timedelta(days=days),
    )


@router.get("/failures")
async def failures(
    request: Request,
    state: StateDep,
    session: SessionDep,
    tenant: TenantQuery = None,
    days: DaysQuery = 1,
    done: Annotated[Action | None, Query()] = None,
    matched: Annotated[int | None, Query(ge=0)] = None,
    changed: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """Failed runs of the last `days` days grouped by job and error, most frequent first; after a
    bulk action (`done`), what it matched and changed."""
    tenant_id = scoped_tenant(session, tenant)
    groups = await dashboard.failure_groups(state.pool, tenant_id, days, limit=100)
    return page(
        request,
        "failures.html",
        session=session,
        tenant=tenant_id,
        admin_tenant=tenant,
        groups=groups,
        days=days,
        done=done,
        matched=matched,
        changed=changed,
        bulk_limit=BULK_LIMIT,
    )


@router.get("/failures/confirm")
async def confirm_failures(
    request: Request,
    state: StateDep,
    session: SessionDep,
    run_id: Annotated[UUID, Query(alias="run")],
    action: Annotated[Action, Query()],
    tenant: TenantQuery = None,
    days: DaysQuery = 1,
) -> Response:
    """The confirmation of a bulk action on a Failures group, named by one of its runs: how many
    runs it would take, before anything changes."""
    record = await run_service.get_run(state.pool, run_id, scoped_tenant_of_run(session, tenant))
    count = await count_matching(
        state.pool, record["tenant_id"], failure_filter(record, action, days), BULK_LIMIT
    )
    return page(
        request,
        "confirm.html",
        session=session,
        tenant=record["tenant_id"],
        admin_tenant=tenant,
        run=record,
        action=action,
        days=days,
        count=count,
        bulk_limit=BULK_LIMIT,
    )
