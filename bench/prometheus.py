"""A real Prometheus (Debian's `prometheus` package, or any `prometheus` binary on PATH) scraping the
scheduler's processes, and the PromQL our Kubernetes manifests scale and alert on, read from k8s/.

Used by the `slow-target` bench and by a test: the scaling queries are only worth something if they
rise for the tier that binds and fall when its backlog is gone, on real scrapes. The names a PromQL
expression reads (metrics, label matchers, grouping labels) are how tests hold k8s/'s queries and the
Grafana dashboard to what the processes export."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.dev import free_port

K8S = Path(__file__).resolve().parents[1] / "k8s"


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the manifests: a scaling trigger or an alert rule."""

    name: str  # "scale engine: due-backlog", "alert: SchedulerRunsReaped"
    expr: str
    threshold: float | None = None  # a trigger's target value; alerts fire on any sample


def manifest_queries(k8s: Path = K8S) -> list[Query]:
    """Every Prometheus trigger of every ScaledObject, and every rule of the alert rules file."""
    out: list[Query] = []
    for path in sorted(k8s.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc.get("kind") == "ScaledObject":
                target = doc["spec"]["scaleTargetRef"]["name"].removeprefix("scheduler-")
                for t in doc["spec"]["triggers"]:
                    if t["type"] == "prometheus":
                        meta = t["metadata"]
                        name = f"scale {target}: {t.get('name', 'prometheus')}"
                        out.append(Query(name, meta["query"], float(meta["threshold"])))
            for group in _rule_groups(doc):
                for rule in group.get("rules", []):
                    if "alert" in rule:
                        out.append(Query(f"alert: {rule['alert']}", rule["expr"]))
    return out


PROMQL_WORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
    | {"inf", "nan"}
)
_LABEL_VALUE = r'"(?:\\.|[^"\\])*"'


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    expr = re.sub(rf"{_LABEL_VALUE}|'(?:\\.|[^'\\])*'", '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)  # ranges and subqueries
    # Label lists of aggregations and vector matching.
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    # What is left: functions (followed by "("), keywords, numbers and metric names.
    return {
        m[1]
        for m in re.finditer(r"(?<![\w.:])([A-Za-z_:][\w:]*)\s*(\()?", expr)
        if not m[2] and m[1].lower() not in PROMQL_WORDS
    }


def label_matchers(expr: str) -> list[tuple[str, str, str, str]]:
    """(metric, label, operator, value) of every label matcher of a `metric{...}` selector."""
    return [
        (selector[1], m[1], m[2], m[3][1:-1])
        for selector in re.finditer(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}", expr)
        for m in re.finditer(rf"(\w+)\s*(=~|!~|!=|=)\s*({_LABEL_VALUE})", selector[2])
    ]


def grouping_labels(expr: str) -> set[str]:
    """The labels an expression aggregates or matches by (`by`, `without`, `on`, `ignoring`, …)."""
    lists = re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr)
    return {label.strip() for labels in lists for label in labels.split(",") if label.strip()}


def _rule_groups(doc: dict[str, Any]) -> list[dict[str, Any]]:
    # A PrometheusRule (spec.groups) or a ConfigMap carrying a rules file (a YAML file by its name:
    # other ConfigMaps carry other formats, nats.conf say).
    if doc.get("kind") == "PrometheusRule":
        return list(doc.get("spec", {}).get("groups", []))
    groups: list[dict[str, Any]] = []
    if doc.get("kind") == "ConfigMap":
        for name, text in doc.get("data", {}).items():
            if not name.endswith((".yaml", ".yml")):
                continue
            rules = yaml.safe_load(text)
            if isinstance(rules, dict):
                groups += rules.get("groups", [])
    return groups


def binary() -> str | None:
    return shutil.which("prometheus")


class Prometheus:
    def __init__(self, url: str, proc: subprocess.Popen[bytes]):
        self.url = url
        self.proc = proc
        self.http = httpx.AsyncClient(base_url=url, timeout=5.0)

    async def value(self, expr: str) -> float | None:
        """The query's value now: the largest sample, or None when the result is empty."""
        r = await self.http.get("/api/v1/query", params={"query": expr})
        body = r.json()
        if body.get("status") != "success":
            raise ValueError(f"{expr}: {body.get('error')}")
        result = body["data"]["result"]
        if body["data"]["resultType"] == "scalar":
            return float(result[1])
        return max((float(s["value"][1]) for s in result), default=None)

    async def api(self, path: str, **params: str) -> Any:
        """The `data` of an HTTP API answer (`/api/v1/query`, `/api/v1/metadata`, …); ValueError
        with Prometheus' error when it refused."""
        body = (await self.http.get(f"/api/v1/{path}", params=params)).json()
        if body.get("status") != "success":
            raise ValueError(f"{path} {params}: {body.get('error')}")
        return body["data"]

    async def targets_up(self) -> int:
        r = await self.http.get("/api/v1/targets")
        return sum(t["health"] == "up" for t in r.json()["data"]["activeTargets"])


@contextlib.asynccontextmanager
async def running_prometheus(
    targets: Sequence[tuple[str, str]], *, scrape_interval: float = 1.0
) -> AsyncIterator[Prometheus]:
    """Prometheus on a free loopback port with a temp config and data dir, scraping each
    (job, host:port); yields once every target was scraped once. Never a system service."""
    exe = binary()
    if exe is None:
        raise RuntimeError("no prometheus binary on PATH (Debian: apt-get install prometheus)")
    root = Path(tempfile.mkdtemp(prefix="scheduler-prometheus-"))
    every = f"{round(scrape_interval * 1000)}ms"
    config = {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [t]}]} for job, t in targets],
    }
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = _start(exe, root, port)
    prom = Prometheus(f"http://127.0.0.1:{port}", proc)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(root / 'prometheus.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
                if await prom.targets_up() == len(targets):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not scrape every target within 60 s")
            await asyncio.sleep(0.2)
        yield prom
    finally:
        await prom.http.aclose()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def _start(exe: str, root: Path, port: int) -> subprocess.Popen[bytes]:
    with open(root / "prometheus.log", "wb") as log:
        return subprocess.Popen(
            [
                exe,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                # Without these, the Debian build also asks for its console templates.
                f"--web.console.templates={root}",
                f"--web.console.libraries={root}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
