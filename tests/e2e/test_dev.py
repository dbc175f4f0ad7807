"""`scheduler dev` as a newcomer meets it: a real subprocess in a directory of its own (the test's
database, an embedded nats-server), stopped by Ctrl-C delivered to its whole process group as a
terminal does. One per data dir, the demo key kept across restarts, a quiet shutdown, attempts'
outcomes on the console, and the documentation's examples (README's, docs/api.md's, docs/runs.md's,
docs/dependencies.md's and docs/groups-and-events.md's) run verbatim against it (README's TypeScript
example: clients/typescript/test/docs.test.js)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.dev import free_port
from stack.eventually import eventually
from tests.support import Services, with_database

SCHEDULER = [sys.executable, "-c", "from app.cli import main; main()"]
ROOT = Path(__file__).resolve().parents[2]
CLIENT_SRC = ROOT / "clients" / "python" / "src"
NOISE = re.compile(r"WARNING|ERROR|CRITICAL|Traceback|EOF|refused|Exception", re.I)


class Dev:
    def __init__(self, cwd: Path, database_url: str, port: int):
        self.cwd = cwd
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
        env.update(SCHEDULER_DATABASE_URL=database_url, SCHEDULER_PORT=str(port), PYTHONUNBUFFERED="1")
        self.out = cwd / f"dev-{port}.out"
        self.err = cwd / f"dev-{port}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            # A session of its own, so the SIGINT below reaches every process in it, as Ctrl-C would.
            self.proc = subprocess.Popen(
                [*SCHEDULER, "dev"], cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True
            )

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()

    async def ready(self, timeout: float = 120) -> str:
        """Waits for the banner; returns the demo key it shows."""
        deadline = time.monotonic() + timeout
        while "Ctrl-C stops everything." not in self.stdout():
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.stderr()}"
            assert time.monotonic() < deadline, self.stdout() + self.stderr()
            await asyncio.sleep(0.2)
        match = re.search(r"demo tenant key:\s+(\S+)", self.stdout())
        assert match, self.stdout()
        return match.group(1)

    async def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"did not exit within {timeout}s: {self.stderr()}")
            await asyncio.sleep(0.1)
        return self.proc.returncode

    async def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        return await self.wait()

    def nats_pid(self) -> int:
        return int((self.cwd / ".scheduler-dev" / "nats" / "nats-server.pid").read_text().split()[0])

    def kill(self) -> None:
        """After a failure: this process and the nats-server (a session of its own) it started."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(OSError, ValueError):
            os.kill(self.nats_pid(), signal.SIGKILL)


async def test_one_dev_per_data_dir_demo_key_kept_quiet_ctrl_c(
    tmp_path: Path, services: Services, database: str
) -> None:
    url = with_database(services.postgres_url, database)
    first = Dev(tmp_path, url, free_port())
    try:
        key = await first.ready()
        data = tmp_path / ".scheduler-dev"
        assert (data / "demo_key").read_text().strip() == key
        admin = {"Authorization": f"Bearer {(data / 'admin_token').read_text().strip()}"}
        auth = {"Authorization": f"Bearer {key}"}

        # A failing webhook (the dev echo receiver told to answer 500) is reported on the console.
        async with httpx.AsyncClient(base_url=first.base, timeout=10) as client:
            target = {"type": "http", "url": f"{first.base}/dev/echo?status=500"}
            r = await client.put("/tenants/demo/jobs/failing", json={"target": target}, headers=auth)
            assert r.status_code == 201, r.text
            r = await client.post(
                "/tenants/demo/runs", json={"job": "failing", "payload": {"n": 1}}, headers=auth
            )
            assert r.status_code == 201, r.text
            run_id = r.json()["id"]
            # The worker's gauges, as `scheduler worker` exposes them, beside the engine's.
            page = (await client.get("/metrics")).text
            assert re.search(r"^scheduler_worker_slots \d", page, re.MULTILINE), page
        await eventually(
            lambda: re.search(rf"app\.worker\.outcomes: run {run_id} attempt 1: .*500", first.stderr()),
            timeout=30,
            interval=0.2,
            what="the failed attempt was logged",
        )
        assert f"echo receiver: POST /dev/echo run {run_id}" in first.stderr()

        # The banner's dashboard link signs in as the demo tenant, once.
        link = re.search(r"dashboard:\s+(\S+)", first.stdout())
        assert link, first.stdout()
        async with httpx.AsyncClient(timeout=10) as browser:
            assert (await browser.get(link.group(1))).status_code == 200
            overview = await browser.get(f"{first.base}/ui")
            assert overview.status_code == 200 and "tenant demo" in overview.text
        async with httpx.AsyncClient(timeout=10) as another:
            assert (await another.get(link.group(1))).status_code == 401

        # A second `scheduler dev` on the same data dir refuses at once, before starting anything.
        second = Dev(tmp_path, url, free_port())
        assert await second.wait(timeout=60) != 0
        assert "is in use by a running `scheduler dev`" in second.stderr(), second.stderr()
        assert f"pid {first.proc.pid}" in second.stderr()
        assert "embedded" not in second.stdout(), second.stdout()  # no second nats-server
        async with httpx.AsyncClient(base_url=first.base, timeout=10) as client:
            assert (await client.get("/tenants/demo/keys", headers=auth)).status_code == 200

        # Ctrl-C: exit 0, nothing alarming on stderr.
        assert await first.ctrl_c() == 0
        noise = [line for line in first.stderr().splitlines() if NOISE.search(line)]
        assert not noise, noise
    finally:
        first.kill()

    # Restarted: the same demo key, and still one key for the demo tenant.
    again = Dev(tmp_path, url, free_port())
    try:
        assert await again.ready() == key
        async with httpx.AsyncClient(base_url=again.base, timeout=10) as client:
            keys = (await client.get("/tenants/demo/keys", headers=admin)).json()["keys"]
        assert len(keys) == 1, keys
        # Killed with -9: its nats-server lives on. The next start stops it rather than run a
        # second nats-server on the same JetStream store.
        orphan = again.nats_pid()
        again.proc.kill()
        assert again.proc.wait() == -signal.SIGKILL
        assert _alive(orphan)
    finally:
        if again.proc.poll() is None:  # failed before its kill -9: the orphan is the point otherwise
            again.kill()

    last = Dev(tmp_path, url, free_port())
    try:
        assert await last.ready() == key
        assert not _alive(orphan)
        assert last.nats_pid() != orphan and _alive(last.nats_pid())
        assert await last.ctrl_c() == 0
        assert not _alive(last.nats_pid())
    finally:
        last.kill()
        with contextlib.suppress(OSError):
            os.kill(orphan, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _first_sh_block(page: Path, after: str, port: int) -> str:
    """The first ```sh block after the heading `after` in a page, aimed at this port."""
    text = page.read_text()
    section = text[text.index(after) :]
    block = section[section.index("```sh\n") + len("```sh\n") :]
    block = block[: block.index("```")]
    assert "127.0.0.1:8000" in block
    return block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")


def _block(page: Path, after: str, language: str) -> str:
    """The first ```language block after the heading `after` in a page."""
    section = page.read_text()[page.read_text().index(after) :]
    block = section[section.index(f"```{language}\n") + len(f"```{language}\n") :]
    return block[: block.index("```")]


async def _run_verbatim(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Verbatim, but any HTTP error or failed command stops the script with a non-zero exit.
    return await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", 'set -eo pipefail\ncurl() { command curl -fS "$@"; }\n' + script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="the documented examples use curl (CI installs it)")
async def test_documented_examples_run_verbatim_on_dev(
    tmp_path: Path, services: Services, database: str
) -> None:
    dev = Dev(tmp_path, with_database(services.postgres_url, database), free_port())
    try:
        await dev.ready()
        readme = await _run_verbatim(
            _first_sh_block(ROOT / "README.md", "## One example", dev.port), tmp_path
        )
        assert readme.returncode == 0, readme.stdout + readme.stderr
        assert '"status":"succeeded"' in readme.stdout  # the demo run, read a second later
        # README's client example: its sh line, then its Python (the client from this checkout).
        python = _block(ROOT / "README.md", "## Use it from your service", "python")
        client = await _run_verbatim(
            _first_sh_block(ROOT / "README.md", "## Use it from your service", dev.port)
            + f"PYTHONPATH={CLIENT_SRC} {sys.executable} - <<'EOF'\n{python}EOF\n",
            tmp_path,
        )
        assert client.returncode == 0 and client.stdout == "succeeded\n", client.stdout + client.stderr
        # docs/runs.md's examples go on from docs/api.md's (its variables, its tenant and job).
        done = await _run_verbatim(
            _first_sh_block(ROOT / "docs" / "api.md", "# The HTTP API", dev.port)
            + _first_sh_block(ROOT / "docs" / "runs.md", "## Expire runs not started in time", dev.port)
            + _first_sh_block(ROOT / "docs" / "dependencies.md", "## Submitting a graph", dev.port)
            + _first_sh_block(ROOT / "docs" / "groups-and-events.md", "## Try it", dev.port),
            tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"status":"cancelled"' in done.stdout  # the last example cancels the run an hour ahead
        assert '"status":"expired"' in done.stdout and '"changed":1' in done.stdout  # and retries it
        # docs/dependencies.md's graph: the load waited for its parents, then got their results.
        assert "[None, 'dependencies', 'dependencies', 'dependencies']" in done.stdout
        assert any(
            '"status":"succeeded"' in line and '"depends_on":["' in line for line in done.stdout.splitlines()
        )
        # docs/groups-and-events.md: the group completed into one run of `report`, the event made one.
        assert '"name":"nightly-import"' in done.stdout and '"completion_run_id":"' in done.stdout
        assert '"group":{"id":"' in done.stdout and '"payload":{"order":7}' in done.stdout
        await eventually(
            lambda: dev.stderr().count("echo receiver: POST /dev/echo") >= 3,
            timeout=30,
            interval=0.2,
            what="the echo receiver got the send-report runs",
        )
        load = [line for line in dev.stderr().splitlines() if '"step":"load"' in line]
        assert load and '"parents":{"left":{"run":' in load[0], load
        assert await dev.ctrl_c() == 0
    finally:
        dev.kill()
