"""openapi.json as a client generator reads it: openapi-python-client (a real generator, not ours)
writes a client package into a temporary directory, and that client alone creates a tenant, puts a
webhook job, submits a run and polls it to `succeeded` against the real API, engine and worker."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.openapi import DEFAULT_PATH
from stack.eventually import eventually
from tests.support import ADMIN_TOKEN

PACKAGE = "scheduler_generated_client"


@pytest.fixture
def client_package(tmp_path: Path) -> Iterator[ModuleType]:
    generator = Path(sys.executable).parent / "openapi-python-client"
    command = [str(generator), "generate", "--path", str(DEFAULT_PATH), "--meta", "none"]
    done = subprocess.run(
        [*command, "--output-path", str(tmp_path / PACKAGE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The generator warns (and still exits 0) about what it could not read from the schema.
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _module(package: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


async def test_a_generated_client_runs_a_job_to_success(stack: dict, client_package: ModuleType) -> None:
    models = _module(client_package, "models")
    create_tenant = _module(client_package, "api.tenants.create_tenant")
    put_job = _module(client_package, "api.jobs.put_job")
    submit_run = _module(client_package, "api.runs.submit_run")
    get_run = _module(client_package, "api.runs.get_run")
    base_url = str(stack["api"].base_url).rstrip("/")
    await stack["spawn"]("worker").wait_ready()

    async with client_package.AuthenticatedClient(base_url=base_url, token=ADMIN_TOKEN) as admin:
        tenant = await create_tenant.asyncio(client=admin, body=models.TenantCreate(id="generated"))
    assert isinstance(tenant, models.TenantCreated), tenant

    async with client_package.AuthenticatedClient(base_url=base_url, token=tenant.api_key) as client:
        target = models.HttpTarget(type_="http", url=stack["receiver"].url)
        job = await put_job.asyncio(
            "generated", "report", client=client, body=models.JobPut(target=target, max_attempts=2)
        )
        assert isinstance(job, models.Job), job
        assert isinstance(job.target, models.HttpTarget) and job.target.url == stack["receiver"].url

        # An error comes back as the generated Problem model, field and code included.
        problem = await submit_run.asyncio("generated", client=client, body=models.RunSubmit(job="nope"))
        assert isinstance(problem, models.Problem), problem
        assert (problem.status, problem.code, problem.field) == (422, "invalid_input", "job")

        run = await submit_run.asyncio(
            "generated", client=client, body=models.RunSubmit(job="report", payload={"user": 42})
        )
        assert isinstance(run, models.Run), run
        run_id = run.id
        run = await eventually(
            lambda: get_run.asyncio(run_id, client=client),
            until=lambda r: (
                isinstance(r, models.Run)
                and r.status in (models.RunStatus.SUCCEEDED, models.RunStatus.FAILED)
            ),
            timeout=30,
            what="the run finished",
        )
        assert isinstance(run, models.Run), run
    assert run.status == models.RunStatus.SUCCEEDED and run.attempt == 1, run
    [call] = stack["receiver"].for_run(str(run.id))
    assert call.payload == {"user": 42}
