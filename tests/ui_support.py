"""Signing in to the dashboard as a browser would, for the /ui tests that speak plain HTTP."""

from __future__ import annotations

import re

import httpx

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, html
    return match.group(1)


async def ui_sign_in(base_url: str, token: str) -> httpx.AsyncClient:
    """A client holding a dashboard session opened with `token` (an API key or the admin token)."""
    client = httpx.AsyncClient(base_url=base_url, timeout=30)
    form = await client.get("/ui/login")
    r = await client.post("/ui/login", data={"token": token, "csrf_token": csrf_of(form.text)})
    assert r.status_code == 200 and "Signed in" in r.text, r.text
    return client
