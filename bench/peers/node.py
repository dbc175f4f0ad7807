"""The Node peers' install: bench/peers_node (its package.json pins graphile-worker, pg-boss and pg)
copied into a cache directory (~/.cache/scheduler-bench/node, or $XDG_CACHE_HOME's) and
`npm install`ed there once per version of that package.json; the scripts run from there, beside
their node_modules. Nothing is installed when node or npm is missing or npm cannot reach its
registry: the Node peers are then skipped, and the bench says why. Their drivers are here too."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

from bench.peers.drivers import Driver, count

SOURCE = Path(__file__).resolve().parent.parent / "peers_node"


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "scheduler-bench" / "node"


def _versions(package_json: Path) -> str:
    deps = json.loads(package_json.read_text())["dependencies"]
    return ", ".join(f"{k} {v}" for k, v in deps.items())


def ensure(timeout: float = 300.0) -> tuple[Path | None, str]:
    """(the directory the scripts run from, what was done), or (None, why the Node peers cannot run)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm are not on PATH"
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    for f in SOURCE.iterdir():
        if f.suffix in (".mjs", ".json"):
            shutil.copyfile(f, target / f.name)
    wanted = (SOURCE / "package.json").read_text()
    stamp = target / "node_modules" / ".bench-installed"
    if stamp.exists() and stamp.read_text() == wanted:
        return target, f"Node peers ({_versions(target / 'package.json')}) already installed in {target}"
    print(f"peers: npm install {_versions(target / 'package.json')} into {target}", flush=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, f"npm install did not finish in {timeout:.0f} s (no registry here?)"
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
        return None, f"npm install failed ({first.strip()[:200]}; see `npm install` in {target})"
    stamp.write_text(wanted)
    return target, f"Node peers ({_versions(target / 'package.json')}) installed in {target}"


def version(directory: Path, package: str) -> str:
    return str(json.loads((directory / "node_modules" / package / "package.json").read_text())["version"])


class NodePeer(Driver):
    """A script of bench/peers_node: `node SCRIPT install|enqueue|work DSN …` (see the scripts)."""

    script = ""
    npm_package = ""
    directory: Path | None = None
    why: str = ""
    _enqueuer: asyncio.subprocess.Process

    def unavailable(self) -> str | None:
        if NodePeer.directory is None and not NodePeer.why:
            NodePeer.directory, NodePeer.why = ensure(self.args.npm_timeout)
            print(f"peers: {NodePeer.why}", flush=True)
        return None if NodePeer.directory is not None else NodePeer.why

    def _argv(self, *args: str) -> list[str]:
        assert NodePeer.directory is not None
        return ["node", str(NodePeer.directory / self.script), *args]

    def version(self) -> str:
        assert NodePeer.directory is not None
        return f"{self.npm_package} {version(NodePeer.directory, self.npm_package)}"

    async def install(self, url: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._argv("install", url), stdout=asyncio.subprocess.DEVNULL
        )
        if await proc.wait() != 0:
            raise RuntimeError(f"{self.name}: install failed")

    async def enqueue(self, url: str, n: int) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._argv("enqueue", url, str(n)), stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if line.strip() != b"committed":
            raise RuntimeError(f"{self.name}: enqueue failed")
        self._enqueuer = proc  # it closes its pool and exits by itself

    async def settle(self) -> None:
        await asyncio.wait_for(self._enqueuer.wait(), 30)


class GraphileWorker(NodePeer):
    script, npm_package = "graphile.mjs", "graphile-worker"
    preset = ""

    def describe(self) -> str:
        if self.preset == "fast":
            return (
                f"{self.version()}: its performance page's preset (concurrentJobs 24, maxPoolSize 25, "
                "localQueue size 500, completeJobBatchDelay 0, failJobBatchDelay 0), one process"
            )
        return f"{self.version()}: its defaults (concurrency 1), one process"

    def command(self, url: str) -> list[str]:
        return self._argv("work", url, self.preset)

    async def remaining(self, url: str, n: int) -> int:
        return await count(url, "SELECT count(*) FROM graphile_worker._private_jobs")  # deleted when done


class GraphileFast(GraphileWorker):
    name, preset = "graphile-fast", "fast"


class GraphileDefaults(GraphileWorker):
    name, preset = "graphile-defaults", "defaults"


class PgBoss(NodePeer):
    name, script, npm_package = "pgboss", "pgboss.mjs", "pg-boss"

    def describe(self) -> str:
        a = self.args
        return (
            f"{self.version()}: {a.pgboss_workers} loops in one process, each fetch() of up to "
            f"{a.pgboss_batch} jobs then one complete() of them all (its batch API)"
        )

    def command(self, url: str) -> list[str]:
        return self._argv("work", url, str(self.args.pgboss_workers), str(self.args.pgboss_batch))

    async def remaining(self, url: str, n: int) -> int:
        sql = "SELECT count(*) FROM pgboss.job WHERE name = 'noop' AND state = 'completed'"
        return n - await count(url, sql)
