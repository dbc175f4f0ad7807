"""Settings that only make sense together."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


def test_urgent_only_processes_need_the_urgent_lane() -> None:
    with pytest.raises(ValidationError, match="URGENT_PRIORITY is -1"):
        Settings(lanes="urgent", urgent_priority=-1)
    assert Settings(lanes="normal", urgent_priority=-1).serves("normal")
    assert not Settings(lanes="urgent").serves("normal")
    assert Settings().serves("urgent") and Settings().serves("normal")
