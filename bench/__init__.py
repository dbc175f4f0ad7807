"""The measuring instrument (DESIGN.md §8): scenarios that drive real Postgres, NATS and Redis (the
configured ones, or embedded ones from the wheels), print the environment first, show progress, and
save what they found as JSON + Markdown (+ a PNG chart) under bench/results, ending with what the
numbers do not mean. `python -m bench SCENARIO [--smoke]`; `python -m bench all --smoke` is CI's
smoke run. Nothing here is imported by app/; the bench imports app/ to drive the real code."""
