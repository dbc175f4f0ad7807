"""The one base of the settings' groups: each field is read from `SCHEDULER_<NAME>`, and its docstring is
its description (docs/configuration.md)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class SettingsGroup(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCHEDULER_", extra="ignore", use_attribute_docstrings=True)
