"""The peers `bench peers` drains the same no-op jobs with, each as a subprocess of its own on a
fresh database: pgqueuer (tuned as its docs advise: batches and several consumers) and procrastinate
(its defaults). Both come with the `peers` extra (the `dev` extra includes it); the scheduler never
imports them. Each module here is run as `python -m bench.peers.<name> DSN [options]`, prints `ready` once
it listens, and runs until SIGTERM."""

from __future__ import annotations

import importlib.util

PACKAGES = ("pgqueuer", "procrastinate")


def missing_peers() -> list[str]:
    """The peers' packages this environment lacks (`pip install -e ".[peers]"` brings them)."""
    return [name for name in PACKAGES if importlib.util.find_spec(name) is None]
