"""Regenerates scheduler_client.generated (the typed models and endpoints) from the repo's
openapi.json with openapi-python-client: `python clients/python/generate.py`.

`--check` generates into a temporary directory instead and exits 1 if the checked-in code differs
(tests/clients/test_generated_code.py runs it, so the client never drifts from the API). Both
sides are formatted by the ruff at hand before comparing, so only the generator's output counts,
not which ruff last formatted it. The generator's version is pinned in the dev extras: another
version writes other code."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent.parent / "openapi.json"
CONFIG = HERE / "generator.yaml"
PACKAGE = HERE / "src" / "scheduler_client" / "generated"
# The generator and the ruff of this interpreter's environment, whatever PATH says.
BIN = str(Path(sys.executable).parent)


def _run(command: list[str], cwd: Path) -> None:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")


def generate(spec: Path, out: Path) -> None:
    """The package generated from `spec` at `out` (a directory that does not exist yet)."""
    _run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(spec),
            "--config",
            str(CONFIG),
            "--meta",
            "none",
            "--output-path",
            str(out),
            # A schema the generator cannot fully read (it would skip an endpoint or a model) fails.
            "--fail-on-warning",
        ],
        cwd=out.parent,
    )


def check(spec: Path) -> list[str]:
    """How the checked-in package differs from a fresh generation (empty: it does not)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh, current = Path(tmp) / "generated", Path(tmp) / "checked-in"
        generate(spec, fresh)
        shutil.copytree(PACKAGE, current, ignore=shutil.ignore_patterns("__pycache__"))
        _run(
            [
                sys.executable,
                "-m",
                "ruff",
                "format",
                "--isolated",
                "--no-cache",
                "--line-length",
                "110",
                "-q",
                ".",
            ],
            current,
        )
        return _differences(fresh, current)


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _differences(fresh: Path, current: Path) -> list[str]:
    generated, checked_in = _files(fresh), _files(current)
    out = [f"missing from the checked-in code: {n}" for n in sorted(generated - checked_in)]
    out += [f"not generated any more: {n}" for n in sorted(checked_in - generated)]
    out += [
        f"differs: {n}"
        for n in sorted(generated & checked_in)
        if (fresh / n).read_bytes() != (current / n).read_bytes()
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with a fresh generation, write nothing")
    parser.add_argument("--spec", type=Path, default=SPEC, help=f"the OpenAPI document (default: {SPEC})")
    args = parser.parse_args()
    if args.check:
        differences = check(args.spec)
        if differences:
            print(
                "scheduler_client.generated is stale: run python clients/python/generate.py", file=sys.stderr
            )
            print("\n".join(differences), file=sys.stderr)
            sys.exit(1)
        print("scheduler_client.generated matches", args.spec)
        return
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "generated"
        generate(args.spec, fresh)
        shutil.rmtree(PACKAGE, ignore_errors=True)
        shutil.copytree(fresh, PACKAGE)
    print(f"wrote {PACKAGE}")


if __name__ == "__main__":
    main()
