"""Bar geometry for the Overview's SVG charts: attributes, not inline styles, so the strict CSP
holds and the page needs no script to draw."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    label: str


def columns(values: list[int], labels: list[str], width: float, height: float) -> list[Bar]:
    """One column per value, bottom-aligned, scaled to the largest (a zero is a 1-pixel stub)."""
    top = max(values, default=0) or 1
    step = width / max(len(values), 1)
    bars = []
    for i, (value, label) in enumerate(zip(values, labels, strict=True)):
        h = max(height * value / top, 1.0)
        bars.append(Bar(i * step, height - h, max(step - 1, 1.0), h, value, label))
    return bars


def rows(values: list[int], labels: list[str], width: float, row_height: float) -> list[Bar]:
    """One horizontal bar per value, scaled to the largest."""
    top = max(values, default=0) or 1
    return [
        Bar(0, i * row_height, max(width * value / top, 1.0), row_height - 4, value, label)
        for i, (value, label) in enumerate(zip(values, labels, strict=True))
    ]
