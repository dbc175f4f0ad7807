"""The API's hint of which jobs have a unique or debounce rule: learned, forgotten, bounded."""

from __future__ import annotations

from app.services.dedupe import RuledJobs


def test_learns_forgets_and_keeps_the_most_recent() -> None:
    hint = RuledJobs(size=2)
    assert not hint.any_of("t", {"a"})
    hint.saw("t", {"a", "b"}, ruled={"a"})
    assert hint.any_of("t", {"a", "x"}) and not hint.any_of("t", {"b"}) and not hint.any_of("u", {"a"})
    hint.saw("t", {"a"}, ruled=set())  # its rule went
    assert not hint.any_of("t", {"a"})
    for job in ("c", "d", "e"):
        hint.saw("t", {job}, ruled={job})
    assert not hint.any_of("t", {"c"}) and hint.any_of("t", {"d"}) and hint.any_of("t", {"e"})
