"""The dashboard's sign-in, session cookie, CSRF and headers, over real HTTP and Postgres."""

from __future__ import annotations

import asyncpg
import httpx

from app.config import Settings
from app.services import ui_sessions
from app.services.auth import KeyCache
from app.ui.render import CONTENT_SECURITY_POLICY
from tests.support import ADMIN_TOKEN, api_client, create_tenant, snapshot, submit_run
from tests.ui_support import csrf_of, ui_sign_in


async def test_sign_in_sets_a_strict_session_cookie_and_strict_headers(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    async with httpx.AsyncClient(base_url=str(api.base_url)) as browser:
        form = await browser.get("/ui/login")
        assert form.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert (
            "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
            and "unsafe-inline" not in CONTENT_SECURITY_POLICY
        )
        r = await browser.post(
            "/ui/login", data={"token": tenant["api_key"], "csrf_token": csrf_of(form.text)}
        )
        assert r.status_code == 200
        cookie = next(
            v for k, v in r.headers.multi_items() if k == "set-cookie" and "scheduler_session=" in v
        )
        attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
        assert {"httponly", "samesite", "path", "max-age"} <= attributes
        assert "samesite=strict" in cookie.lower() and "path=/ui" in cookie.lower()
        assert "secure" not in attributes  # plain HTTP here; over TLS the cookie is Secure
        page = await browser.get("/ui")
        assert page.status_code == 200 and "tenant acme" in page.text
        for name in (
            "content-security-policy",
            "x-frame-options",
            "x-content-type-options",
            "referrer-policy",
        ):
            assert name in page.headers
        assert page.headers["cache-control"] == "no-store"
        assert "<script>" not in page.text and " style=" not in page.text  # no inline script or style


async def test_a_wrong_key_or_a_forged_sign_in_form_opens_no_session(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    async with httpx.AsyncClient(base_url=str(api.base_url)) as browser:
        form = await browser.get("/ui/login")
        wrong = await browser.post("/ui/login", data={"token": "sch_nope", "csrf_token": csrf_of(form.text)})
        assert wrong.status_code == 401 and "not a valid" in wrong.text
        huge = await browser.post(
            "/ui/login", data={"token": "x" * 10_000, "csrf_token": csrf_of(wrong.text)}
        )
        assert huge.status_code == 401
    async with httpx.AsyncClient(base_url=str(api.base_url)) as other_site:  # no sign-in cookie of ours
        forged = await other_site.post("/ui/login", data={"token": tenant["api_key"], "csrf_token": "guess"})
        assert forged.status_code == 403 and "scheduler_session" not in forged.headers.get("set-cookie", "")


async def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    before = await snapshot(pool)
    for form in ({}, {"csrf_token": ""}, {"csrf_token": "forged"}):
        r = await browser.post(f"/ui/runs/{run['id']}/cancel", data=form)
        assert r.status_code == 403 and "CSRF" in r.text
    r = await browser.post("/ui/jobs/hello/trigger", data={})
    assert r.status_code == 403
    assert await snapshot(pool) == before
    # With it, the same post cancels.
    csrf = csrf_of((await browser.get(f"/ui/runs/{run['id']}")).text)
    r = await browser.post(f"/ui/runs/{run['id']}/cancel", data={"csrf_token": csrf})
    assert r.status_code == 303
    assert (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()["status"] == "cancelled"
    await browser.aclose()


async def test_sign_out_and_a_revoked_key_end_the_session(api: httpx.AsyncClient, tenant: dict) -> None:
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    csrf = csrf_of((await browser.get("/ui")).text)
    assert (await browser.post("/ui/logout", data={"csrf_token": csrf})).status_code == 303
    assert (await browser.get("/ui")).status_code == 303  # the cookie is cleared and the session gone

    second = (await api.post("/tenants/acme/keys", headers=tenant["auth"])).json()
    browser = await ui_sign_in(str(api.base_url), second["api_key"])
    assert (await browser.get("/ui")).status_code == 200
    r = await api.delete(f"/tenants/acme/keys/{second['key_id']}", headers=tenant["auth"])
    assert r.status_code == 204
    assert (await browser.get("/ui")).status_code == 303
    await browser.aclose()


async def test_the_admin_signs_in_with_the_admin_token_and_sees_key_ids_never_secrets(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    browser = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    page = await browser.get("/ui/admin")
    key_id = tenant["api_key"].removeprefix("sch_").split("_")[0]
    assert page.status_code == 200 and key_id in page.text
    assert tenant["api_key"] not in page.text and tenant["signing_secret"] not in page.text
    runs = await browser.get("/ui/runs?tenant=acme")
    assert runs.status_code == 200
    await browser.aclose()


async def test_a_one_time_link_signs_in_once(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    link = await ui_sessions.create_link(pool, KeyCache(), tenant["api_key"], ADMIN_TOKEN)
    async with httpx.AsyncClient(base_url=str(api.base_url)) as browser:
        r = await browser.get(f"/ui/login/{link}")
        assert r.status_code == 200 and "scheduler_session=" in r.headers["set-cookie"]
        assert r.headers["referrer-policy"] == "no-referrer"
        assert (await browser.get("/ui")).status_code == 200
    async with httpx.AsyncClient(base_url=str(api.base_url)) as second:
        again = await second.get(f"/ui/login/{link}")
        assert again.status_code == 401 and "scheduler_session=" not in again.headers.get("set-cookie", "")


async def test_a_payload_with_markup_is_escaped(api: httpx.AsyncClient, tenant: dict) -> None:
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    run = await submit_run(api, "acme", tenant["auth"], job="hello", payload={"html": evil})
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    page = (await browser.get(f"/ui/runs/{run['id']}")).text
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    await browser.aclose()


async def test_hostile_query_values_are_4xx_pages_not_errors(api: httpx.AsyncClient, tenant: dict) -> None:
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    for url in (
        "/ui/runs?status=nope",
        "/ui/runs?job=%00",
        "/ui/runs?cursor=garbage",
        "/ui/runs?id=not-a-uuid",
        "/ui/runs/not-a-uuid",
        "/ui/failures?days=0",
        "/ui/failures?days=99999999999999999999",
        "/ui/jobs?cursor=%00",
        "/ui/runs?tenant=%00",
    ):
        r = await browser.get(url)
        assert 400 <= r.status_code < 500, (url, r.status_code, r.text)
        assert r.headers["content-type"].startswith("text/html"), url
    r = await browser.post(
        "/ui/jobs/hello", content=b"\xff\xfe", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert r.status_code == 422
    await browser.aclose()


async def test_only_the_dashboards_forms_may_post_url_encoded(api: httpx.AsyncClient, tenant: dict) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded", **tenant["auth"]}
    r = await api.post("/tenants/acme/runs", content=b"job=hello", headers=form)
    assert r.status_code == 415  # the API still reads JSON only
    r = await api.post("/ui/runs/00000000-0000-0000-0000-000000000000/cancel", content=b"x=1", headers=form)
    assert r.status_code == 303  # read, then sent to sign in: a bearer key is no dashboard session


async def test_the_run_page_shows_the_trace_id_of_the_submission(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {**tenant["auth"], "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    run = (await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=headers)).json()
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    assert f"<code>{trace_id}</code>" in (await browser.get(f"/ui/runs/{run['id']}")).text
    await browser.aclose()


def _cookies(r: httpx.Response) -> dict[str, str]:
    """Set-Cookie headers by cookie name."""
    return {v.split("=", 1)[0]: v for k, v in r.headers.multi_items() if k == "set-cookie"}


async def _sign_in_over_plain_http(
    client: httpx.AsyncClient, api_key: str, headers: dict[str, str]
) -> dict[str, str]:
    """Signs in as a browser behind a TLS proxy would (it keeps Secure cookies: the proxy speaks
    HTTPS to it), returning the Set-Cookie headers of the sign-in form and of the sign-in."""
    form = await client.get("/ui/login", headers=headers)
    login = _cookies(form)["scheduler_login"]
    r = await client.post(
        "/ui/login",
        data={"token": api_key, "csrf_token": csrf_of(form.text)},
        headers={**headers, "Cookie": login.split(";", 1)[0]},
    )
    assert r.status_code == 200, r.text
    return {**_cookies(r), "scheduler_login": login}


def _secure(cookie: str) -> bool:
    return "secure" in {a.strip().split("=")[0].lower() for a in cookie.split(";")}


async def test_cookies_are_secure_whenever_the_public_url_is_https(settings: Settings) -> None:
    """Behind a TLS proxy that uvicorn does not trust (anywhere but 127.0.0.1 by default), the
    request reaches the server as plain HTTP: the cookies went out without Secure."""
    async with api_client(settings, public_url="https://scheduler.example.com") as api:
        key = (await create_tenant(api, "acme"))["api_key"]
        cookies = await _sign_in_over_plain_http(api, key, {})
        assert _secure(cookies["scheduler_login"]) and _secure(cookies["scheduler_session"]), cookies
    async with api_client(settings, public_url="http://127.0.0.1:8000") as api:
        key = (await create_tenant(api, "beta"))["api_key"]
        cookies = await _sign_in_over_plain_http(api, key, {})
        assert not _secure(cookies["scheduler_session"]), cookies  # plain HTTP end to end


async def test_forwarded_proto_is_believed_only_from_the_allowed_proxies(settings: Settings) -> None:
    https = {"X-Forwarded-Proto": "https"}
    async with api_client(settings, forwarded_allow_ips="127.0.0.1") as api:
        key = (await create_tenant(api, "acme"))["api_key"]
        assert _secure((await _sign_in_over_plain_http(api, key, https))["scheduler_session"])
    async with api_client(settings, forwarded_allow_ips="10.0.0.7") as api:  # not us: not believed
        key = (await create_tenant(api, "beta"))["api_key"]
        assert not _secure((await _sign_in_over_plain_http(api, key, https))["scheduler_session"])
