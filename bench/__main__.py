"""`python -m bench SCENARIO [--smoke] [--out DIR] [sizes…]` or `python -m bench all [--smoke]`
(also `scheduler bench …`). See docs/bench.md."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
import traceback
from pathlib import Path

from app import aio
from bench.scenarios import SCENARIOS, add_parsers
from bench.stack import Bench, start_services


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--smoke", action="store_true", help="tiny sizes: seconds, for CI (not figures to quote)"
    )
    common.add_argument(
        "--out", type=Path, default=Path("bench/results"), help="where results go (bench/results)"
    )
    common.add_argument("--batch-size", type=int, default=None, help="claim batch size (default: the app's)")
    return common


READS = (
    "Reads: SCHEDULER_DATABASE_URL (an admin database: the bench creates and drops its own), "
    "SCHEDULER_NATS_URL, SCHEDULER_REDIS_URL; each one unset is replaced by an embedded server from "
    "the wheels. Progress bars need tqdm and charts matplotlib (both in the dev extra); without them "
    "the bench runs and says what it skipped."
)


def _parser(prog: str) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    common = _common()
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Drives real Postgres and NATS and records what it found, with the environment it "
        "ran in (JSON, Markdown and a chart in --out). See docs/bench.md.",
        epilog=READS,
    )
    sub = parser.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    parsers = add_parsers(sub, common)
    sub.add_parser(
        "all",
        parents=[common],
        help="every scenario in turn, at its default (or smoke) sizes",
        description="Every scenario in turn, at its default (or --smoke) sizes.",
    )
    for p in sub.choices.values():
        p.epilog = textwrap.fill(READS, 78)
        p.formatter_class = argparse.RawDescriptionHelpFormatter  # scenario docstrings are laid out
    return parser, parsers


def _common_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--out", str(args.out)]
    if args.smoke:
        argv.append("--smoke")
    if args.batch_size is not None:
        argv += ["--batch-size", str(args.batch_size)]
    return argv


async def _run(runs: list[tuple[str, argparse.Namespace]], bench: Bench) -> list[str]:
    failed = []
    try:
        for name, args in runs:
            try:
                report = await SCENARIOS[name].run(bench, args)
            except Exception:
                traceback.print_exc()
                print(f"== {name}: FAILED (see the traceback above)", flush=True)
                failed.append(name)
                continue
            print(report.text(), flush=True)
            for path in report.write(args.out):
                print(f"saved {path}", flush=True)
            print(flush=True)
    finally:
        await bench.close()
    return failed


def main(argv: list[str] | None = None, prog: str = "python -m bench") -> None:
    parser, parsers = _parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if args.scenario == "all":
        runs = []
        for name, scenario in SCENARIOS.items():
            reason = scenario.unavailable() if hasattr(scenario, "unavailable") else None
            if reason:
                print(f"== {name}: skipped ({reason})", flush=True)
                continue
            runs.append((name, parsers[name].parse_args(_common_argv(args))))
    else:
        runs = [(args.scenario, args)]
    services = start_services()
    try:
        bench = Bench(services, smoke=args.smoke, out=args.out, batch_size=args.batch_size)
        failed = aio.run(lambda: _run(runs, bench))
    finally:
        services.stop()
    if failed:
        raise SystemExit(f"bench: {', '.join(failed)} failed")


if __name__ == "__main__":
    main()
