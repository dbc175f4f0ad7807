"""The dependency fields of a run's submission and of the run (docs/dependencies.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.services.dependencies import MAX_PARENTS

# A ref names an item within its batch; a parent is an earlier item's ref or a run's id. Printable
# ASCII without spaces or commas, so either is safe in a path, a log line and an error's detail.
REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
Ref = Annotated[str, Field(min_length=1, max_length=64, pattern=REF_PATTERN)]

RefField = Annotated[
    Ref | None,
    Field(
        description="A name for this item within its batch, so that later items can name it in "
        "`depends_on` (unique within the batch, not a run id). Not stored beyond the edge: a dependent "
        "that passes results receives this parent's result under it.",
    ),
]
DependsOnField = Annotated[
    list[Ref] | None,
    Field(
        max_length=MAX_PARENTS,
        description=f"At most {MAX_PARENTS} parents: ids of runs of this tenant, or refs of EARLIER items "
        "of the same batch. The run is held (`held: dependencies`) until every parent has succeeded.",
    ),
]
OnParentFailureField = Annotated[
    Literal["cancel", "run"],
    Field(
        description="When a parent ends failed, cancelled or expired: `cancel` this run (and, "
        "transitively, its own dependents), or `run` it once every parent has ended.",
    ),
]
PassResultsField = Annotated[
    bool,
    Field(
        description="Deliver each parent's result beside the payload, under `parents` (docs/dependencies.md)."
    ),
]
