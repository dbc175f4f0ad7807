"""Security (DESIGN §5), through the API: API keys are random, stored only as salted hashes and
compared in constant time; only the admin token manages tenants; webhook targets resolving to
private addresses are refused at job PUT; request and payload sizes are bounded; secrets stay out of
error bodies and logs. The worker's side (refusal at execution, redirects, DNS pinning, the
signature) is in test_security_webhooks.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import logging
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.services import auth
from tests.support import ADMIN_TOKEN, api_client, assert_error, bearer, create_tenant, put_job

KEY = re.compile(r"sch_(?P<id>[0-9a-f]{32})_(?P<secret>[A-Za-z0-9_-]+)")


def split_key(key: str) -> tuple[str, str]:
    m = KEY.fullmatch(key)
    assert m, key
    return m["id"], m["secret"]


# ───────────────────────────────── API keys ─────────────────────────────────


async def test_api_keys_are_random_256_bit_secrets_stored_only_as_salted_hashes(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    keys = [tenant["api_key"]]
    for _ in range(2):
        r = await api.post("/tenants/acme/keys", headers=tenant["auth"])
        assert r.status_code == 201, r.text
        keys.append(r.json()["api_key"])
    parts = dict(split_key(k) for k in keys)
    assert len(parts) == 3 and len(set(parts.values())) == 3
    for secret in parts.values():
        assert len(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))) >= 32  # ≥ 256 bits

    rows = {r["id"].hex: r for r in await pool.fetch("SELECT * FROM api_keys WHERE tenant_id = 'acme'")}
    assert rows.keys() == parts.keys()
    salts = [bytes(r["salt"]) for r in rows.values()]
    assert len(set(salts)) == 3 and all(len(s) >= 16 for s in salts)
    for key_id, secret in parts.items():
        row = rows[key_id]
        digest = bytes(row["hash"])
        assert digest not in (
            hashlib.sha256(secret.encode()).digest(),
            hashlib.sha256(keys[0].encode()).digest(),
        )
        assert secret.encode() not in digest and secret.encode() not in bytes(row["salt"])
        # The scheme: HMAC-SHA256 keyed by the row's own salt, so equal secrets would not hash alike.
        assert digest == hmac.new(bytes(row["salt"]), secret.encode(), hashlib.sha256).digest()

    # No secret, and no whole key, anywhere in the database.
    async with pool.acquire() as conn:
        tables = [
            r["tablename"]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        dump = "\n".join(
            [
                str(await conn.fetchval(f"SELECT coalesce(json_agg(t)::text, '') FROM \"{table}\" t"))
                for table in tables
            ]
        )
    for key in keys:
        assert key not in dump and split_key(key)[1] not in dump


def test_secrets_are_compared_in_constant_time() -> None:
    source = inspect.getsource(auth.authenticate)
    assert source.count("hmac.compare_digest(") >= 2, source  # the admin token and the key's hash
    assert not re.search(r"admin_token\s*==|==\s*admin_token|\[\"hash\"\]\s*==|==\s*row\[\"hash\"\]", source)


async def test_right_key_id_with_a_wrong_secret_is_401(api: httpx.AsyncClient, tenant: dict) -> None:
    key_id, secret = split_key(tenant["api_key"])
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for token in (
        f"sch_{key_id}_{flipped}",
        f"sch_{key_id}_{secret[:-1]}",
        f"sch_{key_id}_{secret}x",
        f"sch_{key_id}_",
    ):
        r = await api.get("/tenants/acme/jobs", headers=bearer(token))
        assert_error(r, 401, "unauthorized")
        assert secret not in r.text and token not in r.text
    assert (await api.get("/tenants/acme/jobs", headers=tenant["auth"])).status_code == 200


async def test_only_the_admin_token_creates_tenants(api: httpx.AsyncClient, tenant: dict) -> None:
    body = {"id": "mallory"}
    assert_error(await api.post("/tenants", json=body, headers=tenant["auth"]), 404, "not_found")
    assert_error(await api.post("/tenants", json=body), 401, "unauthorized")
    for token in (ADMIN_TOKEN + "x", ADMIN_TOKEN[:-1], ADMIN_TOKEN.upper()):
        assert_error(await api.post("/tenants", json=body, headers=bearer(token)), 401, "unauthorized")
    assert_error(
        await api.post("/tenants", json=body, headers={"Authorization": "Bearer"}), 401, "unauthorized"
    )
    assert_error(
        await api.post("/tenants", json=body, headers={"Authorization": f"Basic {ADMIN_TOKEN}"}),
        401,
        "unauthorized",
    )
    r = await api.post("/tenants", json=body, headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 201, r.text


# ──────────────────────────── SSRF guard at job PUT ────────────────────────────

# Names under .example never resolve for real: the test's resolver answers for them.
FAKE_DNS = {
    "intranet.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "loopback.example": ["127.0.0.1"],
    "v6-loopback.example": ["::1"],
    "half-private.example": ["93.184.215.14", "192.168.0.10"],  # one bad answer is enough to refuse
    "public.example": ["93.184.215.14"],
}
PRIVATE_TARGETS = [
    "http://127.0.0.1/hook",
    "http://127.0.0.1:8080/hook",
    "http://127.1.2.3/hook",
    "http://10.0.0.8/hook",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # carrier-grade NAT: not global
    "http://0.0.0.0:9000/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://localhost/hook",
    "https://localhost:8443/hook",
    *(f"http://{host}/hook" for host in FAKE_DNS if host != "public.example"),
]


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in FAKE_DNS:
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in FAKE_DNS[host]
            ]
        return real(host, port, *args, **kwargs)

    # The event loop's resolver calls socket.getaddrinfo in a thread, looked up at call time.
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
async def strict_api(settings: Settings, fake_dns: None) -> AsyncIterator[tuple[httpx.AsyncClient, dict]]:
    async with api_client(settings, allow_private_targets=False) as api:
        created = await create_tenant(api, "acme")
        yield api, bearer(created["api_key"])


async def test_job_put_refuses_targets_resolving_to_private_addresses(strict_api: tuple) -> None:
    api, auth = strict_api
    accepted = []
    for i, url in enumerate(PRIVATE_TARGETS):
        r = await api.put(
            f"/tenants/acme/jobs/j{i}", json={"target": {"type": "http", "url": url}}, headers=auth
        )
        if r.status_code != 422:
            accepted.append(f"{url}: {r.status_code} {r.text}")
            continue
        body = assert_error(r, 422, "invalid_input", field="target.url")
        assert str(body["detail"]).endswith("must resolve, and only to public addresses"), body
    assert not accepted, "\n".join(accepted)
    assert (await api.get("/tenants/acme/jobs", headers=auth)).json()["jobs"] == []  # nothing written

    # The control: a name resolving to a public address is accepted (and never called here).
    r = await api.put(
        "/tenants/acme/jobs/ok",
        json={"target": {"type": "http", "url": "https://public.example/hook"}},
        headers=auth,
    )
    assert r.status_code == 201, r.text


async def test_job_put_does_not_tell_which_internal_names_exist(strict_api: tuple) -> None:
    """A name that does not resolve and one that resolves to a private address get one answer: two
    ("does not resolve" / "resolves to a private address") let a tenant map the internal DNS."""
    api, auth = strict_api
    details = []
    for host in ("intranet.example", "loopback.example", "nowhere.invalid", "no-such-name.example"):
        r = await api.put(
            "/tenants/acme/jobs/probe",
            json={"target": {"type": "http", "url": f"http://{host}/"}},
            headers=auth,
        )
        body = assert_error(r, 422, "invalid_input", field="target.url")
        details.append(str(body["detail"]).replace(host, "HOST"))
    assert len(set(details)) == 1, details
    # The same for a callback's URL.
    r = await api.put(
        "/tenants/acme/jobs/probe",
        json={"target": {"type": "noop"}, "callback": {"url": "http://nowhere.invalid/"}},
        headers=auth,
    )
    body = assert_error(r, 422, "invalid_input", field="callback.url")
    assert (
        str(body["detail"])
        == "callback.url host 'nowhere.invalid' must resolve, and only to public addresses"
    )


# ─────────────────────────────── size limits ───────────────────────────────


async def test_request_and_payload_size_limits(settings: Settings) -> None:
    async with api_client(settings, max_request_bytes=4096, max_payload_bytes=1024) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        big = {"job": "hello", "payload": {"blob": "x" * 5000}}
        r = await api.post("/tenants/acme/runs", json=big, headers=auth)
        assert_error(r, 413, "payload_too_large", field="body")

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: refused while streaming
            yield b'{"job": "hello", "payload": {"blob": "'
            for _ in range(10):
                yield b"x" * 1000
            yield b'"}}'

        r = await api.post(
            "/tenants/acme/runs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
        )
        assert_error(r, 413, "payload_too_large", field="body")

        over = {"blob": "x" * 2000}  # under the request limit, over the payload limit
        body = assert_error(
            await api.post("/tenants/acme/runs", json={"job": "hello", "payload": over}, headers=auth),
            413,
            "payload_too_large",
            field="payload",
        )
        assert "payload" in str(body["detail"])
        batch = {"runs": [{"job": "hello"}, {"job": "hello", "payload": over}]}
        assert_error(
            await api.post("/tenants/acme/runs/batch", json=batch, headers=auth),
            413,
            "payload_too_large",
            field="runs[1].payload",
        )
        job = {"target": {"type": "noop"}, "payload": over}
        assert_error(
            await api.put("/tenants/acme/jobs/big", json=job, headers=auth),
            413,
            "payload_too_large",
            field="payload",
        )
        assert (await api.get("/tenants/acme/runs", headers=auth)).json()["runs"] == []


# ─────────────────────── secrets in error bodies and logs ───────────────────────


async def test_secrets_never_reach_error_bodies_or_logs(
    settings: Settings, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bodies: list[str] = []
    async with api_client(settings) as api:
        created = await create_tenant(api, "acme")
        key, signing_secret = created["api_key"], created["signing_secret"]
        auth = bearer(key)
        key_id, secret = split_key(key)
        await put_job(api, "acme", "hello", auth)
        wrong = [f"sch_{key_id}_{secret[::-1]}", ADMIN_TOKEN + "0", f"{key}x"]
        for token in wrong:
            for method, url in (
                ("GET", "/tenants/acme/jobs"),
                ("POST", "/tenants"),
                ("GET", "/runs/" + "0" * 32),
            ):
                r = await api.request(
                    method, url, json={"id": "x"} if method == "POST" else None, headers=bearer(token)
                )
                assert r.status_code == 401
                bodies.append(r.text)
        # Errors past authentication, with a valid key in the header: none may echo it.
        for r in (
            await api.post(
                "/tenants/acme/runs",
                content=b"{not json",
                headers={**auth, "Content-Type": "application/json"},
            ),
            await api.post("/tenants/acme/runs", json={"job": "nope"}, headers=auth),
            await api.get("/runs/not-a-uuid", headers=auth),
            await api.get("/tenants/other/jobs", headers=auth),
            await api.post("/tenants", json={"id": "x"}, headers=auth),
            await api.post("/tenants", json={"id": "acme"}, headers=bearer(ADMIN_TOKEN)),
        ):
            assert 400 <= r.status_code < 500, r.text
            bodies.append(r.text)
        # The 500 path: a table gone under the app (only this test's database is touched).
        await pool.execute("ALTER TABLE jobs RENAME TO jobs_away")
        try:
            r = await api.get("/tenants/acme/jobs", headers=auth)
        finally:
            await pool.execute("ALTER TABLE jobs_away RENAME TO jobs")
        assert_error(r, 500, "internal_error")
        assert r.json()["detail"] == "internal error"  # no internals, no SQL
        bodies.append(r.text)
    assert "unhandled error" in caplog.text and "jobs" in caplog.text  # the log has the details
    for text, where in [*((b, "an error body") for b in bodies), (caplog.text, "the API's log")]:
        for needle in (secret, key, ADMIN_TOKEN, signing_secret, *wrong):
            assert needle not in text, f"a secret in {where}: {text[:500]}"
        assert "Bearer" not in text, f"{where} echoes the Authorization header: {text[:500]}"
