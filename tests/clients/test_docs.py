"""docs/clients.md's Python examples, as written: the FastAPI receiver (hooks.py) verifying real
deliveries, submit.py, submit_async.py and graph.py as scripts, and the schedctl lines under bash,
against a live stack with a tenant `acme`."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import httpx

from app.dev import free_port
from tests.clients.conftest import Live
from tests.support import create_tenant, serving

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "clients.md"
CLIENT_SRC = ROOT / "clients" / "python" / "src"


def _block(language: str, first_line: str) -> str:
    """The page's ```language block that starts with `first_line`."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(), re.S | re.M)
    [block] = [b for b in blocks if b.startswith(first_line)]
    return str(block)


async def _run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, (command, out.decode(), err.decode())
    return out.decode()


async def test_the_python_examples_run_as_written(live: Live, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    await live.worker()
    acme = await create_tenant(live.admin, "acme")
    monkeypatch.setenv(
        "WEBHOOK_SECRETS", f"whsec_c29tZSBvdGhlciBzZWNyZXQgb2YgMzIgYnl0ZXMh,{acme['signing_secret']}"
    )
    hooks: dict[str, object] = {"__name__": "hooks"}
    exec(compile(_block("python", "# hooks.py"), "hooks.py", "exec"), hooks)  # noqa: S102 (the page's code)

    # A small shim stands in for the installed script (pip install ./clients/python makes the real one).
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "schedctl").write_text(f'#!/bin/sh\nexec {sys.executable} -m scheduler_client.cli "$@"\n')
    (shims / "schedctl").chmod(0o755)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(CLIENT_SRC), os.environ.get("PYTHONPATH", "")]),
        "PATH": os.pathsep.join([str(shims), os.environ["PATH"]]),
        "SCHEDULER_API_URL": live.url,
        "SCHEDULER_API_KEY": acme["api_key"],
        "REPORT_HOOK_URL": f"http://127.0.0.1:{port}/hooks/send-report",
    }
    async with serving(hooks["app"], port) as receiver:  # type: ignore[arg-type]
        # The receiver refuses what is not signed with one of its secrets.
        async with httpx.AsyncClient() as http:
            forged = await http.post(f"{receiver}/hooks/send-report", json={"user": 1})
        assert forged.status_code == 401

        for name in ("submit.py", "submit_async.py", "graph.py"):
            (tmp_path / name).write_text(_block("python", f"# {name}"))
        lines = (await _run([sys.executable, "submit.py"], env, tmp_path)).splitlines()
        assert lines == ["submitted pending", "succeeded {'sent_to': 42}", "422 invalid_input job"]
        lines = (await _run([sys.executable, "submit_async.py"], env, tmp_path)).splitlines()
        assert lines[0] == "succeeded {'sent_to': 43}"
        assert [line.split(" 20")[0] for line in lines[1:]] == ["{'user': 43}", "{'user': 42}"]
        lines = (await _run([sys.executable, "graph.py"], env, tmp_path)).splitlines()
        assert lines == ["succeeded", "nightly-import 3 3", "[('report', {'order': 7})]"]

        shell = await _run(["bash", "-euo", "pipefail", "-c", _block("sh", "RUN=$(schedctl")], env, tmp_path)
    assert re.search(r"^status\s+succeeded$", shell, re.M), shell
    assert re.search(r"^result\s+\{\"sent_to\": 42\}$", shell, re.M), shell
    assert re.search(r"^key_id\s+created_at\s+revoked_at$", shell, re.M), shell
    assert re.search(r"^name\s+nightly-import$", shell, re.M), shell
    assert re.search(r"^depends_on\s+\[\"[0-9a-f-]{36}\"\]$", shell, re.M), shell
    assert re.search(r"^[0-9a-f-]{36}\s+report\s+pending\s", shell, re.M), shell
