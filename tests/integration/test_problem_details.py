"""Every error path answers RFC 9457 problem details (application/problem+json): the app's own
errors, request validation, Starlette's 404/405, the body limit, and an unexpected 500."""

from __future__ import annotations

import httpx

from app.config import Settings
from tests.support import api_client, bearer, create_tenant

PROBLEM = "application/problem+json"


def problem(r: httpx.Response) -> dict[str, object]:
    assert r.headers["content-type"] == PROBLEM, (r.status_code, r.headers, r.text)
    return dict(r.json())


async def test_each_error_path_is_a_problem(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    # Request validation (pydantic): the field named in the body path, a discriminated union's tag dropped.
    r = await api.put("/tenants/acme/jobs/x", json={"target": {"type": "http", "url": "nope"}}, headers=auth)
    assert problem(r) == {
        "type": "about:blank",
        "title": "Unprocessable Content",
        "status": 422,
        "detail": r.json()["detail"],
        "code": "invalid_input",
        "field": "target.url",
    }
    assert str(r.json()["detail"]).startswith("target.url: ")
    # An AppError raised by a route.
    r = await api.get("/tenants/acme/jobs/nope", headers=auth)
    assert problem(r) == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "job 'nope' not found",
        "code": "not_found",
        "field": "name",
    }
    # Authentication, before any route runs.
    r = await api.get("/tenants/acme/jobs")
    assert r.status_code == 401
    assert problem(r) | {"detail": ""} == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "",
        "code": "unauthorized",
        "field": "Authorization",
    }
    # Starlette's own: no route, and a route without that method (its Allow header kept).
    r = await api.get("/nowhere", headers=auth)
    assert problem(r)["code"] == "not_found" and r.json()["status"] == 404 and "field" not in r.json()
    r = await api.delete("/tenants/acme/runs", headers=auth)
    assert problem(r)["code"] == "method_not_allowed" and r.json()["title"] == "Method Not Allowed"
    assert r.headers["allow"]
    # A header's name is the tenant's data: the field stops at target.headers.
    bad = {"type": "http", "url": "http://127.0.0.1/", "headers": {"Bad Name": "x"}}
    r = await api.put("/tenants/acme/jobs/x", json={"target": bad}, headers=auth)
    assert problem(r)["field"] == "target.headers" and "Bad Name" not in r.text


async def test_body_limit_is_a_problem(settings: Settings) -> None:
    async with api_client(settings, max_request_bytes=1024) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        r = await api.post("/tenants/acme/runs", json={"job": "x", "payload": "y" * 2000}, headers=auth)
        assert r.status_code == 413
        assert problem(r) == {
            "type": "about:blank",
            "title": "Content Too Large",
            "status": 413,
            "detail": "request body over 1024 bytes",
            "code": "payload_too_large",
            "field": "body",
        }
