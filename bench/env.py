"""The environment a figure was measured in, printed before anything runs and saved with it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import nats
import redis.asyncio as aioredis

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def url_host(url: str) -> str:
    """The host a service URL points at; a Unix socket (libpq's ?host=/dir, or no host) is 'unix socket'."""
    parts = urlsplit(url)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    if socket_dir.startswith("/") or not parts.hostname:
        return "unix socket"
    return parts.hostname


def shares_host(url: str) -> bool:
    return url_host(url) in LOCAL_HOSTS | {"unix socket"}


def git_revision() -> str:
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5, check=True)
        return done.stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}{' (uncommitted changes)' if dirty else ''}"


async def postgres_version(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        return str(await conn.fetchval("SHOW server_version"))
    finally:
        await conn.close()


async def nats_version(url: str) -> str:
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        v = nc.connected_server_version
        return f"{v.major}.{v.minor}.{v.patch}"
    finally:
        await nc.close()


async def redis_version(url: str) -> str:
    client: Any = aioredis.from_url(url)
    try:
        return str((await client.info("server"))["redis_version"])
    finally:
        await client.aclose()


async def collect(
    *, postgres_url: str, nats_url: str, redis_url: str | None, origins: dict[str, str]
) -> dict[str, Any]:
    """`redis_url` only where the scenario uses Redis; `origins` says which service is embedded."""
    load = os.getloadavg()
    env: dict[str, Any] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": memory_total_gib(),
        "load_average_at_start": [round(x, 2) for x in load],
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git": git_revision(),
        "postgres": await postgres_version(postgres_url),
        "postgres_host": url_host(postgres_url),
        "postgres_origin": origins["postgres"],
        "db_shares_host": shares_host(postgres_url),
        "nats": await nats_version(nats_url),
        "nats_host": url_host(nats_url),
        "nats_origin": origins["nats"],
        "redis": "not used",
    }
    if redis_url is not None:
        env["redis"] = await redis_version(redis_url)
        env["redis_host"] = url_host(redis_url)
        env["redis_origin"] = origins["redis"]
    return env


def describe(env: dict[str, Any]) -> list[str]:
    """One line per fact, for the terminal and the Markdown report."""
    lines = [
        f"CPU: {env['cpu_count']} x {env['cpu_model']}; memory {env['memory_gib']} GiB",
        f"load average at start (1/5/15 min): {' / '.join(str(x) for x in env['load_average_at_start'])}",
        f"Python {env['python']} on {env['platform']}; code at {env['git']}",
        f"PostgreSQL {env['postgres']} ({env['postgres_origin']}, {env['postgres_host']}); "
        f"database shares this host: {'yes' if env['db_shares_host'] else 'no'}",
        f"NATS {env['nats']} ({env['nats_origin']}, {env['nats_host']})",
    ]
    if env["redis"] != "not used":
        lines.append(f"Redis {env['redis']} ({env['redis_origin']}, {env['redis_host']})")
    else:
        lines.append("Redis: not used by this scenario")
    return lines
