"""A Celery worker for `bench peers`: `python -m bench.peers.celery_worker REDIS_URL --pool P
--concurrency C --prefetch M`. The Redis broker (kombu's transport), a no-op task `noop` with
acks_late (a message leaves the broker's `unacked` hash once the task has run), no result backend,
no gossip, mingle or heartbeat; prints `ready` once it consumes, runs until SIGTERM (warm shutdown).

The backlog is pushed to a list of its own and RENAMEd onto the consumed queue in one command, so
every job becomes visible at one instant, as a committed batch does in Postgres."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

import redis
from celery import Celery, signals

QUEUE = "celery"
STAGING = "bench-staging"


def make_app(broker: str) -> Celery:
    app = Celery("bench_peers", broker=broker)
    app.conf.update(
        task_acks_late=True,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        task_default_queue=QUEUE,
    )

    @app.task(name="noop")  # type: ignore[untyped-decorator]
    def noop() -> None:
        return None

    return app


app = make_app(os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/0"))


@signals.worker_ready.connect  # type: ignore[untyped-decorator]
def _ready(**_: object) -> None:
    # Celery redirects sys.stdout to its log: the bench reads the process's own stdout.
    out = sys.__stdout__
    assert out is not None
    out.write("ready\n")
    out.flush()


def enqueue(broker: str, n: int, chunk: int = 5_000) -> None:
    """N `noop` messages onto a staging list, then one RENAME onto the consumed queue. The first is
    sent by Celery itself; the others are its bytes with ids of their own (task id, delivery tag),
    pushed in pipelined chunks: what N sends would write, without N round trips."""
    local = make_app(broker)
    client = redis.Redis.from_url(broker)
    try:
        client.delete(STAGING)
        result = local.send_task("noop", queue=STAGING, routing_key=STAGING)
        first = client.lindex(STAGING, 0)
        assert isinstance(first, bytes)
        text = first.decode()
        tag = json.loads(text)["properties"]["delivery_tag"]
        for i in range(0, n - 1, chunk):
            pipe = client.pipeline(transaction=False)
            for _ in range(min(chunk, n - 1 - i)):
                pipe.lpush(
                    STAGING, text.replace(result.id, str(uuid.uuid4())).replace(tag, str(uuid.uuid4()))
                )
            pipe.execute()
        client.rename(STAGING, QUEUE)
    finally:
        client.close()


def remaining(broker: str) -> int:
    """Jobs not yet acknowledged: waiting in the queue or delivered and unacked."""
    client = redis.Redis.from_url(broker)
    try:
        return int(client.llen(QUEUE)) + int(client.hlen("unacked")) + int(client.llen(STAGING))
    finally:
        client.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("broker")
    p.add_argument("--pool", default="threads")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--prefetch", type=int, default=100)
    args = p.parse_args()
    os.environ["BENCH_CELERY_BROKER"] = args.broker
    worker = make_app(args.broker)
    worker.conf.worker_prefetch_multiplier = args.prefetch
    sys.stdout.flush()
    worker.worker_main(
        [
            "worker",
            f"--pool={args.pool}",
            f"--concurrency={args.concurrency}",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--queues={QUEUE}",
        ]
    )


if __name__ == "__main__":
    main()
