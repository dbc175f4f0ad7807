"""`app.dev.free_port` hands out ports for servers that bind them later, from several processes at
once (the test run's workers). Each process walks the range in an order of its own, so two processes
that start near each other do not hand out the same ports in step."""

import itertools
import subprocess
import sys

TAKE = 200
_HAND_OUT = f"from app.dev import free_port\nprint(*(free_port() for _ in range({TAKE})))"


def _handed_out() -> list[int]:
    done = subprocess.run([sys.executable, "-c", _HAND_OUT], capture_output=True, text=True, check=True)
    return [int(port) for port in done.stdout.split()]


def test_a_process_hands_out_each_port_once_in_no_walk_of_the_range() -> None:
    ports = _handed_out()
    assert len(set(ports)) == TAKE
    assert all(20_000 <= port < 32_768 for port in ports)
    steps = sum(1 for a, b in itertools.pairwise(ports) if b - a == 1)
    assert steps < TAKE // 10, f"{steps} of {TAKE} ports follow the one before"


def test_two_processes_rarely_hand_out_the_same_ports() -> None:
    # Two random orders of 12,768 ports share ~3 of their first 200; walks from nearby starts share most.
    shared = set(_handed_out()) & set(_handed_out())
    assert len(shared) < 30, sorted(shared)
