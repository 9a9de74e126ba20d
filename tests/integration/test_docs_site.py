"""The documentation site builds with ``mkdocs build --strict`` (issue 25): a broken link, anchor or include fails.

mkdocs.yml turns every link check to a warning (``validation``: a page or anchor not found, a link it cannot read, a
page left out of ``nav``) and ``pymdownx.snippets`` refuses an include that does not exist (``check_paths``); strict
makes each warning an error. The site is written into the test's own folder, never into the working tree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.contention import wait_scale

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's notice about its successor
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=ROOT,  # includes are read from the repository's root (pymdownx.snippets base_path ".")
        env=env,
        capture_output=True,
        text=True,
        timeout=150 * wait_scale(),
    )


def test_the_site_builds_strict_with_every_page_and_schema(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "WARNING" not in built.stderr, built.stderr[-3000:]
    pages = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)
    for page in pages:
        html = tmp_path / "site" / (page.with_suffix("") if page.stem != "index" else page.parent) / "index.html"
        assert html.is_file(), f"docs/{page} was not built"
    for schema in sorted((ROOT / "docs" / "schema").glob("*.schema.json")):
        name = schema.name.removesuffix(".schema.json")
        reference = (tmp_path / "site" / "reference" / name / "index.html").read_text(encoding="utf-8")
        assert reference.count("<table>") >= 1, f"the reference page of {schema.name} shows no field table"
    deploy = (tmp_path / "site" / "deploy" / "index.html").read_text(encoding="utf-8")
    assert "How these files are tested" in deploy  # deploy/README.md, included whole


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check itself: the same site with one link to a page that does not exist does not build."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "cases.md").write_text(
        (docs / "cases.md").read_text(encoding="utf-8") + "\nSee [nowhere](nowhere.md#gone).\n", encoding="utf-8"
    )
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["hooks"] = [str(ROOT / h) for h in config["hooks"]]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    built = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "nowhere.md" in built.stdout + built.stderr


def test_every_relative_link_of_the_readme_names_a_file_and_its_anchors_exist() -> None:
    """README.md is read on GitHub, outside the site: its links to the pages (and their anchors) are checked here."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?:|mailto:)([^)#\s]+)(?:#([\w-]+))?\)", readme)
    assert len(links) >= 14, links
    for path, anchor in links:
        target = ROOT / path
        assert target.exists(), f"README.md links to {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, f"README.md links to {path}#{anchor}: no such heading"
