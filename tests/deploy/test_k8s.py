"""deploy/k8s/, checked without a cluster: the manifests parse and hold together (names, keys, ports, mounts), the
sidecar is a native sidecar container, and the service started with the ConfigMap's own configuration answers the
probes the Deployment declares, on the port it declares."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from streamrelay.app.service import SHUTDOWN_GRACE_S
from streamrelay.config.settings import load_settings
from tests.deploy.support import DEPLOY, cli_accepts, started
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

K8S = DEPLOY / "k8s"
BASE = K8S / "base"


def documents() -> dict[str, dict[str, Any]]:
    """Every manifest by kind (one of each here), the kustomization left out."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted([*BASE.glob("*.yaml"), K8S / "secret.example.yaml"]):
        for document in yaml.safe_load_all(path.read_text()):
            assert isinstance(document, dict) and "kind" in document, path
            assert document["kind"] not in found, f"two {document['kind']} manifests"
            found[document["kind"]] = document
    return found


def sidecar() -> dict[str, Any]:
    (container,) = documents()["Deployment"]["spec"]["template"]["spec"]["initContainers"]
    assert isinstance(container, dict)
    return container


def config_toml() -> str:
    text = documents()["ConfigMap"]["data"]["channels.toml"]
    assert isinstance(text, str)
    return text


def test_the_manifests_parse_and_the_kustomization_lists_what_exists() -> None:
    kinds = set(documents())
    assert kinds == {"Deployment", "ConfigMap", "Secret", "PersistentVolumeClaim", "Service", "Kustomization"}
    kustomization = documents()["Kustomization"]
    for resource in kustomization["resources"]:
        assert (BASE / resource).is_file(), resource
    assert "secret.example.yaml" not in kustomization["resources"]  # the real Secret comes from a secret store


def test_the_sidecar_is_a_native_sidecar_beside_the_bot_with_its_data_on_the_claim() -> None:
    deployment = documents()["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = sidecar()
    assert container["restartPolicy"] == "Always"  # an init container that keeps running: a native sidecar
    assert [c["name"] for c in pod["containers"]] == ["bot"]
    cli_accepts(container["args"])
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"

    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert claim == documents()["PersistentVolumeClaim"]["metadata"]["name"]
    service = tomllib.loads(config_toml())["service"]
    assert Path(service["ledger"]).parent == Path(mounts["data"])
    config_arg = container["args"][container["args"].index("--config") + 1]
    assert Path(config_arg).parent == Path(mounts["config"])
    assert volumes["config"]["configMap"]["name"] == documents()["ConfigMap"]["metadata"]["name"]
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's USER
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and "tmp" in mounts


def test_tokens_come_from_the_secret_under_the_names_the_configuration_reads() -> None:
    config = tomllib.loads(config_toml())
    secret = documents()["Secret"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in sidecar()["env"] if "valueFrom" in e}
    wanted = {config["service"]["token_env"], config["service"]["metrics_token_env"]}
    wanted |= {channel["token_env"] for channel in config["channels"].values()}
    assert wanted <= set(env)
    for ref in env.values():
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    for line in config_toml().splitlines():
        assert not line.strip().startswith(("token =", "bot_token")), line  # no token in the ConfigMap


def test_the_grace_period_lets_the_sidecar_drain_after_the_bot_stopped() -> None:
    pod = documents()["Deployment"]["spec"]["template"]["spec"]
    drain_s = tomllib.loads(config_toml())["service"]["drain_s"]
    assert pod["terminationGracePeriodSeconds"] >= drain_s + SHUTDOWN_GRACE_S + 10  # + the bot's own stop


def test_the_probes_and_ports_declared_are_the_ones_the_service_answers(tmp_path: Path) -> None:
    container = sidecar()
    config = tomllib.loads(config_toml())
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"ops": config["service"]["ops_port"]}
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz" and probes["readinessProbe"]["path"] == "/readyz"
    assert {probe["port"] for probe in probes.values()} == {"ops"}
    service = documents()["Service"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["ops"]

    (tmp_path / "channels.toml").write_text(config_toml())
    env = {
        "STREAMRELAY_TOKEN": "k8s-test-ingest-token",
        "STREAMRELAY_METRICS_TOKEN": "k8s-test-metrics-token",
        "TELEGRAM_BOT_TOKEN": "123456:DRY-run-token-for-the-mock-bot-api",
    }
    load_settings(tmp_path / "channels.toml")  # valid as it is (the tokens are checked at start)
    ingest, ops = free_port(), free_port()
    env |= {
        "STREAMRELAY_SERVICE__PORT": str(ingest),
        "STREAMRELAY_SERVICE__OPS_PORT": str(ops),
        "STREAMRELAY_SERVICE__OPS_HOST": "127.0.0.1",  # 0.0.0.0 in the pod, for the kubelet
        "STREAMRELAY_SERVICE__LEDGER": str(tmp_path / "data" / "streamrelay.sqlite3"),
    }
    argv = ["uv", "run", "--frozen", "streamrelay", *container["args"]]
    argv[argv.index("--config") + 1] = str(tmp_path / "channels.toml")
    with started(argv, env, tmp_path / "sidecar.log") as process:
        for probe in probes.values():
            process.wait_http(f"http://127.0.0.1:{ops}{probe['path']}")
        metrics = httpx.get(
            f"http://127.0.0.1:{ops}/metrics", headers={"Authorization": "Bearer k8s-test-metrics-token"}, timeout=10
        )
        assert metrics.status_code == 200 and "streamrelay_ready 1.0" in metrics.text
        assert httpx.get(f"http://127.0.0.1:{ops}/metrics", timeout=10).status_code == 401
        assert httpx.get(f"http://127.0.0.1:{ops}/v1/runs/x", timeout=10).status_code == 404  # no ingest there
        assert httpx.get(f"http://127.0.0.1:{ingest}/healthz", timeout=10).status_code == 200
        assert process.stop() == 0
    assert "k8s-test-ingest-token" not in process.output() and "DRY-run-token" not in process.output()


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity (``256Mi``, ``1Gi``, ``200M``, bytes) in MiB."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor / 2**20
    return float(quantity) / 2**20


def test_the_memory_request_covers_the_sidecars_idle_resident_memory(tmp_path: Path) -> None:
    """Started with the ConfigMap's channels (aiogram loaded), ready and idle, the sidecar's resident memory (its own
    ``process_resident_memory_bytes``) fits in its memory request, so the scheduler never places it where that much
    is not free; the limit leaves room for runs on top."""
    resources = sidecar()["resources"]
    request_mib, limit_mib = mebibytes(resources["requests"]["memory"]), mebibytes(resources["limits"]["memory"])
    (tmp_path / "channels.toml").write_text(config_toml())
    ingest, ops = free_port(), free_port()
    env = {
        "STREAMRELAY_TOKEN": "k8s-test-ingest-token",
        "STREAMRELAY_METRICS_TOKEN": "k8s-test-metrics-token",
        "TELEGRAM_BOT_TOKEN": "123456:DRY-run-token-for-the-mock-bot-api",
        "STREAMRELAY_SERVICE__PORT": str(ingest),
        "STREAMRELAY_SERVICE__OPS_PORT": str(ops),
        "STREAMRELAY_SERVICE__OPS_HOST": "127.0.0.1",
        "STREAMRELAY_SERVICE__LEDGER": str(tmp_path / "data" / "streamrelay.sqlite3"),
    }
    argv = ["uv", "run", "--frozen", "streamrelay", *sidecar()["args"]]
    argv[argv.index("--config") + 1] = str(tmp_path / "channels.toml")
    with started(argv, env, tmp_path / "sidecar.log") as process:
        process.wait_http(f"http://127.0.0.1:{ops}/readyz")
        page = httpx.get(
            f"http://127.0.0.1:{ops}/metrics", headers={"Authorization": "Bearer k8s-test-metrics-token"}, timeout=10
        ).text
        assert process.stop() == 0
    (rss,) = [float(line.split()[1]) for line in page.splitlines() if line.startswith("process_resident_memory_bytes")]
    rss_mib = rss / 2**20
    assert rss_mib <= request_mib, f"idle RSS {rss_mib:.0f} MiB > request {request_mib:.0f} MiB"
    assert limit_mib >= 2 * request_mib
