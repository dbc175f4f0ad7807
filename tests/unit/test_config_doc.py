"""docs/configuration.md is the Settings' own account of themselves, and every setting says what it does."""

from app.config import Settings
from app.config_doc import DEFAULT_PATH, render


def test_every_setting_says_what_it_does() -> None:
    undescribed = [
        name for name, field in Settings.model_fields.items() if not (field.description or "").strip()
    ]
    assert not undescribed, f"add a docstring under these fields in app/config/: {undescribed}"


def test_configuration_page_matches_the_settings() -> None:
    assert DEFAULT_PATH.read_text() == render(), "stale docs/configuration.md: run python -m app.config_doc"
