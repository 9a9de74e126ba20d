"""The case runner: ``streamrelay case PATH... --out DIR`` (format: tests/cases/README.md)."""

from streamrelay.app.cases.result import CaseResult
from streamrelay.app.cases.runner import run_case, run_case_file, start_case_files

__all__ = ["CaseResult", "run_case", "run_case_file", "start_case_files"]
