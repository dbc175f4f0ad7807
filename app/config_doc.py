"""docs/configuration.md, written from `Settings`: every variable, its default and what it does,
so the page cannot miss one (tests/unit/test_config_doc.py). Regenerate: python -m app.config_doc"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_core import PydanticUndefined

from app.config import Settings

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

_HEAD = """\
# Configuration

Every process reads environment variables with the prefix `SCHEDULER_` (`SCHEDULER_DATABASE_URL`, …);
`scheduler COMMAND --help` says which ones a command reads. This page is written from the code
(`app/config/`; regenerate with `python -m app.config_doc`), so it lists every one.

Tracing export is opt-in with the standard `OTEL_EXPORTER_OTLP_ENDPOINT`, over
`OTEL_EXPORTER_OTLP_PROTOCOL` `grpc` (default) or `http/protobuf`; W3C trace context is always
propagated.

| variable | default | meaning |
|---|---|---|
"""


def _default(name: str) -> str:
    field = Settings.model_fields[name]
    if field.default is PydanticUndefined or field.default is None:
        return "—"
    value = field.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def render() -> str:
    rows = []
    for name, field in Settings.model_fields.items():
        meaning = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `{name.upper()}` | {_default(name)} | {meaning} |")
    return _HEAD + "\n".join(rows) + "\n"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH
    path.write_text(render())


if __name__ == "__main__":
    main()
