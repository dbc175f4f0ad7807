"""The worker: a list of background services (app/background.py) that take runs from JetStream,
start them fenced, execute them and record their outcomes.

- intake (intake.py): fetches, holds back what a tenant may not run yet, starts (starter.py);
- callbacks (callbacks.py): delivers completion callbacks from the outbox;
- completer (completer.py): group-commits outcomes; a run's message is acked once its outcome is
  durable;
- heartbeat and in progress (completer.py): keep the runs' leases in Postgres and their messages in
  JetStream (every quarter of ACK_WAIT_SECONDS, which is short so that a killed worker's messages
  reach another worker within seconds).

They stop in that order: the intake hands back what will not finish within the grace period, the
completer then records what finished, and the leases and messages are kept until it has. A cancel
of a run being executed stops its attempt (cancels.py).
"""

from __future__ import annotations

import asyncio

import asyncpg
from nats.aio.client import Client as NATS

from app.background import Service, run_services
from app.bus.jetstream import ensure_consumer
from app.config import Settings
from app.worker.callbacks import CallbackDeliverer
from app.worker.completer import Completer, Heartbeat, InProgress
from app.worker.delivery import quietly
from app.worker.executor import Executor
from app.worker.fairness import TenantSlots
from app.worker.intake import Intake
from app.worker.starter import Starter
from app.worker.targets import Handler, load_handlers


class Worker:
    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        nc: NATS,
        handlers: dict[str, Handler] | None = None,
    ):
        self.settings = settings
        self.nc = nc
        self.slots = TenantSlots(settings.worker_concurrency, settings.worker_tenant_share)
        self.executor = Executor(
            settings, pool, load_handlers() if handlers is None else handlers, self.slots.ceiling
        )
        self.completer = Completer(settings, pool)
        self.starter = Starter(settings, pool, self.slots, self.executor, self.completer)
        self.cancels = self.starter.cancels
        self.intake = Intake(settings, nc, self.slots, self.starter, self.completer)
        self.held = self.intake.held
        executing = self.starter.executing
        # Stopped stage by stage, in this order (see the module's docstring).
        self.stages: list[list[Service]] = [
            [self.intake, CallbackDeliverer(settings, pool, self.executor.signing_keys)],
            [self.completer],
            [
                Heartbeat(
                    self.completer,
                    lambda: list(executing.values()),
                    lambda: list(self.held),
                    self.cancels.check,
                ),
                InProgress(self.completer, self.intake.holding),
            ],
        ]

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_consumer(self.nc.jetstream(), self.settings)
        notices = await self.cancels.listen(self.nc, self.settings)
        try:
            await run_services("worker", stop, *self.stages)
        finally:
            await quietly(notices.unsubscribe())
            await self.executor.close()
