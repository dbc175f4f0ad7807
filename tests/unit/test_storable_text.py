"""Text from outside on its way into Postgres (app/services/validation.storable_text)."""

from __future__ import annotations

from app.services.validation import storable_text


def test_nul_lone_surrogates_and_invalid_utf8_become_replacement_characters() -> None:
    assert storable_text("bad\x00body", 100) == "bad\ufffdbody"
    assert storable_text("a\ud800b\udfffc", 100) == "a\ufffdb\ufffdc"
    assert storable_text(b"ok \xff\xfe \xed\xa0\x80 \x00", 100) == "ok \ufffd\ufffd \ufffd\ufffd\ufffd \ufffd"
    assert storable_text("ünïcødé 🙂", 100) == "ünïcødé 🙂"


def test_bounded_in_characters() -> None:
    assert storable_text("x" * 10_000, 300) == "x" * 300
    assert storable_text(b"\xc3\xbc" * 10_000, 300) == "ü" * 300
    assert len(storable_text(b"\xff" * 10_000, 300)) == 300
