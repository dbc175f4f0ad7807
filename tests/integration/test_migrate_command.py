"""`scheduler migrate` finds its migrations beside the package, never in the working directory:
run from an empty directory, from a checkout and from an installed layout, against a fresh database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[2]


def scheduler(
    args: list[str], cwd: Path, url: str, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEDULER_", "PYTHONPATH"))}
    env["SCHEDULER_DATABASE_URL"] = url
    if pythonpath is None:  # the console script the install made
        command = [str(Path(sys.executable).parent / "scheduler"), *args]
    else:  # a package found on PYTHONPATH, as an installed one is found in site-packages
        env["PYTHONPATH"] = str(pythonpath)
        command = [sys.executable, "-c", "import sys; from app.cli import main; main(sys.argv[1:])", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


async def head_of(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        return str(await conn.fetchval("SELECT version_num FROM alembic_version"))
    finally:
        await conn.close()


def newest_revision() -> str:
    return max(p.name.split("_", 1)[0] for p in (ROOT / "alembic" / "versions").glob("[0-9]*.py"))


async def test_migrate_from_an_unrelated_directory(fresh_database: str, tmp_path: Path) -> None:
    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = /nonexistent\n")  # ignored
    done = scheduler(["migrate"], tmp_path, fresh_database)
    assert done.returncode == 0, done.stderr
    assert await head_of(fresh_database) == newest_revision()


async def test_migrate_from_an_installed_layout(fresh_database: str, tmp_path: Path) -> None:
    """The package alone in a site directory (no project root beside it), the migration scripts
    where the image's build puts them (the Dockerfile test pins that path)."""
    site, elsewhere = tmp_path / "site", tmp_path / "cwd"
    elsewhere.mkdir()
    shutil.copytree(ROOT / "app", site / "app", ignore=shutil.ignore_patterns("__pycache__", "alembic"))

    missing = scheduler(["migrate"], elsewhere, fresh_database, pythonpath=site)
    assert missing.returncode != 0 and "no migration scripts beside the package" in missing.stderr

    shutil.copytree(ROOT / "alembic", site / "app" / "db" / "alembic")
    done = scheduler(["migrate"], elsewhere, fresh_database, pythonpath=site)
    assert done.returncode == 0, done.stderr
    assert await head_of(fresh_database) == newest_revision()
