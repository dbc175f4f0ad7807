"""Fixtures over real services (tests/support.py over stack/). No mocks of Postgres, NATS or Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx
import pytest
import pytest_asyncio

from app.config import Settings
from app.db.connection import create_pool
from stack import databases
from tests.support import (
    ADMIN_TOKEN,
    Services,
    clone_database,
    create_template,
    create_tenant,
    delete_stream,
    drop_database,
    make_settings,
    running_api,
    start_services,
    stop_services,
    with_database,
)


def _timeout(item: pytest.Item) -> float | None:
    mark = item.get_closest_marker("timeout")
    if mark is None:
        return None
    return float(mark.args[0] if mark.args else mark.kwargs.get("timeout", 0))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite runs on parallel workers (pyproject's addopts: `-n 4 --dist loadgroup`), each with
    servers of its own (`services` is per worker process), and a worker takes the next test in this
    order. First the tests marked `bounded_under_load`, which hold a latency bound while they fault
    servers and processes of their own. Then, once a quarter of the others have been handed out, the
    tests that set a timeout of their own (`@pytest.mark.timeout(…)`: minutes, each starting several
    processes and servers), the longest first: early enough that none keeps the suite waiting at its
    end, late enough not to crowd the first ones' fault window on two cores. Then the rest of the
    others, in collection order."""
    first = [i for i in items if i.get_closest_marker("bounded_under_load")]
    long = sorted(
        (i for i in items if _timeout(i) is not None and i not in first), key=lambda i: -(_timeout(i) or 0)
    )
    rest = [i for i in items if _timeout(i) is None and i not in first]
    quarter = len(rest) // 4
    items[:] = [*first, *rest[:quarter], *long, *rest[quarter:]]


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    s = start_services()
    yield s
    stop_services(s)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def template(services: Services) -> AsyncIterator[str]:
    name = await create_template(services)
    yield name
    await drop_database(services, name)


@pytest_asyncio.fixture(loop_scope="session")
async def database(services: Services, template: str) -> AsyncIterator[str]:
    name = await clone_database(services, template)
    yield name
    await drop_database(services, name)


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_database(services: Services) -> AsyncIterator[str]:
    """The URL of an empty database, not a clone of the migrated template."""
    name = await databases.create_database(services.postgres_url, f"m_{uuid.uuid4().hex[:16]}")
    yield with_database(services.postgres_url, name)
    await drop_database(services, name)


@pytest_asyncio.fixture(loop_scope="session")
async def settings(services: Services, database: str) -> AsyncIterator[Settings]:
    s = make_settings(services, database)
    yield s
    await delete_stream(s)


@pytest_asyncio.fixture(loop_scope="session")
async def pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    assert settings.database_url
    p = await create_pool(settings.database_url, max_size=5)
    yield p
    await p.close()


@pytest_asyncio.fixture(loop_scope="session")
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real app (engine off) over real HTTP."""
    async with running_api(settings.model_copy(update={"engine": "off"})) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            yield client


@pytest_asyncio.fixture(loop_scope="session")
async def tenant(api: httpx.AsyncClient) -> dict[str, str]:
    """A tenant `acme` with a job `hello` (noop); returns id, api_key, signing_secret and auth headers."""
    created = await create_tenant(api, "acme")
    headers = {"Authorization": f"Bearer {created['api_key']}"}
    r = await api.put("/tenants/acme/jobs/hello", json={"target": {"type": "noop"}}, headers=headers)
    assert r.status_code == 201, r.text
    return {**created, "auth": headers}  # type: ignore[dict-item]


@pytest.fixture
def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
