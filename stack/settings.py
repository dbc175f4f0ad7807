"""Settings with names of their own (JetStream stream, subjects and consumer, lease owner), so that
nothing collides with other users of the same servers, and the environment that makes a
`scheduler` subprocess read exactly these settings."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from typing import Any

from app.config import Settings


def isolated_settings(
    *,
    database_url: str | None,
    nats_url: str,
    redis_url: str,
    admin_token: str,
    prefix: str,
    **overrides: Any,
) -> Settings:
    uid = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "database_url": database_url,
        "nats_url": nats_url,
        "redis_url": redis_url,
        "admin_token": admin_token,
        "allow_private_targets": True,  # receivers run on 127.0.0.1
        "stream": f"{prefix.upper()}_{uid}",
        "subject_prefix": f"{prefix}_{uid}",
        "consumer": f"{prefix}_workers_{uid}",
        "owner": f"{prefix}-{uid}",
    }
    values.update(overrides)
    return Settings(**values)


def process_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a `scheduler` subprocess use these settings (nothing inherited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"SCHEDULER_{name.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def scheduler_command() -> list[str]:
    """The installed `scheduler` script beside this interpreter, else `python -m app.cli`."""
    script = shutil.which("scheduler", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "app.cli"]
