"""The reference HA topology (stack/ha.py) comes up on one machine and carries runs end to end: three
nats-servers with both lanes' streams at three replicas, three Postgres servers under Patroni with a
synchronous standby, two APIs, two engines and two workers. Runs submitted through either API reach
the webhook once each. (The faults that strike its parts one at a time have tests of their own.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import nats
import pytest

from stack.eventually import eventually
from stack.ha import running_ha
from tests.faults.test_postgres_failover import require_patroni_stack
from tests.receiver import running_receiver
from tests.support import Services, bearer

RUNS = 40


@pytest.mark.timeout(300)
async def test_the_reference_topology_carries_runs_through_every_part(
    services: Services, tmp_path: Path
) -> None:
    require_patroni_stack()
    async with running_receiver() as receiver, running_ha(tmp_path, services.redis_url) as ha:
        assert ha.postgres.sync_standby() is not None and ha.postgres.leader() is not None
        apis = [httpx.AsyncClient(base_url=url, timeout=30) for url in ha.api_urls]
        try:
            r = await apis[0].post("/tenants", json={"id": "acme"}, headers=bearer(ha.settings.admin_token))
            assert r.status_code == 201, r.text
            auth = bearer(r.json()["api_key"])
            job = {"target": {"type": "http", "url": receiver.url}, "max_attempts": 3}
            assert (await apis[1].put("/tenants/acme/jobs/hook", json=job, headers=auth)).status_code == 201
            ids = []
            for i in range(RUNS):  # alternately through each API
                r = await apis[i % 2].post("/tenants/acme/runs", json={"job": "hook"}, headers=auth)
                assert r.status_code == 201, r.text
                ids.append(r.json()["id"])

            async def statuses() -> Counter[str]:
                return Counter(
                    [(await apis[0].get(f"/runs/{i}", headers=auth)).json()["status"] for i in ids]
                )

            done = await eventually(
                statuses, until=lambda c: c["succeeded"] == RUNS, timeout=60, interval=0.5
            )
            assert done == {"succeeded": RUNS}
        finally:
            for api in apis:
                await api.aclose()
        called = Counter(c.headers.get("scheduler-run-id") for c in receiver.calls if not c.is_callback)
        assert set(called) == set(ids) and set(called.values()) == {1}  # each once
        nc = await nats.connect(servers=ha.nats_url.split(","))
        try:
            info = await nc.jetstream().stream_info(ha.settings.stream)
            assert info.config.num_replicas == 3 and info.cluster is not None
            assert len(info.cluster.replicas or []) == 2  # the leader and two copies
        finally:
            await nc.close()
