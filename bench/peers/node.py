"""The Node peers' install: bench/peers_node (its package.json pins graphile-worker, pg-boss and pg)
copied into a cache directory (~/.cache/scheduler-bench/node, or $XDG_CACHE_HOME's) and
`npm install`ed there once per version of that package.json; the scripts run from there, beside
their node_modules. Nothing is installed when node or npm is missing or npm cannot reach its
registry: the Node peers are then skipped, and the bench says why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

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
        return None, f"npm install failed: {done.stderr.strip()[-300:]}"
    stamp.write_text(wanted)
    return target, f"Node peers ({_versions(target / 'package.json')}) installed in {target}"


def version(directory: Path, package: str) -> str:
    return str(json.loads((directory / "node_modules" / package / "package.json").read_text())["version"])
