"""What schedctl prints: the API's objects as JSON (`--output json`), or a table for people."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

# A listing's columns by the kind of its items; one object is shown whole, a field a line.
COLUMNS = {
    "runs": ["id", "job", "status", "attempt", "scheduled_at", "finished_at"],
    "jobs": ["name", "schedule", "paused", "next_fire_at"],
    "keys": ["key_id", "created_at", "revoked_at"],
    "groups": ["id", "name", "total", "pending", "completed_at", "fired_at"],
}
MAX_CELL = 60


def _cell(value: Any, limit: int | None = MAX_CELL) -> str:
    text = "-" if value is None else value if isinstance(value, str) else json.dumps(value)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip(), file=out)


def show(answer: Any, listing: str | None, output: str, out: TextIO) -> None:
    """The API's `answer` as it came (JSON), or as a table: a `listing`'s items a row each, under
    the columns of their kind; one object a field a line."""
    if output == "json":
        print(json.dumps(answer, indent=2), file=out)
    elif listing is not None:
        columns = COLUMNS[listing]
        _table([columns, *[[_cell(item.get(c)) for c in columns] for item in answer]], out)
    else:
        _table([[name, _cell(value, limit=None)] for name, value in answer.items()], out)
