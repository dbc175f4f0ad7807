"""Settings, read from `SCHEDULER_*` environment variables. Imports nothing from the app.

`Settings` is every group of them (a process's, an engine's, a worker's, the API's), one object for
every process; each group's fields and the checks and names derived from them live in its module."""

from __future__ import annotations

from functools import lru_cache

from app.config.api import Api
from app.config.engine import Dispatch, Maintenance
from app.config.process import Process, nats_servers
from app.config.worker import Deliveries, Worker

__all__ = ["Settings", "get_settings", "nats_servers"]


# The groups are listed last first: pydantic orders the fields from the last base to the first, and
# docs/configuration.md lists them in that order.
class Settings(Deliveries, Api, Maintenance, Worker, Dispatch, Process):
    data_dir: str = ".scheduler-dev"
    """`scheduler dev` only: where it keeps the embedded servers' data, `admin_token`, `demo_key` and its
    lock.
    """
    log_level: str = "INFO"
    """Log level of every process (`DEBUG`, `INFO`, `WARNING`, `ERROR`); attempts' outcomes are logged in
    `scheduler dev` only.
    """


@lru_cache
def get_settings() -> Settings:
    return Settings()
