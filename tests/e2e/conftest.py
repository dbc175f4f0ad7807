"""The end-to-end stack: the real API (with its engine) in this process, workers as subprocesses,
a local webhook receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest_asyncio

from app.config import Settings
from tests.processes import Process, processes
from tests.receiver import Receiver, running_receiver
from tests.support import create_tenant, run_reaching, running_api


@pytest_asyncio.fixture(loop_scope="session")
async def e2e_settings(settings: Settings) -> Settings:
    # Short leases so a lost worker is rescued within seconds.
    return settings.model_copy(
        update={
            "lease_seconds": 2.0,
            "ack_wait_seconds": 3.0,
            "reap_interval_seconds": 0.3,
            "worker_grace_seconds": 5,
        }
    )


@pytest_asyncio.fixture(loop_scope="session")
async def stack(e2e_settings: Settings, tmp_path: Path) -> AsyncIterator[dict]:
    async with (
        running_api(e2e_settings) as base,
        running_receiver() as receiver,
        processes(e2e_settings, tmp_path) as spawn,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        created = await create_tenant(client, "acme")
        yield {
            "api": client,
            "auth": {"Authorization": f"Bearer {created['api_key']}"},
            "secret": created["signing_secret"],
            "receiver": receiver,
            "spawn": spawn,
        }


async def wait_for(
    api: httpx.AsyncClient, run_id: str, auth: dict, statuses: set[str], timeout: float = 30
) -> dict:
    return await run_reaching(api, run_id, auth, statuses, timeout)


Spawn = Callable[..., Process]
__all__ = ["Receiver", "Spawn", "wait_for"]
