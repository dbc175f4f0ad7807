"""The TypeScript client (clients/typescript) as its users install and test it: `npm ci`, then
`npm test` — its types checked with tsc and regenerated from openapi.json to show they are current,
then its tests against a live `scheduler dev` (on this test's database) that the npm runner starts
and stops. Skipped only where Node.js is not installed, never in CI."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Services, with_database

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NPM = shutil.which("npm")

pytestmark = pytest.mark.skipif(
    (NPM is None or shutil.which("node") is None) and not os.environ.get("CI"),
    reason="Node.js and npm are not installed (CI installs them)",
)


@pytest.mark.timeout(900)
async def test_typescript_client_npm_test(services: Services, database: str) -> None:
    assert NPM is not None, "CI runs the TypeScript client's tests: Node.js and npm must be installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.update(
        SCHEDULER_DATABASE_URL=with_database(services.postgres_url, database),
        SCHEDULER_PYTHON=sys.executable,  # `scheduler dev` from this checkout, in this interpreter
    )
    for command in (["ci", "--no-audit", "--no-fund"], ["test"]):
        done = await asyncio.to_thread(
            subprocess.run,
            [NPM, *command],
            cwd=CLIENT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"npm {command[0]}:\n{done.stdout[-20000:]}\n{done.stderr[-5000:]}"
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-5000:]
