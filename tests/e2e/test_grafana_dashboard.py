"""k8s/grafana/scheduler.json against a real Prometheus scraping a real API, engine and worker under
load — runs that succeed and fail, in both lanes, held by a pause, reporting back by callbacks that
are delivered or refused, requests answered 2xx and 4xx: every query of every panel returns data,
and every metric, label and label value a query, a legend or a variable names is one the processes
export, so no typo ships. A query for what only a fault makes (a rescue, a 5xx) adds `or vector(0)`;
its names are checked all the same, against the metric families the targets expose. Skips only
where no `prometheus` binary is installed (Debian: `apt-get install prometheus`)."""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.metrics import MetricWrapperBase

from app.config import Settings
from app.dev import free_port
from app.telemetry import metrics
from bench import prometheus
from bench.prometheus import grouping_labels, label_matchers, metric_names
from tests.processes import processes
from tests.receiver import running_receiver
from tests.support import create_tenant

DASHBOARD = Path(__file__).resolve().parents[2] / "k8s" / "grafana" / "scheduler.json"
# Grafana's variables, as a query sees them: every lane, and a rate window the whole load fits in.
VARIABLES = {"$__rate_interval": "1m", "$lane": ".*"}
LOAD_SECONDS = 12.0
# Series only a fault makes: a query reading one falls back on `or vector(0)`. The instrumentator
# groups statuses by class, so a 5xx answer is counted under status="5xx".
ONLY_UNDER_FAULTS = {("http_requests_total", "status", "5xx")}
STATUS_CLASS = re.compile(r"^[1-5]xx$")


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that draws, those of a collapsed row included."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def substituted(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_the_dashboard_is_an_importable_model() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    # The datasource is chosen on import (and switchable): a variable, never one installation's uid.
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    drawn = list(panels(dashboard))
    assert len({p["id"] for p in [*dashboard["panels"], *drawn]}) == len(dashboard["panels"]) + sum(
        len(p.get("panels", [])) for p in dashboard["panels"]
    ), "panel ids are unique"
    for panel in drawn:
        assert panel["title"] and panel["description"], panel
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}" and target["expr"], panel["title"]
        assert {target["refId"] for target in panel["targets"]} == {
            "ABCDEFGH"[i] for i in range(len(panel["targets"]))
        }
    # Every variable a query uses is one the dashboard defines (or Grafana's own).
    used = {v for p in drawn for t in p["targets"] for v in re.findall(r"\$(\w+)", t["expr"])}
    assert used <= set(variables) | {"__rate_interval"}, used


def declared_labels() -> dict[str, set[str]]:
    """The label names of every scheduler metric by each name it exposes (a counter's `_total`, a
    histogram's `_bucket`, `_sum`, `_count`): what a family without series yet can carry."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    out: dict[str, set[str]] = {}
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase):
            for suffix in suffixes[metric._type]:
                out[metric._name + suffix] = set(metric._labelnames) | (
                    {"le"} if suffix == "_bucket" else set()
                )
    return out


async def load(base: str, receiver_url: str, refused_url: str) -> None:
    """A tenant's jobs of every kind the panels show, submitted in batches for LOAD_SECONDS, and
    requests answered 404 and 422 besides."""
    http = {"type": "http", "url": receiver_url}
    jobs = {
        "ok": {"target": http},
        "fails": {"target": http, "max_attempts": 1},
        "urgent": {"target": {"type": "noop"}, "priority": 0},
        "told": {"target": {"type": "noop"}, "callback": {"url": receiver_url}},
        "untold": {"target": {"type": "noop"}, "callback": {"url": refused_url}},
        "paused": {"target": {"type": "noop"}, "paused": True},
    }
    runs = [
        {"job": "ok"},
        {"job": "fails", "payload": {"statuses": [500]}},
        {"job": "urgent"},
        {"job": "told"},
        {"job": "untold"},
        {"job": "paused"},
    ]
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        auth = {"Authorization": f"Bearer {(await create_tenant(client, 'graphs'))['api_key']}"}
        for name, job in jobs.items():
            r = await client.put(f"/tenants/graphs/jobs/{name}", json=job, headers=auth)
            assert r.status_code == 201, r.text
        deadline = time.monotonic() + LOAD_SECONDS
        while time.monotonic() < deadline:
            r = await client.post("/tenants/graphs/runs/batch", json={"runs": runs * 2}, headers=auth)
            assert r.status_code == 201, r.text
            assert (await client.get(f"/runs/{uuid.uuid4()}", headers=auth)).status_code == 404
            r = await client.post("/tenants/graphs/runs", json={"job": "nope"}, headers=auth)
            assert r.status_code == 422
            await asyncio.sleep(0.5)


@pytest.mark.skipif(prometheus.binary() is None, reason="no prometheus binary installed")
async def test_every_panel_query_returns_data(settings: Settings, tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    # A refused callback is tried once more, soon, then fails for good: both of its counters move.
    settings = settings.model_copy(update={"callback_max_attempts": 2, "callback_backoff_seconds": 0.2})
    async with running_receiver() as receiver, processes(settings, tmp_path) as spawn:
        api, engine, worker = spawn("api", SCHEDULER_ENGINE="off"), spawn("engine"), spawn("worker")
        for process in (api, engine, worker):
            await process.wait_ready()
        targets = [(p.role, f"127.0.0.1:{p.port}") for p in (api, engine, worker)]
        async with prometheus.running_prometheus(targets) as prom:
            await load(api.base_url, receiver.url, f"http://127.0.0.1:{free_port()}/refused")
            await asyncio.sleep(4)  # the last callbacks' second tries, and scrapes of it all
            problems = await check(dashboard, prom)
    assert not problems, "\n".join(problems)


async def check(dashboard: dict[str, Any], prom: prometheus.Prometheus) -> list[str]:
    names = set(await prom.api("label/__name__/values"))
    # Families the targets expose, with or without series (a labelled counter no fault moved yet).
    families = set(await prom.api("metadata"))
    declared = declared_labels()
    series_labels: dict[str, set[str]] = {}

    async def labels_of(metric: str) -> set[str]:
        if metric not in series_labels:
            series = await prom.api("series", **{"match[]": metric})
            series_labels[metric] = {label for s in series for label in s} or declared.get(metric, set())
        return series_labels[metric]

    def known(metric: str) -> bool:
        family = re.sub(r"_(bucket|sum|count)$", "", metric)
        return metric in names or metric in families or family in families

    problems = []
    for panel in panels(dashboard):
        for target in panel["targets"]:
            where = f"{panel['title']!r} {target['refId']}"
            expr = substituted(target["expr"])
            read = metric_names(expr)
            problems += [
                f"{where}: no metric {name!r} is exported" for name in sorted(read) if not known(name)
            ]
            labels = set().union(*[await labels_of(name) for name in read])
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            for label in sorted((grouping_labels(expr) | legend) - labels):
                problems.append(f"{where}: no metric of {sorted(read)} has a label {label!r}")
            for metric, label, op, value in label_matchers(expr):
                if label not in await labels_of(metric):
                    problems.append(f"{where}: {metric} has no label {label!r}")
                elif op == "=":
                    values = await prom.api(f"label/{label}/values", **{"match[]": metric})
                    if (metric, label, value) in ONLY_UNDER_FAULTS:
                        if not values or not all(STATUS_CLASS.match(v) for v in values):
                            problems.append(f"{where}: {metric}{{{label}}} is not by status class: {values}")
                    elif value not in values:
                        problems.append(f"{where}: {metric}{{{label}={value!r}}} is none of {values}")
            data = await prom.api("query", query=expr)
            samples = [float(s["value"][1]) for s in data["result"]]
            if not any(math.isfinite(v) for v in samples):
                problems.append(f"{where}: {expr} returned no data ({data['result']})")
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        if found := re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query):
            metric, label = found[1], found[2]
            values = await prom.api(f"label/{label}/values", **{"match[]": metric})
            if not values:
                problems.append(f"variable {variable['name']}: {query} has no values")
    return problems
