"""Security of webhook execution (DESIGN §5): the worker refuses a private target at execution time
even if the job was accepted, follows no redirect, connects to the address it checked (DNS
pinning) with the original Host header, keeps secrets out of its log, and signs exactly as
docs/webhooks.md tells receivers to verify."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.schemas.jobs import JobPut
from app.config import Settings
from app.errors import InvalidInput
from app.services.signing import new_signing_secret, signing_key
from app.services.targets import HttpTarget
from app.worker.targets import RunContext, call_http
from tests.e2e.conftest import wait_for
from tests.processes import Process, processes
from tests.receiver import Receiver, running_receiver
from tests.support import ADMIN_TOKEN, bearer, create_tenant, running_api

DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
CONTEXT = RunContext("01a22a00-74e0-7756-b59d-820d74f5131b", "acme", "hook", 1, 1, None)


@dataclass
class Stack:
    api: httpx.AsyncClient
    auth: dict[str, str]
    api_key: str
    signing_secret: str
    receiver: Receiver
    elsewhere: Receiver  # a second receiver: where redirects point
    worker: Process

    async def run(self, job: str, target: dict, payload: Any = None, **fields: Any) -> dict:
        r = await self.api.put(
            f"/tenants/acme/jobs/{job}",
            json={"target": target, "max_attempts": 1, **fields},
            headers=self.auth,
        )
        assert r.status_code in (200, 201), r.text
        r = await self.api.post(
            "/tenants/acme/runs", json={"job": job, "payload": payload or {}}, headers=self.auth
        )
        assert r.status_code == 201, r.text
        return await wait_for(self.api, r.json()["id"], self.auth, {"succeeded", "failed"})


@contextlib.asynccontextmanager
async def stack(settings: Settings, tmp_path: Path, **worker_env: str) -> AsyncIterator[Stack]:
    """The API with its engine in this process (private targets allowed, so jobs pointing at the
    local receivers are accepted), one worker subprocess configured by `worker_env`."""
    async with (
        running_api(settings) as base,
        running_receiver() as receiver,
        running_receiver() as elsewhere,
        processes(settings, tmp_path) as spawn,
        httpx.AsyncClient(base_url=base, timeout=30) as api,
    ):
        created = await create_tenant(api, "acme")
        worker = spawn("worker", SCHEDULER_LOG_LEVEL="DEBUG", **worker_env)
        await worker.wait_ready()
        yield Stack(
            api,
            bearer(created["api_key"]),
            created["api_key"],
            created["signing_secret"],
            receiver,
            elsewhere,
            worker,
        )


async def test_the_worker_refuses_a_private_target_at_execution_time(
    settings: Settings, tmp_path: Path
) -> None:
    """The job was accepted while private targets were allowed; the worker, which checks before
    every request, is configured stricter: the attempt fails and the receiver is never called."""
    async with stack(settings, tmp_path, SCHEDULER_ALLOW_PRIVATE_TARGETS="false") as s:
        done = await s.run(
            "hook", {"type": "http", "url": s.receiver.url}, max_attempts=2, backoff_seconds=0.1
        )
        assert done["status"] == "failed" and done["attempt"] == 2
        assert "only to public addresses" in done["last_error"], done["last_error"]
        assert s.receiver.calls == []


async def test_redirects_are_not_followed_and_secrets_stay_out_of_the_worker_log(
    settings: Settings, tmp_path: Path
) -> None:
    async with stack(settings, tmp_path) as s:
        target = {"type": "http", "url": s.receiver.url, "headers": {"X-Hook-Token": "tok_do_not_log"}}
        done = await s.run("hook", target, {"redirect": s.elsewhere.url})
        assert done["status"] == "failed" and done["last_error"].startswith("HTTP 302"), done
        assert len(s.receiver.calls) == 1 and s.elsewhere.calls == []  # the redirect's target never called

        failed = await s.run("hook", target, {"statuses": [500]})  # a failed webhook
        assert failed["status"] == "failed" and failed["last_error"].startswith("HTTP 500")
        ok = await s.run("hook", target, {"hello": "world"})
        assert ok["status"] == "succeeded"
        s.worker.stop()
        log = s.worker.log_path.read_text(errors="replace")
        assert "HTTP Request" in log  # DEBUG logging was on: the calls are in the log...
        for needle in (s.signing_secret, s.api_key, ADMIN_TOKEN, "tok_do_not_log", "webhook-signature"):
            assert needle not in log, f"{needle!r} in the worker's log"  # ...and no secret with them
        signature = s.receiver.calls[-1].headers["webhook-signature"]
        assert signature not in log and signature not in str(failed)


# ───────────────────────────── DNS pinning (unit) ─────────────────────────────


async def test_call_http_connects_to_the_checked_address_with_the_original_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rebinding name answers a public address to the check, then a private one: the request must
    go to the address that was checked (an IP literal, so nothing resolves the name again), with the
    name in the Host header and as the TLS server name."""
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.example":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in next(answers)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        target = {"type": "http", "url": "https://rebind.example:8443/hook?x=1"}
        await call_http(client, target, {"a": 1}, CONTEXT, [b"k" * 32], 5, False)
        [request] = seen
        assert request.url.host == "93.184.215.14" and request.url.port == 8443
        assert request.url.path == "/hook" and request.url.query == b"x=1"
        assert request.headers["host"] == "rebind.example:8443"
        assert request.extensions["sni_hostname"] == "rebind.example"
        assert lookups == ["rebind.example"]  # one resolution per request, and it was the checked one

        with pytest.raises(
            InvalidInput, match="only to public addresses"
        ):  # the second answer is private: refused
            await call_http(client, target, {"a": 1}, CONTEXT, [b"k" * 32], 5, False)
        assert len(seen) == 1  # nothing sent


async def test_a_real_request_carries_the_names_host_header() -> None:
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
        target = {"type": "http", "url": f"http://localhost:{port}/hook"}
        await call_http(client, target, {"a": 1}, CONTEXT, [b"k" * 32], 5, True)
        [call] = receiver.calls
        assert call.headers["host"] == f"localhost:{port}"


# ───────────────────── the signature, as docs/webhooks.md says ─────────────────────


def doc_block(language: str) -> str:
    [block] = re.findall(rf"```{language}\n(.*?)```", DOCS.read_text(), re.DOTALL)
    return str(block)


def test_the_documented_job_for_an_existing_api_is_a_valid_job_sending_its_payload() -> None:
    job = JobPut.model_validate(json.loads(doc_block("json")))
    assert isinstance(job.target, HttpTarget) and job.target.body == "payload"


async def test_the_documented_verification_accepts_the_workers_signature(tmp_path: Path) -> None:
    secret = new_signing_secret()
    other = new_signing_secret()
    payload = {"hello": "wörld", "n": [1, 2]}
    async with running_receiver() as receiver, httpx.AsyncClient() as client:
        target = {"type": "http", "url": receiver.url}
        await call_http(client, target, payload, CONTEXT, [signing_key(secret)], 5, True)
        await call_http(
            client, {**target, "body": "envelope"}, payload, CONTEXT, [signing_key(secret)], 5, True
        )
    call, enveloped = receiver.calls
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", call.headers["webhook-signature"])
    assert call.headers["webhook-id"] == CONTEXT.run_id

    namespace: dict[str, Any] = {}
    exec(doc_block("python"), namespace)  # noqa: S102 - the documentation's own snippet
    verified_payload, verified_run, not_genuine = (
        namespace["verified_payload"],
        namespace["verified_run"],
        namespace["NotGenuine"],
    )
    assert verified_payload(secret, call.body, call.headers) == payload
    data = verified_run(secret, enveloped.body, enveloped.headers, receiver.url)
    assert data["payload"] == payload
    assert (data["run_id"], data["attempt"], data["epoch"]) == (CONTEXT.run_id, 1, 1)
    stale = {"webhook-timestamp": str(int(time.time()) - 301)}
    for forged in (
        lambda: verified_payload(other, call.body, call.headers),
        lambda: verified_payload(secret, call.body + b" ", call.headers),
        lambda: verified_payload(secret, call.body, dict(call.headers, **stale)),
        lambda: verified_payload(secret, enveloped.body, call.headers),  # another body, same headers
        lambda: verified_run(other, enveloped.body, enveloped.headers, receiver.url),
        lambda: verified_run(secret, enveloped.body, enveloped.headers, receiver.url + "/other"),  # elsewhere
        lambda: verified_run(secret, enveloped.body, dict(enveloped.headers, **stale), receiver.url),
    ):
        with pytest.raises(not_genuine):
            forged()

    def shell(body: bytes, **headers: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "body.json").write_bytes(body)
        env = {
            "WEBHOOK_ID": call.headers["webhook-id"],
            "WEBHOOK_TIMESTAMP": call.headers["webhook-timestamp"],
            "WEBHOOK_SIGNATURE": call.headers["webhook-signature"],
            "SECRET": secret,
            "PATH": "/usr/bin:/bin",
            **headers,
        }
        return subprocess.run(
            ["bash", "-c", doc_block("sh")], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    ok = shell(call.body)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok
    envelope_headers = {
        k.upper().replace("-", "_"): v for k, v in enveloped.headers.items() if k.startswith("webhook-")
    }
    assert shell(enveloped.body, **envelope_headers).returncode == 0  # the same check for an envelope
    for bad in (
        shell(call.body + b" "),
        shell(call.body, SECRET=other),
        shell(call.body, WEBHOOK_ID="01a22a00-74e0-7756-b59d-820d74f51310"),
        shell(call.body, WEBHOOK_TIMESTAMP=str(int(time.time()) - 301)),
    ):
        assert bad.returncode == 1, bad
    # Two signatures (a rotation's overlap): the shell check finds its own among them.
    both = f"v1,{'A' * 43}= {call.headers['webhook-signature']}"
    assert shell(call.body, WEBHOOK_SIGNATURE=both).returncode == 0
