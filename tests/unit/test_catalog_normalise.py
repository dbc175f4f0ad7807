"""A function body is compared without its comments and with whitespace collapsed, never inside literals."""

from __future__ import annotations

from app.db.catalog import normalise_sql


def test_comments_and_whitespace_go() -> None:
    assert normalise_sql("SELECT  1 -- why\n  /* block */ FROM\n\tx") == "SELECT 1 FROM x"


def test_literals_stay_as_written() -> None:
    source = "SELECT '--  not a comment', \"a  b\", $x$ keep  -- this $x$ -- gone"
    assert normalise_sql(source) == "SELECT '--  not a comment', \"a  b\", $x$ keep  -- this $x$"


def test_a_changed_constant_differs() -> None:
    assert normalise_sql("SELECT 0") != normalise_sql("SELECT 1")
