"""The container's health check: GET the sidecar's ``/healthz`` (or ``/readyz``) on loopback; exit 0 when it answers
200, else 1 with the reason on standard error.

Only the standard library, so a probe costs one small Python start-up (no third-party import): the Dockerfile's
``HEALTHCHECK`` and Kubernetes ``exec`` probes can run it where an HTTP probe cannot reach the listener.

Environment: ``STREAMRELAY_SERVICE__PORT`` (default 8787, as the service reads it), ``HEALTHCHECK_PATH``
(default ``/healthz``), ``HEALTHCHECK_TIMEOUT_S`` (default 3).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    """Probe once; the process exit code."""
    port = os.environ.get("STREAMRELAY_SERVICE__PORT", "8787")
    path = os.environ.get("HEALTHCHECK_PATH", "/healthz")
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=float(os.environ.get("HEALTHCHECK_TIMEOUT_S", "3"))) as answer:
            if answer.status == 200:
                return 0
            print(f"{url} answered {answer.status}", file=sys.stderr)
    except urllib.error.HTTPError as exc:
        print(f"{url} answered {exc.code}: {exc.read(300).decode('utf-8', 'replace')}", file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
