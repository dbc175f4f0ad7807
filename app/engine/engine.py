"""The engine: a list of background services (app/background.py) run together and stopped
together. The dispatcher claims due runs and publishes them; the rest keep the database in shape:
leases rescued, flow room granted, deadlines ended, cron occurrences made, partitions premade and
retired, statistics kept fresh, idempotency and dedupe keys pruned, completed groups fired and
old ones pruned."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from nats.aio.client import Client as NATS

from app.background import Service, run_services
from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.engine.claims import Hints
from app.engine.cron import CronMaterializer
from app.engine.dedupe import DedupeKeySweeper
from app.engine.dispatcher import Dispatcher
from app.engine.expiry import RunExpiry
from app.engine.groups import GroupFirer, GroupPruner
from app.engine.idempotency import IdempotencyKeyPruner
from app.engine.keeper import FlowKeeper
from app.engine.partitions import PartitionMaintenance, PartitionStatistics
from app.engine.reaper import Reaper

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, nc: NATS, hints: Hints | None = None):
        """`hints`: the Redis hot index for the claim when it is on (app.runtime.hot_index_of)."""
        self.settings = settings
        self.nc = nc
        self.dispatcher = Dispatcher(settings, pool, nc, hints)
        self.maintenance = PartitionMaintenance(settings, pool)
        self.services: list[Service] = [
            self.dispatcher,
            Reaper(settings, pool, nc),
            RunExpiry(settings, pool),
            FlowKeeper(settings, pool),
            CronMaterializer(settings, pool),
            self.maintenance,
            PartitionStatistics(settings, pool),
            IdempotencyKeyPruner(settings, pool),
            DedupeKeySweeper(settings, pool),
            GroupFirer(settings, pool),
            GroupPruner(settings, pool),
        ]

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_stream(self.nc.jetstream(), self.settings)
        # Partitions first: a fresh database gets today's partition before the first claim.
        try:
            await self.maintenance.step()
        except Exception as exc:
            log.warning("initial partition maintenance failed: %s", exc)
        await run_services("engine", stop, self.services)
