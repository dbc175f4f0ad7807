"""Every `scheduler` command answers --help with what it does and the SCHEDULER_* variables it reads,
and the bench runs after the README's first install (no dev extra: no tqdm, no matplotlib)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from app.cli import COMMANDS, main
from app.config import Settings
from bench.scenarios import SCENARIOS

SCHEDULER = shutil.which("scheduler", path=os.path.dirname(sys.executable))
BASE = [SCHEDULER] if SCHEDULER else [sys.executable, "-m", "app.cli"]
COMMAND_LINES = [[name] for name in COMMANDS] + [["bench", name] for name in [*SCENARIOS, "all"]]

# The dev extra's packages made unimportable, as after `pip install -e .` alone.
WITHOUT_DEV_EXTRA = "import sys; sys.modules['tqdm'] = None; sys.modules['matplotlib'] = None\n"


def _help(argv: list[str]) -> str:
    """`scheduler <argv> --help` as its console script prints it, without SCHEDULER_* set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    # A subprocess's timeout: its imports take seconds of CPU, stretched on cores the suite's
    # parallel workers share; the help text is what is checked, not how soon it comes.
    done = subprocess.run(
        [*BASE, *argv, "--help"], capture_output=True, text=True, timeout=180, env=env, check=False
    )
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stderr}"
    assert not done.stderr, done.stderr
    return done.stdout


def _help_here(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The same help from app.cli.main in this process: a command's help differs from the console
    script's only in how it started (the top-level help checks that once), and each process would
    cost a second of imports."""
    for name in [k for k in os.environ if k.startswith("SCHEDULER_")]:
        monkeypatch.delenv(name)
    with pytest.raises(SystemExit) as exit:
        main([*argv, "--help"])
    assert exit.value.code in (0, None), argv
    out, err = capsys.readouterr()
    assert not err, err
    return out


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_every_command_says_what_it_does_and_what_it_reads(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _help_here(argv, capsys, monkeypatch)
    assert out.startswith(f"usage: scheduler {' '.join(argv)}"), out
    description = out.split("\n\n")[1]
    assert len(description.split()) >= 5, out  # a sentence, not just the usage line
    assert "Reads:" in out, out
    named = set(re.findall(r"SCHEDULER_([A-Z_]+[A-Z])", out.split("Reads:", 1)[1]))
    assert {"DATABASE_URL", "NATS_URL"} <= named or argv == ["migrate"], out
    settings = {name.upper() for name in Settings.model_fields}
    assert named <= settings, f"{argv} names variables that are no setting: {named - settings}"


def test_top_level_help_lists_every_command() -> None:
    out = _help([])
    for name in COMMANDS:
        assert re.search(rf"^\s+{name}\s+\S", out, re.M), out
    # A command's help through the console script too, as its tests above read it in-process.
    assert _help(["bench", "drain"]).startswith("usage: scheduler bench drain"), out


def _run_without_dev_extra(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_DEV_EXTRA + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_bench_help_works_without_the_dev_extra() -> None:
    done = _run_without_dev_extra(
        """
        from app.cli import main
        try:
            main(["bench", "drain", "--help"])
        except SystemExit as e:
            sys.exit(e.code)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "usage: scheduler bench drain" in done.stdout


def test_bench_progress_and_report_work_without_the_dev_extra(tmp_path: object) -> None:
    done = _run_without_dev_extra(
        f"""
        from bench.progress import tqdm
        from bench.report import Report
        assert tqdm.__module__ == "bench.progress", tqdm  # the stand-in, not tqdm's
        with tqdm(total=3, desc="runs", unit="run", leave=False) as bar:
            bar.update(2)
        assert list(tqdm(range(3), desc="items")) == [0, 1, 2]
        tqdm.write("written")
        report = Report("smoke", smoke=True, env=__import__("collections").defaultdict(str), draw=print)
        paths = report.write(__import__("pathlib").Path({str(tmp_path)!r}))
        print(sorted(p.suffix for p in paths))
        """
    )
    assert done.returncode == 0, done.stderr
    assert "written" in done.stdout
    assert "chart skipped: matplotlib is not installed" in done.stdout
    assert "['.json', '.md']" in done.stdout


def test_attempt_outcomes_stay_out_of_production_logs() -> None:
    # `scheduler dev` logs every attempt's outcome at INFO; api/engine/worker at the default level
    # (INFO) do not. In a process of its own: pytest's log capture would mask basicConfig.
    code = """
        import logging
        from app.cli import _setup_logging
        from app.config import Settings
        _setup_logging(Settings(log_level="INFO"))
        assert logging.getLogger("app.worker").isEnabledFor(logging.INFO)
        print(logging.getLogger("app.worker.outcomes").isEnabledFor(logging.INFO))
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
