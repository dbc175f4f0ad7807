"""The engine: its services run together (dispatcher, reaper, expiry sweep, cron materializer,
partition maintenance and statistics, idempotency-key pruning, the unique and debounce keys' sweep,
firing completed groups) as named tasks, supervised with asyncio.wait(FIRST_COMPLETED) and stopped
by one Event."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from nats.aio.client import Client as NATS

from app.aio import supervise
from app.bus.hot_index import HotIndex
from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.engine.cron import CronMaterializer
from app.engine.dedupe import DedupeKeySweeper
from app.engine.dispatcher import Dispatcher
from app.engine.expiry import RunExpiry
from app.engine.groups import GroupFirer
from app.engine.idempotency import IdempotencyKeyPruner
from app.engine.keeper import FlowKeeper
from app.engine.partitions import PartitionMaintenance
from app.engine.reaper import Reaper

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS, hot_index: HotIndex | None = None):
        self.settings = settings
        self.nc = nc
        self.dispatcher = Dispatcher(settings, pool, nc, hot_index)
        self.reaper = Reaper(settings, pool, hot_index, nc)
        self.expiry = RunExpiry(settings, pool)
        self.keeper = FlowKeeper(settings, pool, hot_index)
        self.cron = CronMaterializer(settings, pool, hot_index=hot_index)
        self.maintenance = PartitionMaintenance(settings, pool)
        self.idempotency_keys = IdempotencyKeyPruner(settings, pool)
        self.dedupe_keys = DedupeKeySweeper(settings, pool)
        self.groups = GroupFirer(settings, pool)

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_stream(self.nc.jetstream(), self.settings)
        # Partitions first: a fresh database gets today's partition before the first claim.
        try:
            await self.maintenance.run_once()
        except Exception as exc:
            log.warning("initial partition maintenance failed: %s", exc)
        tasks = {
            asyncio.create_task(self.dispatcher.run(stop), name="dispatcher"),
            asyncio.create_task(self.reaper.run(stop), name="reaper"),
            asyncio.create_task(self.expiry.run(stop), name="expiry"),
            asyncio.create_task(self.keeper.run(stop), name="keeper"),
            asyncio.create_task(self.cron.run(stop), name="cron"),
            asyncio.create_task(self.maintenance.run(stop), name="partitions"),
            asyncio.create_task(self.maintenance.keep_statistics(stop), name="statistics"),
            asyncio.create_task(self.idempotency_keys.run(stop), name="idempotency_keys"),
            asyncio.create_task(self.dedupe_keys.run(stop), name="dedupe_keys"),
            asyncio.create_task(self.groups.run(stop), name="groups"),
        }
        died = await supervise(tasks, stop, "engine")
        stop.set()
        # Each task finishes its current step (a publish in flight settles) before returning.
        await asyncio.gather(*tasks, return_exceptions=True)
        if died is not None:
            raise died
