"""`bench peers` installs its Node peers itself, and skips them with the reason when it cannot:
no node or npm on PATH, or an npm registry that does not answer."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from bench.peers import node


def test_without_node_on_path_the_node_peers_are_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory, why = node.ensure(30)
    assert directory is None
    assert why == "node and npm are not on PATH"


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed here")
def test_an_unreachable_registry_skips_them_with_npm_s_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{port}/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    directory, why = node.ensure(120)
    assert directory is None
    assert why.startswith("npm install failed (npm error"), why
    # The scripts are in place for a later try; nothing claims to be installed.
    target = tmp_path / "scheduler-bench" / "node"
    assert (target / "graphile.mjs").exists() and (target / "package.json").exists()
    assert not (target / "node_modules" / ".bench-installed").exists()
