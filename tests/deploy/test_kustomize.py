"""``kubectl kustomize`` builds every deploy/k8s form (the single sidecar and the replicas on Redis), and what it
builds is what tests/deploy/test_k8s_redis.py checks (its own application of the overlay's patches). Skipped where
kubectl is not installed (it is not a Python package: the machine's own kubectl, 1.29 or later, is used)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.deploy.test_k8s_redis import K8S, OVERLAY, Document, base, by_kind, overlay

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kustomize(folder: Path) -> dict[str, Document]:
    """The documents ``kubectl kustomize FOLDER`` prints, by kind.

    Raises:
        AssertionError: kubectl refused the folder (its error is in the message).
    """
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return by_kind([d for d in yaml.safe_load_all(done.stdout) if d is not None])


@pytest.mark.parametrize(("folder", "expected"), [(K8S, base), (OVERLAY, overlay)], ids=["sqlite", "redis"])
def test_kubectl_kustomize_builds_each_form_as_the_tests_read_it(
    folder: Path, expected: Callable[[], dict[str, Document]]
) -> None:
    assert kustomize(folder) == expected()
