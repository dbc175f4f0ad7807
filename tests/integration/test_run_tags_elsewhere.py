"""Tags and metadata beyond the API's runs routes: cron and dashboard runs carry their job's tags,
the callback's body carries both, the dashboard shows them and filters by tag, and docs/runs.md's
example runs as written."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.engine.cron import CronMaterializer
from app.worker.callbacks import CallbackDeliverer
from app.worker.signing_keys import SigningKeys
from tests.receiver import running_receiver
from tests.support import put_job, submit_run
from tests.ui_support import csrf_of, ui_sign_in


async def test_cron_and_dashboard_triggered_runs_carry_the_jobs_tags(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "every-minute", auth, schedule="* * * * *", tags=["cron", "team:ops"])
    await pool.execute(
        "UPDATE jobs SET next_fire_at = date_trunc('minute', now()) - interval '2 minutes' WHERE name = 'every-minute'"
    )
    assert await CronMaterializer(settings, pool).step() >= 1
    cron_runs = await pool.fetch("SELECT id, tags FROM job_runs WHERE origin = 'cron'")
    assert cron_runs and all(r["tags"] == ["cron", "team:ops"] for r in cron_runs)
    tagged = await api.get("/tenants/acme/runs", params={"tag": "cron"}, headers=auth)
    assert {run["id"] for run in tagged.json()["runs"]} == {str(r["id"]) for r in cron_runs}

    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    try:
        csrf = csrf_of((await browser.get("/ui")).text)
        r = await browser.post("/ui/jobs/every-minute/trigger", data={"csrf_token": csrf})
        assert r.status_code == 303, r.text
        run_id = r.headers["location"].rsplit("/", 1)[-1]
    finally:
        await browser.aclose()
    assert (await api.get(f"/runs/{run_id}", headers=auth)).json()["tags"] == ["cron", "team:ops"]


async def test_the_callback_body_carries_tags_and_metadata(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    async with running_receiver() as receiver:
        await put_job(
            api, "acme", "told", auth, tags=["job-tag"], callback={"url": receiver.url, "on": ["cancelled"]}
        )
        run = await submit_run(api, "acme", auth, job="told", tags=["run-tag"], metadata={"order": 42})
        assert (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).status_code == 200
        deliverer = CallbackDeliverer(settings, pool, SigningKeys(pool, 60))
        try:
            assert await deliverer.run_once() == 1
            await asyncio.gather(*deliverer.tasks)
        finally:
            await deliverer.close()
        [call] = receiver.callbacks_for(run["id"])
    data = call.envelope["data"]
    assert data["tags"] == ["job-tag", "run-tag"] and data["metadata"] == {"order": 42}


async def test_the_dashboard_shows_tags_and_metadata_and_filters_runs_by_tag(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    made = [
        await submit_run(api, "acme", auth, job="hello", tags=tags, metadata={"n": n})
        for n, tags in enumerate((["blue"], ["blue", "big"], ["big"]))
    ]
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    try:
        page = await browser.get("/ui/runs", params={"tags": "big, blue"})
        assert page.status_code == 200, page.text
        assert set(re.findall(r'data-run="([^"]+)"', page.text)) == {made[1]["id"]}
        assert 'name="tags" value="big, blue"' in page.text  # the filter stays in the form
        page = await browser.get("/ui/runs", params={"tags": "big"})
        assert set(re.findall(r'data-run="([^"]+)"', page.text)) == {made[1]["id"], made[2]["id"]}
        run_page = (await browser.get(f"/ui/runs/{made[1]['id']}")).text
        assert "/ui/runs?tags=blue" in run_page and "<code>big</code>" in run_page
        shown = re.search(r'<pre id="metadata">(.*?)</pre>', run_page, re.DOTALL)
        assert shown and json.loads(html.unescape(shown.group(1))) == {"n": 1}
        for bad in ("not/ok!", " ".join(f"t{n}" for n in range(11))):
            r = await browser.get("/ui/runs", params={"tags": bad})
            assert r.status_code == 422 and "tags" in r.text, r.text
    finally:
        await browser.aclose()


DOCS = Path(__file__).resolve().parents[2] / "docs" / "runs.md"


def docs_example() -> str:
    section = DOCS.read_text().split("## Tags and metadata", 1)[1]
    block = section[section.index("```sh\n") + len("```sh\n") :]
    return block[: block.index("```")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the example uses curl")
async def test_the_docs_example_runs_verbatim(api: httpx.AsyncClient, tenant: dict) -> None:
    # Verbatim, but any HTTP error or failed command stops the script with a non-zero exit.
    script = 'set -eo pipefail\ncurl() { command curl -fS "$@"; }\n' + docs_example()
    env = {
        **os.environ,
        "API": str(api.base_url).rstrip("/"),
        "KEY": f"Authorization: Bearer {tenant['api_key']}",
    }
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"tags":["team:billing","customer:42","nightly"],"metadata":{"order":1234}' in done.stdout
    assert done.stdout.rstrip().endswith('{"matched":1,"changed":1,"next_cursor":null}'), done.stdout
