"""The Overview's bar geometry (SVG attributes, drawn without script or inline style)."""

from __future__ import annotations

from app.ui.charts import columns, rows


def test_columns_are_bottom_aligned_and_scaled_to_the_largest() -> None:
    bars = columns([0, 5, 10], ["a", "b", "c"], width=300, height=100)
    assert [b.height for b in bars] == [1.0, 50.0, 100.0]  # a zero is a 1-pixel stub, still visible
    assert all(b.y + b.height == 100 for b in bars)
    assert [b.x for b in bars] == [0, 100, 200] and all(b.width == 99 for b in bars)


def test_all_zero_or_no_values_draw_stubs_not_a_division_by_zero() -> None:
    assert [b.height for b in columns([0, 0], ["a", "b"], 10, 10)] == [1.0, 1.0]
    assert columns([], [], 10, 10) == []
    assert [b.width for b in rows([0, 0], ["x", "y"], 400, 24)] == [1.0, 1.0]


def test_rows_are_stacked_and_scaled_to_the_largest() -> None:
    bars = rows([2, 8], ["pending", "succeeded"], width=400, row_height=24)
    assert [(b.y, b.width, b.label) for b in bars] == [(0, 100.0, "pending"), (24, 400.0, "succeeded")]
