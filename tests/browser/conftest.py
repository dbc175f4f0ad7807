"""The dashboard in a real browser: Debian's chromium (/usr/bin/chromium, which .ci/run installs)
driven by Playwright — never a browser Playwright downloads. One browser for the session, one stack
(API with its engine in this process, a worker subprocess) per module, a fresh context per test."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from app.db.connection import create_pool
from tests import factories
from tests.processes import processes
from tests.support import (
    Services,
    bearer,
    clone_database,
    create_tenant,
    delete_stream,
    drop_database,
    make_settings,
    put_job,
    run_reaching,
    running_api,
    submit_run,
)

CHROMIUM = os.environ.get("SCHEDULER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 800}


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    # No skip when it is missing: CI installs chromium, and a dashboard untested in a browser is a failure.
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)"
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        await launched.close()


@dataclass(frozen=True)
class Stack:
    base: str
    database_url: str
    api: httpx.AsyncClient
    acme: dict[str, str]  # the tenant's API key and auth headers
    beta: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    services: Services, template: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    database = await clone_database(services, template)
    settings = make_settings(services, database)
    try:
        async with (
            running_api(settings) as base,
            processes(settings, tmp_path_factory.mktemp("browser-logs")) as spawn,
            httpx.AsyncClient(base_url=base, timeout=30) as api,
        ):
            spawn("worker")
            tenants = {}
            for name in ("acme", "beta"):
                created = await create_tenant(api, name)
                auth = bearer(created["api_key"])
                await put_job(api, name, "hello", auth)
                tenants[name] = {"key": created["api_key"], **auth}
            # The worker subprocess takes a while to start on a loaded machine: one run through it
            # first, so the tests' timeouts measure the dashboard, not a process starting.
            warm_up = await submit_run(api, "acme", tenants["acme"], job="hello")
            await run_reaching(api, str(warm_up["id"]), tenants["acme"], {"succeeded"}, timeout=120)
            assert settings.database_url
            yield Stack(base, settings.database_url, api, tenants["acme"], tenants["beta"])
    finally:
        await delete_stream(settings)
        await drop_database(services, database)


@pytest_asyncio.fixture(loop_scope="session")
async def context(browser: Browser, stack: Stack) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(base_url=stack.base, viewport=VIEWPORT)
    yield ctx
    await ctx.close()


async def failed_runs(stack: Stack, n: int, job: str, error: str) -> list[asyncpg.Record]:
    """`n` of acme's runs of `job`, failed with `error` after their last attempt (written directly:
    the Failures page's material without waiting out real retries)."""
    pool = await create_pool(stack.database_url, max_size=1)
    try:
        async with pool.acquire() as conn:
            failed = await factories.runs(conn, n, job_name=job, status="failed")
            await conn.execute(
                "UPDATE job_runs SET last_error = $2, finished_at = now(), attempt = max_attempts"
                " WHERE id = ANY($1::uuid[])",
                [r["id"] for r in failed],
                error,
            )
    finally:
        await pool.close()
    return failed


async def sign_in(page: Page, token: str) -> None:
    """The sign-in form, as a person fills it."""
    await page.goto("/ui/login")
    await page.fill("input[name=token]", token)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/ui")


@pytest_asyncio.fixture(loop_scope="session")
async def page(context: BrowserContext) -> AsyncIterator[Page]:
    """A page that fails its test on any console error (a CSP violation is one) or dialog (an alert
    from injected script would be one)."""
    opened = await context.new_page()
    problems: list[str] = []
    opened.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda e: problems.append(str(e)))
    opened.on(
        "dialog", lambda d: (problems.append(f"dialog: {d.message}"), asyncio.ensure_future(d.dismiss()))
    )
    yield opened
    # A 4xx page (404, 401) is logged by chromium as a failed load: expected where a test asks for one.
    assert not [p for p in problems if "server responded with a status of 4" not in p], problems
