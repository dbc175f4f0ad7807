"""The dashboard's actions in chromium: bulk-retry the failures of a job (the count, the confirmation,
then the runs turn succeeded), pause a job to see its runs held, then resume it, and a read-only key
shown no action at all."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.browser.conftest import Stack, failed_runs, sign_in
from tests.support import ADMIN_TOKEN, bearer, put_job, run_reaching, submit_run


async def test_bulk_retry_the_failures_of_a_job(page: Page, stack: Stack) -> None:
    error = "HTTP 502: bad gateway (bulk retry test)"
    failed = await failed_runs(stack, 4, "hello", error)
    await sign_in(page, stack.acme["key"])
    await page.goto("/ui/failures")
    group = page.locator("main tbody tr", has_text=error)
    await expect(group).to_contain_text("4")
    await group.get_by_role("link", name="Retry…").click()
    await expect(page.locator("#confirm-question")).to_contain_text("Retry 4 failed runs of job hello?")
    await page.get_by_role("button", name="Yes, retry 4 runs").click()
    await expect(page.locator("#bulk-outcome")).to_have_text("Bulk retry: 4 runs matched, 4 retried.")
    for run in failed:  # pending again, then taken by the stack's engine and worker
        await run_reaching(stack.api, str(run["id"]), stack.acme, {"succeeded"}, timeout=60)
    await page.goto("/ui/runs?job=hello&status=succeeded")
    for run in failed:
        await expect(page.locator(f'tr[data-run="{run["id"]}"] .badge')).to_have_text("succeeded")


async def test_pause_a_job_and_see_its_runs_held(page: Page, stack: Stack) -> None:
    await put_job(stack.api, "acme", "batch", stack.acme)
    await sign_in(page, stack.acme["key"])
    await page.goto("/ui/jobs")
    row = page.locator('tr[data-job="batch"]')
    await expect(row).to_contain_text("0 in flight")
    await row.get_by_role("button", name="Pause").click()
    await expect(row.locator("[data-paused]")).to_have_text("paused")
    runs = [str((await submit_run(stack.api, "acme", stack.acme, job="batch"))["id"]) for _ in range(3)]

    await page.goto("/ui")
    await expect(page.locator('[data-held="paused"]')).to_have_text("paused 3")
    await page.goto(f"/ui/runs/{runs[0]}")
    await expect(page.locator("#run-badge")).to_have_text("pending")
    await expect(page.locator("#why-late")).to_contain_text("Held: its job is paused", timeout=10_000)

    await page.goto("/ui/jobs")
    await row.get_by_role("button", name="Resume").click()
    await expect(row.get_by_role("button", name="Pause")).to_be_visible()
    for run_id in runs:
        await run_reaching(stack.api, run_id, stack.acme, {"succeeded"}, timeout=60)
    await page.goto("/ui")
    await expect(page.locator('[data-held="paused"]')).to_have_text(re.compile(r"^paused 0$"))


async def test_a_read_only_key_sees_no_action(page: Page, stack: Stack) -> None:
    """Signed in with a key holding runs:read and jobs:read, every page shows, and no form posts but
    Sign out's: no trigger, pause, edit, cancel, reschedule or bulk action."""
    created = await stack.api.post(
        "/tenants/acme/keys", json={"scopes": ["runs:read", "jobs:read"]}, headers=bearer(ADMIN_TOKEN)
    )
    assert created.status_code == 201, created.text
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    run = await submit_run(stack.api, "acme", stack.acme, job="hello", scheduled_at=later)
    await failed_runs(stack, 1, "hello", "HTTP 500 (read-only test)")
    await sign_in(page, created.json()["api_key"])
    for url in ("/ui", "/ui/runs", f"/ui/runs/{run['id']}", "/ui/jobs", "/ui/jobs/hello", "/ui/failures"):
        await page.goto(url)
        # A filter's button (a GET) is no action; every post is one, but Sign out.
        await expect(page.locator('form[method="post"] button')).to_have_count(1)
        await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await page.goto("/ui/jobs/hello")
    await expect(page.locator("#definition")).to_contain_text('"type": "noop"')
    await page.goto("/ui/failures")
    await expect(page.get_by_role("link", name="Retry…")).to_have_count(0)
