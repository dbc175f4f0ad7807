"""The scenarios, one module each: NAME, HELP, add_arguments(parser) and `async run(bench, args)`
returning a Report. The order here is the order `python -m bench all` runs them in."""

from __future__ import annotations

import argparse
from types import ModuleType

from bench.scenarios import (
    broker,
    cancel,
    claim,
    dependents,
    dispatch,
    drain,
    engines,
    held,
    history,
    ingest,
    lifecycles,
    peers,
    publish,
    slow_target,
    steady,
    workers,
)

SCENARIOS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (
        publish,
        broker,
        claim,
        dispatch,
        drain,
        peers,
        lifecycles,
        steady,
        engines,
        workers,
        history,
        ingest,
        slow_target,
        held,
        dependents,
        cancel,
    )
}


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> dict[str, argparse.ArgumentParser]:
    parsers = {}
    for name, module in SCENARIOS.items():
        p = sub.add_parser(name, parents=[common], help=module.HELP, description=module.__doc__)
        module.add_arguments(p)
        parsers[name] = p
    return parsers
