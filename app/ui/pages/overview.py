"""The Overview page: runs per status, throughput and lag, for one tenant or all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import Request, Response

from app.api.deps import StateDep
from app.services import dashboard
from app.ui import charts
from app.ui.render import page, ui_router
from app.ui.sessions import SessionDep

router = ui_router()


@router.get("")
async def overview(request: Request, state: StateDep, session: SessionDep) -> Response:
    """Runs per status, throughput, due lag, failure ratio, oldest due run: one tenant's, or all."""
    figures = await dashboard.overview(state.pool, session.principal.tenant_id)
    now = datetime.now(UTC)
    minutes = [
        (now - timedelta(minutes=len(figures.per_minute) - 1 - i)).strftime("%H:%M")
        for i in range(len(figures.per_minute))
    ]
    return page(
        request,
        "overview.html",
        session=session,
        figures=figures,
        held_limit=dashboard.HELD_LIMIT,
        status_bars=charts.rows(list(figures.counts.values()), list(figures.counts), 400, 24),
        minute_bars=charts.columns(figures.per_minute, minutes, 600, 120),
    )
