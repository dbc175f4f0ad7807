"""A scenario's result: environment, workload, figures, targets and caveats — printed, and saved as
bench/results/<scenario>-<UTC timestamp>.json and .md, plus a PNG where a chart says it better."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.env import describe

Draw = Callable[[Any], None]  # draws on a matplotlib Figure


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Target:
    name: str
    value: float
    op: str  # ">=" or "<="
    goal: float
    unit: str

    @property
    def met(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value >= self.goal if self.op == ">=" else self.value <= self.goal

    def line(self) -> str:
        op = "≥" if self.op == ">=" else "≤"
        verdict = "met" if self.met else "MISSED"
        return (
            f"{self.name}: {fmt(self.value)}{self.unit} (target {op} {fmt(self.goal)}{self.unit}) — {verdict}"
        )


def fmt(value: Any) -> str:
    if value is None:  # a cell with nothing to say
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3f}"
    return str(value)


@dataclass
class Report:
    scenario: str
    smoke: bool
    env: dict[str, Any]
    workload: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_mean: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # raw figures, saved in the JSON only
    draw: Draw | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.tables.append(Table(title, columns, rows))

    def target(self, name: str, value: float, op: str, goal: float, unit: str = "") -> None:
        self.targets.append(Target(name, value, op, goal, unit))

    # ── rendering ──

    def text(self) -> str:
        out = [f"== {self.scenario}{' (smoke)' if self.smoke else ''}: results"]
        out += [f"workload: {self._workload_line()}"]
        for t in self.tables:
            out += ["", t.title, *_text_table(t)]
        if self.targets:
            out += ["", "Targets:"] + [f"  {t.line()}" for t in self.targets]
        if self.notes:
            out += ["", "Notes:"] + [f"  - {n}" for n in self.notes]
        out += ["", "What these numbers do NOT mean:", _wrap(self.not_mean, "  ")]
        return "\n".join(out)

    def markdown(self, png: str | None) -> str:
        out = [
            f"# bench `{self.scenario}`{' (smoke)' if self.smoke else ''}"
            f" — {self.started_at:%Y-%m-%d %H:%M:%S} UTC",
            "",
        ]
        out += ["## Environment", ""] + [f"- {line}" for line in describe(self.env)] + [""]
        out += ["## Workload", ""] + [f"- {k}: {fmt(v)}" for k, v in self.workload.items()] + [""]
        out += ["## Figures", ""]
        for t in self.tables:
            out += [f"### {t.title}", "", "| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
            out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in t.rows]
            out += [""]
        if png:
            out += [f"![{self.scenario}]({png})", ""]
        if self.targets:
            out += ["## Targets", ""] + [f"- {t.line()}" for t in self.targets] + [""]
        if self.notes:
            out += ["## Notes", ""] + [f"- {n}" for n in self.notes] + [""]
        out += ["## What these numbers do NOT mean", "", self.not_mean, ""]
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "smoke": self.smoke,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "environment": self.env,
            "workload": self.workload,
            "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables],
            "targets": [
                {"name": t.name, "value": t.value, "op": t.op, "goal": t.goal, "unit": t.unit, "met": t.met}
                for t in self.targets
            ],
            "notes": self.notes,
            "not_mean": self.not_mean,
            "data": self.data,
        }

    def write(self, out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = out_dir / f"{self.scenario}-{self.started_at:%Y%m%dT%H%M%SZ}"
        written = []
        png: Path | None = None
        if self.draw is not None:
            png = stem.with_suffix(".png")
            if _save_chart(self.draw, png):
                written.append(png)
            else:
                png = None
                print("chart skipped: matplotlib is not installed (pip install -e '.[dev]')", flush=True)
        json_path = stem.with_suffix(".json")
        json_path.write_text(json.dumps(_finite(self.as_json()), indent=2, default=str) + "\n")
        md_path = stem.with_suffix(".md")
        md_path.write_text(self.markdown(png.name if png else None))
        return [json_path, md_path, *written]

    def _workload_line(self) -> str:
        return ", ".join(f"{k}={fmt(v)}" for k, v in self.workload.items())


def _save_chart(draw: Draw, path: Path) -> bool:
    """Draws and saves the chart; False when matplotlib (the dev extra) is not installed."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig = plt.figure(figsize=(10, 4.8), dpi=100)
    try:
        draw(fig)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return True


def _text_table(t: Table) -> list[str]:
    cells = [t.columns] + [[fmt(v) for v in row] for row in t.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(t.columns))]
    lines = [
        "  "
        + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in cells
    ]
    lines.insert(1, "  " + "  ".join("-" * w for w in widths))
    return lines


def _wrap(text: str, indent: str) -> str:
    import textwrap

    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent)


def _finite(value: Any) -> Any:
    """JSON has no NaN: a figure that could not be measured is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
