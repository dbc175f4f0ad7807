"""What schedctl prints: the API's objects as JSON (`--output json`), or a table for people."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from scheduler_client.generated.models import ApiKey, Job, Run

# A listing's columns per kind of object; one object is shown whole, a field a line.
COLUMNS: dict[type, list[str]] = {
    Run: ["id", "job", "status", "attempt", "scheduled_at", "finished_at"],
    Job: ["name", "schedule", "paused", "next_fire_at"],
    ApiKey: ["key_id", "created_at", "revoked_at"],
}
MAX_CELL = 60


def as_json(value: Any) -> Any:
    """A model (or a list of them) as the API wrote it."""
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value.to_dict() if hasattr(value, "to_dict") else value


def _cell(value: Any, limit: int | None = MAX_CELL) -> str:
    text = "-" if value is None else value if isinstance(value, str) else json.dumps(value)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out
        )


def show(value: Any, output: str, out: TextIO) -> None:
    if value is None:  # a 204: nothing to show
        return
    if output == "json":
        print(json.dumps(as_json(value), indent=2), file=out)
    elif isinstance(value, list):
        columns = COLUMNS[type(value[0])] if value else []
        if columns:
            _table([columns, *[[_cell(as_json(v).get(c)) for c in columns] for v in value]], out)
    else:
        _table([[name, _cell(v, limit=None)] for name, v in as_json(value).items()], out)
