"""Groups under faults: each batch the victim submits ahead is a group whose completion submits one
run of COMPLETION_JOB. Whatever the harness kills, crashes or freezes, every group the API answered
for must be in the database, complete, and fire exactly once: one completion run whatever its key
(the runs of COMPLETION_JOB whose payload names the group are counted, so a second firing under
another key is seen too), the one the group names and keyed `group:<id>`, and it succeeds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.faults.report import Report

COMPLETION_JOB = "tally"  # a noop job of the victim's tenant; its runs are not victim runs
COMPLETION_JOB_BODY = {"target": {"type": "noop"}, "max_attempts": 25, "backoff_seconds": 0.2}


@dataclass(frozen=True)
class GroupOutcome:
    id: str
    total: int
    ended: int  # the group's ended counters, summed
    completed: bool
    fired: bool
    made: int  # runs of COMPLETION_JOB whose payload names the group: must be exactly 1
    named: bool  # the group's completion_run_id is one of them, keyed `group:<id>`
    status: str | None  # that run's status


GATHER = """
SELECT g.id::text AS id, g.total, g.succeeded + g.failed + g.cancelled + g.expired AS ended,
       g.completed_at IS NOT NULL AS completed, g.fired_at IS NOT NULL AS fired,
       (SELECT count(*) FROM job_runs r WHERE r.tenant_id = g.tenant_id AND r.job = $2
                                          AND r.payload -> 'group' ->> 'id' = g.id::text) AS made,
       EXISTS (SELECT 1 FROM job_runs r WHERE r.tenant_id = g.tenant_id AND r.job = $2
                                          AND r.payload -> 'group' ->> 'id' = g.id::text
                                          AND r.id = g.completion_run_id
                                          AND r.idempotency_key = 'group:' || g.id) AS named,
       (SELECT r.status FROM job_runs r WHERE r.id = g.completion_run_id) AS status
FROM run_groups g WHERE g.tenant_id = $1 ORDER BY g.created_at
"""


async def gather(fetch: Callable[..., Awaitable[Sequence[Any]]], tenant: str) -> list[GroupOutcome]:
    rows = await fetch(GATHER, tenant, COMPLETION_JOB)
    return [
        GroupOutcome(
            r["id"],
            r["total"],
            r["ended"],
            r["completed"],
            r["fired"],
            r["made"],
            bool(r["named"]),
            r["status"],
        )
        for r in rows
    ]


def each_group_fires_once(r: Report) -> list[str]:
    """Every group the victim was answered for is in the database; each completed once all its runs
    ended, and fired exactly one completion run, which succeeded."""
    out = []
    seen = {g.id for g in r.outcome.groups}
    missing = [g for g in r.outcome.groups_submitted if g not in seen]
    if missing:
        out.append(f"{len(missing)} groups the API answered for are not in the database (e.g. {missing[:3]})")
    if not r.outcome.groups_submitted:
        out.append("the victim submitted no group: the groups' check saw nothing")
    for g in r.outcome.groups:
        if not g.completed or g.ended != g.total:
            out.append(f"group {g.id}: {g.ended} of {g.total} runs counted ended, completed {g.completed}")
        elif not g.fired or g.made != 1 or not g.named or g.status != "succeeded":
            out.append(
                f"group {g.id}: fired {g.fired}, {g.made} completion runs (must be 1), "
                f"named {g.named}, status {g.status}"
            )
    return out


def render(groups: Sequence[GroupOutcome]) -> str:
    once = sum(1 for g in groups if g.fired and g.made == 1 and g.status == "succeeded")
    return f"{len(groups)}, {once} completed into exactly one succeeded run"
