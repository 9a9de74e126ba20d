"""deploy/k8s/redis/, checked without kubectl or a cluster: the overlay parses, its patches apply to the base as
kustomize applies them (JSON patches, a resource deleted), and what comes out holds together: the Redis backend in
the ConfigMap with the base's channels, env from the Secret and the downward API under names the settings read,
the ports the probes, the NetworkPolicy and the advertised URL name, no claim left; two replicas started with that
configuration and env on a local redis-server answer the declared probes and reach each other at the URL each
announced."""

from __future__ import annotations

import asyncio
import copy
import re
import tomllib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from streamrelay.adapters.redis import ReplicaUrls, connect
from streamrelay.config.settings import ServiceSettings, load_settings
from tests.deploy.support import DEPLOY, Process, cli_accepts, started, started_redis
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

K8S = DEPLOY / "k8s"
OVERLAY = K8S / "redis"
SETTING_ENV = "STREAMRELAY_SERVICE__"

Document = dict[str, Any]


def load(path: Path) -> list[Document]:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert all(isinstance(d, dict | list) for d in documents), path
    return documents


def kustomization(folder: Path) -> Document:
    (found,) = load(folder / "kustomization.yaml")
    assert found["kind"] == "Kustomization", folder
    return found


def resources(folder: Path) -> list[Document]:
    """The manifests a kustomization lists, in order (a directory: its own kustomization, patches applied)."""
    out: list[Document] = []
    for resource in kustomization(folder)["resources"]:
        path = (folder / resource).resolve()
        out += build(path) if path.is_dir() else load(path)
    return out


def pointer(path: str) -> list[str]:
    assert path.startswith("/"), path
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(document: Document, operations: list[Document]) -> None:
    """RFC 6902's ``test``, ``add``, ``replace`` and ``remove`` (all this overlay uses), in place.

    Raises:
        AssertionError: a path that does not exist, a failed ``test``, another operation.
    """
    for operation in operations:
        *parents, last = pointer(operation["path"])
        node: Any = document
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        op = operation["op"]
        index: int | str
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if op == "add":
                node.insert(index, copy.deepcopy(operation["value"]))
                continue
            assert 0 <= index < len(node), operation
        else:
            index = last
            if op == "add":
                node[index] = copy.deepcopy(operation["value"])
                continue
            assert index in node, operation
        if op == "test":
            assert node[index] == operation["value"], f"test failed: {operation} (found {node[index]!r})"
        elif op == "replace":
            node[index] = copy.deepcopy(operation["value"])
        elif op == "remove":
            del node[index]
        else:
            raise AssertionError(f"operation {op!r} is not one this test applies")


def matches(document: Document, target: Document) -> bool:
    kind, name = str(document["kind"]), str(document["metadata"]["name"])
    group = str(document["apiVersion"]).rpartition("/")[0]
    wanted = (str(target["kind"]), str(target.get("name", name)), str(target.get("group", group)))
    return (kind, name, group) == wanted


def build(folder: Path) -> list[Document]:
    """What ``kustomize build FOLDER`` gives for the kinds of patch this overlay uses (a JSON patch with a target, a
    ``$patch: delete`` of one resource); any other patch fails."""
    documents = copy.deepcopy(resources(folder))
    for patch in kustomization(folder).get("patches", []):
        (body,) = load(folder / patch["path"]) if "path" in patch else [yaml.safe_load(patch["patch"])]
        if isinstance(body, list):
            hits = [d for d in documents if matches(d, patch["target"])]
            assert len(hits) == 1, f"the patch {patch} selects {len(hits)} resources"
            json_patch(hits[0], body)
        else:
            assert body.pop("$patch", None) == "delete" and "spec" not in body, f"not a delete: {patch}"
            target = {"kind": body["kind"], "name": body["metadata"]["name"]}
            hits = [d for d in documents if matches(d, target)]
            assert len(hits) == 1, f"{patch} deletes {len(hits)} resources"
            documents.remove(hits[0])
    return documents


def by_kind(documents: list[Document]) -> dict[str, Document]:
    found: dict[str, Document] = {}
    for document in documents:
        assert document["kind"] not in found, f"two {document['kind']} manifests"
        found[document["kind"]] = document
    return found


def overlay() -> dict[str, Document]:
    return by_kind(build(OVERLAY))


def base() -> dict[str, Document]:
    return by_kind(build(K8S))


def pod(documents: dict[str, Document]) -> Document:
    spec: Document = documents["Deployment"]["spec"]["template"]["spec"]
    return spec


def sidecar(documents: dict[str, Document]) -> Document:
    (container,) = pod(documents)["initContainers"]
    assert isinstance(container, dict)
    return container


def config(documents: dict[str, Document]) -> dict[str, Any]:
    return tomllib.loads(documents["ConfigMap"]["data"]["channels.toml"])


def secret() -> Document:
    (found,) = load(K8S / "secret.example.yaml")
    return found


def test_the_overlay_builds_on_the_base_without_the_claim() -> None:
    assert kustomization(OVERLAY)["resources"][0] == "../base"  # the base `kubectl apply -k deploy/k8s` applies
    assert kustomization(K8S)["resources"] == ["base"]
    documents = overlay()
    assert set(documents) == {"Deployment", "ConfigMap", "Service", "NetworkPolicy", "PodDisruptionBudget"}
    assert set(base()) == {"Deployment", "ConfigMap", "Service", "PersistentVolumeClaim"}  # the base is untouched
    assert "persistentVolumeClaim" not in str(pod(documents)["volumes"])
    volumes = {v["name"] for v in pod(documents)["volumes"]}
    assert {m["name"] for m in sidecar(documents)["volumeMounts"]} <= volumes
    assert sidecar(documents)["restartPolicy"] == "Always"  # still the native sidecar beside the bot
    cli_accepts(sidecar(documents)["args"])


def test_replicas_roll_over_one_at_a_time_on_several_nodes() -> None:
    documents = overlay()
    deployment = documents["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] > 1
    strategy = deployment["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate" and strategy["rollingUpdate"]["maxUnavailable"] == 0
    (spread,) = pod(documents)["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["labelSelector"]["matchLabels"] == labels
    budget = documents["PodDisruptionBudget"]["spec"]
    assert budget["selector"]["matchLabels"] == labels and 0 < budget["minAvailable"] < deployment["spec"]["replicas"]


def test_the_configuration_is_the_bases_on_the_redis_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ours, theirs = config(overlay()), config(base())
    assert ours["channels"] == theirs["channels"]  # only [service] differs
    service = ours["service"]
    assert service["backend"] == "redis" and service["host"] == "0.0.0.0" and "ledger" not in service
    assert "redis_url" not in service  # it may hold a password: from the Secret only
    changed = {
        key for key in service.keys() | theirs["service"].keys() if service.get(key) != theirs["service"].get(key)
    }
    assert changed == {"host", "backend", "partitions", "lease_ttl_s", "ledger"}
    (tmp_path / "channels.toml").write_text(overlay()["ConfigMap"]["data"]["channels.toml"])
    monkeypatch.setenv("STREAMRELAY_SERVICE__REDIS_URL", "redis://127.0.0.1:6379/0")
    assert load_settings(tmp_path / "channels.toml").service.backend == "redis"  # every key known, values valid


def test_env_ports_and_probes_name_only_what_exists() -> None:
    documents = overlay()
    container = sidecar(documents)
    service = config(documents)["service"]
    keys, fields = secret()["stringData"], set(ServiceSettings.model_fields)
    defined: set[str] = set()
    for entry in container["env"]:
        name = entry["name"]
        if name.startswith(SETTING_ENV):
            assert name.removeprefix(SETTING_ENV).lower() in fields, f"{name} is no setting"
        if "value" in entry:
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", entry["value"]):
                assert ref in defined, f"{name} uses $({ref}) before it is defined"  # the kubelet expands only those
        elif "secretKeyRef" in entry["valueFrom"]:
            ref = entry["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret()["metadata"]["name"] and ref["key"] in keys, name
        else:
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", name
        defined.add(name)
    env = {e["name"]: e for e in container["env"]}
    assert env["STREAMRELAY_SERVICE__REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"] == "redis-url"
    assert env["STREAMRELAY_SERVICE__ADVERTISE_URL"]["value"] == f"http://$(POD_IP):{service['port']}"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"ingest": service["port"], "ops": service["ops_port"]}
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[kind]["httpGet"]["port"] in ports, kind
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (bot,) = pod(documents)["containers"]
    bot_url = next(e["value"] for e in bot["env"] if e["name"] == "STREAMRELAY_URL")
    assert bot_url == f"http://127.0.0.1:{service['port']}"  # the bot still posts to its own pod's replica

    labels = documents["Deployment"]["spec"]["template"]["metadata"]["labels"]
    policy = documents["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == labels and policy["policyTypes"] == ["Ingress"]
    admitted = {p["port"]: rule.get("from") for rule in policy["ingress"] for p in rule["ports"]}
    assert set(admitted) == set(ports)
    assert admitted["ingest"] == [{"podSelector": {"matchLabels": labels}}]  # ingest: the bot's own pods only
    assert [p["targetPort"] for p in documents["Service"]["spec"]["ports"]] == ["ops"]  # no Service for ingest


def expand(env: list[Document], values: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet gives it: ``values`` for what comes from the Secret and the
    downward API, ``$(NAME)`` replaced by an earlier variable's value."""
    out: dict[str, str] = {}
    for entry in env:
        if "value" in entry:
            out[entry["name"]] = re.sub(r"\$\(([A-Za-z0-9_]+)\)", lambda m: out[m[1]], entry["value"])
        else:
            out[entry["name"]] = values[entry["name"]]
    return out


async def announced(redis_url: str) -> set[str]:
    client = connect(redis_url)
    try:
        return set((await ReplicaUrls(client).live()).values())
    finally:
        await client.aclose()


def test_two_replicas_with_the_overlays_configuration_answer_the_probes_and_reach_each_other(tmp_path: Path) -> None:
    documents = overlay()
    container = sidecar(documents)
    service = config(documents)["service"]
    (tmp_path / "channels.toml").write_text(documents["ConfigMap"]["data"]["channels.toml"])
    redis_port = free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    from_secret = {
        "STREAMRELAY_TOKEN": "k8s-redis-ingest-token",
        "STREAMRELAY_METRICS_TOKEN": "k8s-redis-metrics-token",
        "TELEGRAM_BOT_TOKEN": "123456:DRY-run-token-for-the-mock-bot-api",
        "STREAMRELAY_SERVICE__REDIS_URL": redis_url,
        "POD_IP": "127.0.0.1",  # both "pods" on this machine: each on ports of its own below
    }
    argv = ["uv", "run", "--frozen", "streamrelay", *container["args"]]
    argv[argv.index("--config") + 1] = str(tmp_path / "channels.toml")
    probes = [container[kind]["httpGet"]["path"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")]
    with ExitStack() as stack:
        stack.enter_context(started_redis(redis_port, tmp_path / "redis"))
        replicas: list[tuple[Process, int, int, str]] = []
        for i in range(2):
            ingest, ops = free_port(), free_port()
            env = expand(container["env"], from_secret)
            advertised = env["STREAMRELAY_SERVICE__ADVERTISE_URL"]
            assert advertised == f"http://127.0.0.1:{service['port']}"
            env |= {
                "STREAMRELAY_SERVICE__PORT": str(ingest),  # 8787 and 9090 in each pod; here ports of its own
                "STREAMRELAY_SERVICE__OPS_PORT": str(ops),
                "STREAMRELAY_SERVICE__OPS_HOST": "127.0.0.1",
                "STREAMRELAY_SERVICE__HOST": "127.0.0.1",
                "STREAMRELAY_SERVICE__ADVERTISE_URL": advertised.replace(f":{service['port']}", f":{ingest}"),
            }
            process = stack.enter_context(started(argv, env, tmp_path / f"replica-{i}.log"))
            replicas.append((process, ingest, ops, env["STREAMRELAY_SERVICE__ADVERTISE_URL"]))
        for process, _ingest, ops, _url in replicas:
            for path in probes:
                process.wait_http(f"http://127.0.0.1:{ops}{path}")
        assert asyncio.run(announced(redis_url)) == {url for *_, url in replicas}
        for _process, ingest, _ops, _url in replicas:
            runs = httpx.get(
                f"http://127.0.0.1:{ingest}/v1/runs",
                params={"all": 1},
                headers={"Authorization": "Bearer k8s-redis-ingest-token"},
                timeout=10,
            )
            assert runs.status_code == 200 and runs.json()["unreachable"] == [], runs.text  # the other answered
        for process, *_ in replicas:
            assert process.stop() == 0
            assert "DRY-run-token" not in process.output() and "k8s-redis-ingest-token" not in process.output()
