"""The dashboard's flows in chromium: sign in with a tenant key; runs submitted through the API appear
and turn succeeded without a reload; a payload holding <script> stays text; another tenant's run
cannot be opened; a post without the CSRF token is refused; a run is cancelled from its page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.async_api import BrowserContext, Page, expect

from tests.browser.conftest import Stack, sign_in
from tests.support import submit_run


async def test_sign_in_with_a_tenant_key_and_out_again(page: Page, stack: Stack) -> None:
    await sign_in(page, stack.acme["key"])
    await expect(page.locator("header .who")).to_have_text("tenant acme")
    await expect(page.locator("#throughput")).to_contain_text(re.compile(r"runs/(s|min)"))
    await page.click("header button[type=submit]")
    await page.wait_for_url("**/ui/login")
    await page.goto("/ui/runs")
    await expect(page).to_have_url(re.compile(r"/ui/login$"))


async def test_a_wrong_key_is_refused(page: Page, stack: Stack) -> None:
    await page.goto("/ui/login")
    await page.fill("input[name=token]", stack.acme["key"] + "x")
    await page.click("button[type=submit]")
    await expect(page.get_by_role("alert")).to_contain_text("not a valid")


async def test_runs_appear_and_turn_succeeded_without_a_reload(page: Page, stack: Stack) -> None:
    await sign_in(page, stack.acme["key"])
    await page.goto("/ui/runs")
    await page.evaluate("window.notReloaded = true")
    ids = [str((await submit_run(stack.api, "acme", stack.acme, job="hello"))["id"]) for _ in range(3)]
    for run_id in ids:
        badge = page.locator(f'tr[data-run="{run_id}"] .badge')
        await expect(badge).to_have_text("succeeded", timeout=30_000)
    assert await page.evaluate("window.notReloaded") is True  # htmx swapped rows; the page stayed


async def test_a_script_in_a_payload_is_inert_text(page: Page, stack: Stack) -> None:
    evil = "<script>alert('xss')</script><img src=x onerror=\"alert('img')\">"
    run = await submit_run(stack.api, "acme", stack.acme, job="hello", payload={"note": evil})
    await sign_in(page, stack.acme["key"])
    await page.goto(f"/ui/runs/{run['id']}")
    await expect(page.locator("#payload")).to_contain_text("<script>alert('xss')</script>")
    assert await page.locator("#payload script, #payload img").count() == 0  # text, not elements
    # The page fixture fails the test on any dialog: neither alert ran.


async def test_a_tenant_session_cannot_open_another_tenants_run(page: Page, stack: Stack) -> None:
    theirs = await submit_run(stack.api, "beta", stack.beta, job="hello", payload={"secret": "of beta"})
    await sign_in(page, stack.acme["key"])
    response = await page.goto(f"/ui/runs/{theirs['id']}")
    assert response is not None and response.status == 404
    await expect(page.locator("main")).not_to_contain_text("of beta")
    response = await page.goto("/ui/runs?tenant=beta")
    assert response is not None and response.status == 404


async def test_a_post_without_the_csrf_token_is_refused(
    context: BrowserContext, page: Page, stack: Stack
) -> None:
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    run = await submit_run(stack.api, "acme", stack.acme, job="hello", scheduled_at=later)
    await sign_in(page, stack.acme["key"])
    # The browser's own cookies go along (context.request shares them); only the token is missing.
    refused = await context.request.post(f"/ui/runs/{run['id']}/cancel", form={"x": "1"}, max_redirects=0)
    assert refused.status == 403
    assert (await stack.api.get(f"/runs/{run['id']}", headers=stack.acme)).json()["status"] == "pending"
    # The page's own form carries it: the same cancel goes through.
    await page.goto(f"/ui/runs/{run['id']}")
    await page.click("text=Cancel this run")
    await expect(page.locator("#run-badge")).to_have_text("cancelled")
    # Retried from the same page (POST /runs/{id}/retry's service): pending again, due now, under a new
    # epoch, so the stack's engine and worker take it at once; only a retry turns a cancelled run into
    # a succeeded one (a badge showing "pending" may already be gone when the page looks).
    await page.click("text=Retry this run")
    await expect(page.locator("#run-badge")).to_have_text("succeeded", timeout=30_000)
    run_now = (await stack.api.get(f"/runs/{run['id']}", headers=stack.acme)).json()
    assert run_now["status"] == "succeeded" and run_now["epoch"] > run["epoch"]
