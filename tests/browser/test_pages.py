"""Every page at 1280x800 in chromium, with data on it: no console error (a CSP violation would be
one), nothing wider than the window, and the Jobs page's features (next fires in the job's time zone,
limits, trigger now, edit); a held run's page saying why it is late; a bulk retry's confirmation. SCHEDULER_UI_SCREENSHOTS=docs/ui keeps the screenshots the README shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import Stack, failed_runs, sign_in
from tests.support import ADMIN_TOKEN, put_job, run_reaching, submit_run


async def _seed(stack: Stack) -> tuple[str, str]:
    """Runs in every state worth showing; returns a succeeded run's id and a held one's."""
    await put_job(
        stack.api,
        "acme",
        "nightly-report",
        stack.acme,
        target={"type": "python", "handler": "echo"},
        schedule="30 2 * * *",
        timezone="Europe/Berlin",
    )
    # A paused job with a concurrency limit: its run is held, and its page says why it is late.
    await put_job(
        stack.api,
        "acme",
        "sync-accounts",
        stack.acme,
        paused=True,
        priority=2,
        concurrency={"limit": 4, "key": "payload.account"},
    )
    runs = [
        await submit_run(stack.api, "acme", stack.acme, job="hello", payload={"user": n}) for n in range(8)
    ]
    await failed_runs(stack, 5, "send-invoice", "HTTP 503: upstream unavailable")
    held = await submit_run(stack.api, "acme", stack.acme, job="sync-accounts", payload={"account": "a-17"})
    return str(runs[0]["id"]), str(held["id"])


async def _shoot(page: Page, name: str, out: Path) -> None:
    assert await page.evaluate("document.documentElement.scrollWidth") <= 1280, f"{name} overflows the window"
    await page.screenshot(path=out / f"{name}.png")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    wanted = os.environ.get("SCHEDULER_UI_SCREENSHOTS")
    path = Path(wanted) if wanted else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path


async def test_every_page_at_1280x800(page: Page, stack: Stack, out: Path) -> None:
    run_id, held_id = await _seed(stack)
    await run_reaching(stack.api, run_id, stack.acme, {"succeeded"}, timeout=60)
    await sign_in(page, stack.acme["key"])
    await expect(page.locator('text[data-status="succeeded"]')).not_to_have_text("0", timeout=30_000)
    await expect(page.locator('[data-held="paused"]')).to_have_text("paused 1")
    await _shoot(page, "overview", out)
    await page.goto("/ui/runs")
    await expect(page.locator(f'tr[data-run="{run_id}"] .badge')).to_have_text("succeeded", timeout=30_000)
    await _shoot(page, "runs", out)
    await page.goto(f"/ui/runs/{run_id}")
    await expect(page.locator("#payload")).to_contain_text('"user"')
    await expect(page.locator("#attempts tbody tr").first).to_contain_text("succeeded")  # the timeline
    await _shoot(page, "run", out)
    await page.goto(f"/ui/runs/{held_id}")
    await expect(page.locator("#why-late")).to_contain_text("Held: its job is paused")
    await expect(page.locator("#reschedule")).to_be_visible()
    await _shoot(page, "run-late", out)
    await page.goto("/ui/jobs")
    # 02:30 in Berlin is 02:30 CET or CEST, whatever the UTC offset of the day.
    await expect(page.locator('tr[data-job="nightly-report"]')).to_contain_text(" 02:30:00 CE")
    limited = page.locator('tr[data-job="sync-accounts"]')
    await expect(limited).to_contain_text("concurrency 4 per payload.account · 0 in flight")
    await expect(limited.locator("[data-paused]")).to_be_visible()
    await _shoot(page, "jobs", out)
    await page.goto("/ui/failures")
    await expect(page.locator("main table")).to_contain_text("HTTP 503: upstream unavailable")
    await expect(page.locator("main tbody tr").first).to_contain_text("5")
    await _shoot(page, "failures", out)
    await page.locator("main tbody tr").first.get_by_role("link", name="Retry…").click()
    await expect(page.locator("#confirm-question")).to_contain_text(
        "Retry 5 failed runs of job send-invoice?"
    )
    await _shoot(page, "confirm", out)
    await page.goto("/ui/audit")
    await expect(page.locator('#audit tr[data-action="job.put"]').first).to_be_visible()
    await _shoot(page, "audit", out)

    admin = await page.context.browser.new_context(
        base_url=stack.base, viewport={"width": 1280, "height": 800}
    )  # type: ignore[union-attr]
    admin_page = await admin.new_page()
    await sign_in(admin_page, ADMIN_TOKEN)
    await admin_page.goto("/ui/admin")
    await expect(admin_page.locator('tr[data-tenant="acme"]')).to_be_visible()
    assert stack.acme["key"] not in await admin_page.content()
    await _shoot(admin_page, "admin", out)
    await admin.close()


async def test_trigger_now_and_edit_a_job(page: Page, stack: Stack) -> None:
    await sign_in(page, stack.acme["key"])
    await page.goto("/ui/jobs")
    await page.locator('tr[data-job="hello"] button', has_text="Trigger now").click()
    await expect(page.locator("#run-badge")).to_have_text("succeeded", timeout=30_000)

    await page.goto("/ui/jobs/hello")
    await page.fill("textarea[name=definition]", '{"target": {"type": "noop"}, "max_attempts": 0}')
    await page.click("text=Save")
    await expect(page.get_by_role("alert")).to_contain_text("max_attempts")  # the API's own rule
    await page.fill("textarea[name=definition]", '{"target": {"type": "noop"}, "max_attempts": 7}')
    await page.click("text=Save")
    await page.wait_for_url("**/ui/jobs")
    await expect(page.locator('tr[data-job="hello"]')).to_contain_text("7 attempts · backoff")
    job = (await stack.api.get("/tenants/acme/jobs/hello", headers=stack.acme)).json()
    assert job["max_attempts"] == 7
