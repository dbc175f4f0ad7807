"""The peers `bench peers` drains the same no-op jobs with, each as a subprocess of its own on a
fresh database (Celery: a fresh Redis): pgqueuer, procrastinate and Celery (the `peers` extra; the
`dev` extra includes it), graphile-worker and pg-boss (Node: bench/peers_node, installed by the bench
with npm, bench.peers.node). The scheduler never imports them. Each Python one here is run as
`python -m bench.peers.<name> URL [options]`, prints `ready` once it consumes, and runs until
SIGTERM; bench.peers.sides drives them all."""

from __future__ import annotations

import importlib.util

# Without these, `bench all` skips `peers`; Celery alone missing skips only the Celery side.
PACKAGES = ("pgqueuer", "procrastinate")


def missing_peers() -> list[str]:
    """The peers' packages this environment lacks (`pip install -e ".[peers]"` brings them)."""
    return [name for name in PACKAGES if importlib.util.find_spec(name) is None]
