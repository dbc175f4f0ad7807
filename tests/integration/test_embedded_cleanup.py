"""The embedded servers a test session starts leave nothing behind: their temp dir (~55 MB of
Postgres and JetStream data) is removed when they stop, and when starting them fails halfway."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from app.dev import EmbeddedNats, EmbeddedRedis
from stack import servers
from tests import support


def _record_roots(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    roots: list[Path] = []
    real = tempfile.mkdtemp

    def mkdtemp(*args: object, **kwargs: object) -> str:
        path = real(*args, **kwargs)  # type: ignore[call-overload]
        roots.append(Path(path))
        return str(path)

    monkeypatch.setattr(servers.tempfile, "mkdtemp", mkdtemp)
    return roots


def test_stopping_embedded_services_removes_their_temp_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    # NATS and Redis embedded (Postgres too where no SCHEDULER_TEST_DATABASE_URL is set).
    monkeypatch.delenv("SCHEDULER_TEST_NATS_URL", raising=False)
    monkeypatch.delenv("SCHEDULER_TEST_REDIS_URL", raising=False)
    services = support.start_services()
    root = services.root
    assert root is not None and (root / "nats").is_dir()
    assert root.name.startswith("scheduler-test-")
    support.stop_services(services)
    assert not root.exists()


def test_a_failed_start_stops_what_started_and_removes_the_temp_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDULER_TEST_NATS_URL", raising=False)
    monkeypatch.delenv("SCHEDULER_TEST_REDIS_URL", raising=False)
    roots = _record_roots(monkeypatch)
    started: list[EmbeddedNats] = []
    real_start = EmbeddedNats.start

    def nats_start(self: EmbeddedNats) -> str:
        started.append(self)
        return real_start(self)

    def redis_start(self: EmbeddedRedis) -> str:
        raise RuntimeError("redis-server did not start")

    monkeypatch.setattr(EmbeddedNats, "start", nats_start)
    monkeypatch.setattr(EmbeddedRedis, "start", redis_start)
    with pytest.raises(RuntimeError, match="redis-server did not start"):
        support.start_services()
    assert len(roots) == 1 and not roots[0].exists()
    assert len(started) == 1 and started[0].proc is None  # the nats-server was stopped
