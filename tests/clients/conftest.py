"""The client against a live stack: the real API (with its engine) over HTTP on a free port, a
local webhook receiver, and worker subprocesses when a test needs runs to execute. A module's tests
share one stack, each with a tenant of its own.

`client` runs each test once with `Client` (its calls in a thread: the API serves from this
test's event loop) and once with `AsyncClient`, through one interface: `await client.call(name,
...)` and `await client.collect(name, ...)` (a listing, every page)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from scheduler_client import AsyncClient, Client, RetryPolicy

from app.config import Settings
from tests.processes import Process, processes
from tests.receiver import Receiver, running_receiver
from tests.support import (
    ADMIN_TOKEN,
    Services,
    bearer,
    clone_database,
    create_tenant,
    delete_stream,
    drop_database,
    make_settings,
    running_api,
)


@dataclass
class Live:
    """One stack for a module's tests (each test has a tenant of its own: see `account`)."""

    url: str
    settings: Settings
    receiver: Receiver
    admin: httpx.AsyncClient
    spawn: Callable[..., Process]
    workers: list[Process] = field(default_factory=list)

    async def worker(self) -> None:
        """A worker, started once for the module."""
        if not self.workers:
            self.workers.append(self.spawn("worker"))
        await self.workers[0].wait_ready()


@dataclass
class Account:
    """A tenant of its own: its id, key, signing secret and an HTTP client with its key."""

    id: str
    api_key: str
    secret: str
    http: httpx.AsyncClient


@contextlib.asynccontextmanager
async def live_stack(
    services: Services, template: str, log_dir: Path, **overrides: Any
) -> AsyncIterator[Live]:
    """The real API (with its engine) over HTTP, a webhook receiver, and workers on demand, on a
    database of their own."""
    database = await clone_database(services, template)
    settings = make_settings(services, database, signing_secret_cache_seconds=0.5, **overrides)
    try:
        async with (
            running_api(settings) as base,
            running_receiver() as receiver,
            processes(settings, log_dir) as spawn,
            httpx.AsyncClient(base_url=base, timeout=30, headers=bearer(ADMIN_TOKEN)) as admin,
        ):
            yield Live(base, settings, receiver, admin, spawn)
    finally:
        await delete_stream(settings)
        await drop_database(services, database)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def live(
    services: Services, template: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Live]:
    async with live_stack(services, template, tmp_path_factory.mktemp("processes")) as stack:
        yield stack


@contextlib.asynccontextmanager
async def new_account(live: Live) -> AsyncIterator[Account]:
    created = await create_tenant(live.admin, f"t-{uuid.uuid4().hex[:12]}")
    async with httpx.AsyncClient(base_url=live.url, timeout=30, headers=bearer(created["api_key"])) as http:
        yield Account(created["id"], created["api_key"], created["signing_secret"], http)


@pytest_asyncio.fixture(loop_scope="session")
async def account(live: Live) -> AsyncIterator[Account]:
    async with new_account(live) as made:
        yield made


class Calls:
    """One interface over Client and AsyncClient, so each test runs against both."""

    def __init__(self, kind: str, url: str, api_key: str, **options: Any):
        self.kind = kind
        self.sync = Client(url, api_key, **options) if kind == "sync" else None
        self.aio = AsyncClient(url, api_key, **options) if kind == "async" else None

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.sync is not None:
            return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)
        assert self.aio is not None
        return await getattr(self.aio, name)(*args, **kwargs)

    async def collect(self, name: str, *args: Any, **kwargs: Any) -> list[Any]:
        if self.sync is not None:
            sync = self.sync
            return await asyncio.to_thread(lambda: list(getattr(sync, name)(*args, **kwargs)))
        assert self.aio is not None
        return [item async for item in getattr(self.aio, name)(*args, **kwargs)]

    async def close(self) -> None:
        if self.sync is not None:
            self.sync.close()
        if self.aio is not None:
            await self.aio.aclose()


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_asyncio.fixture(loop_scope="session")
async def make_client(kind: str) -> AsyncIterator[Callable[..., Calls]]:
    """`make_client(url, api_key, **options)`: a Client or an AsyncClient (by `kind`), closed after."""
    made: list[Calls] = []

    def make(url: str, api_key: str, **options: Any) -> Calls:
        made.append(Calls(kind, url, api_key, **options))
        return made[-1]

    yield make
    for calls in made:
        await calls.close()


@pytest_asyncio.fixture(loop_scope="session")
async def client(live: Live, account: Account, make_client: Callable[..., Calls]) -> Calls:
    """The account's client. Fast retries: the tests that look at waits set their own policy."""
    return make_client(live.url, account.api_key, retries=RetryPolicy(backoff=0.05))
