"""The package as shipped: its generated code is what openapi-python-client makes of today's
openapi.json (so the client never drifts from the API), and `pip install ./clients/python`
builds a distribution with that code, its type information and the `schedctl` script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from subprocess import PIPE

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"


def _check(*args: str) -> subprocess.Popen[str]:
    """generate.py --check, started."""
    command = [sys.executable, str(CLIENT / "generate.py"), "--check", *args]
    return subprocess.Popen(command, stdout=PIPE, stderr=PIPE, text=True)


def test_the_generated_code_matches_openapi_json(tmp_path: Path) -> None:
    # Against a contract that lost a route, the check fails and names what changed.
    spec = json.loads((ROOT / "openapi.json").read_text())
    del spec["paths"]["/runs/{run_id}/reschedule"]
    (tmp_path / "changed.json").write_text(json.dumps(spec))
    same, changed = _check(), _check("--spec", str(tmp_path / "changed.json"))

    out, err = same.communicate(timeout=300)
    assert same.returncode == 0, out + err
    out, err = changed.communicate(timeout=300)
    assert changed.returncode == 1 and "not generated any more: api/runs/reschedule_run.py" in err, out + err


def test_the_package_builds_with_its_generated_code_and_schedctl(tmp_path: Path) -> None:
    # Built from a copy: a build writes build/ and *.egg-info beside the sources.
    source = tmp_path / "python"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = tmp_path.glob("scheduler_client-*.whl")
    with zipfile.ZipFile(wheel) as built:
        names = set(built.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = built.read(entry_points).decode()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [
            line for line in built.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")
        ]
    assert {
        "scheduler_client/__init__.py",
        "scheduler_client/py.typed",
        "scheduler_client/cli.py",
        "scheduler_client/generated/api/runs/submit_run.py",
        "scheduler_client/generated/models/run.py",
    } <= names
    assert "schedctl = scheduler_client.cli:main" in scripts
    # What it needs at run time, and nothing of the service's.
    assert sorted(r.split()[1].split(">")[0] for r in requires if "extra ==" not in r) == [
        "attrs",
        "httpx",
        "standardwebhooks",
    ]
