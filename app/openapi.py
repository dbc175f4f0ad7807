"""Writes openapi.json, the HTTP contract, from the app itself: `python -m app.openapi [PATH]`.

tests/unit/test_openapi.py fails when the committed file and the app disagree; run this after
changing a route or a schema. Building the schema needs no Postgres or NATS."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.config import Settings
from app.main import create_app

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "openapi.json"


def render() -> str:
    """The schema as committed: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(create_app(Settings()).openapi(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DEFAULT_PATH
    path.write_text(render())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
