"""Every test process checks the typed contracts where they are produced: each live event the monitor publishes is
validated against core/contracts/live.py (:data:`core.run.monitor.CHECK_CONTRACT`; pipeline units are checked always).
Set here, before any test module imports the core, and inherited by the sidecars tests start as processes."""

import os

os.environ.setdefault("STREAMRELAY_CHECK_CONTRACTS", "1")
