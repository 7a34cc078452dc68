"""The documentation site (mkdocs.yml, docs/) builds with --strict: a link to a missing page or anchor, a page left
out of the nav, or an included file that is gone fails the build. Links from docs/ to files outside it are not
links (docs/documentation.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]


def build(site: Path, docs_dir: Path | None = None) -> subprocess.CompletedProcess:
    config = PROJECT / "mkdocs.yml"
    if docs_dir is not None:  # the same site from another copy of docs/
        settings = yaml.safe_load(config.read_text(encoding="utf-8"))
        settings["docs_dir"] = str(docs_dir)
        config = site.parent / "mkdocs.yml"
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=PROJECT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_site_builds_strict_with_every_page_and_the_included_files(tmp_path):
    site = tmp_path / "site"
    result = build(site)
    assert result.returncode == 0, result.stdout + result.stderr
    nav = nav_pages(yaml.safe_load((PROJECT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert sorted(nav) == sorted(p.name for p in (PROJECT / "docs").glob("*.md"))
    for page in nav:
        built = site / ("index.html" if page == "index.md" else f"{page.removesuffix('.md')}/index.html")
        assert built.exists(), page
    # BENCHMARKS.md and RELIABILITY.md are included whole, not linked
    first_row = (PROJECT / "BENCHMARKS.md").read_text(encoding="utf-8").split("\n| ", 2)[2].split(" |")[0]
    assert first_row.strip("`* ") in (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert "Reliability" in (site / "reliability" / "index.html").read_text(encoding="utf-8")


def test_a_broken_link_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(PROJECT / "docs"), str(docs)], check=True)
    with (docs / "metrics.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the queue](review.md#no-such-section) and [the code](../citegate_assets/cli.py).\n")
    result = build(tmp_path / "site", docs)
    assert result.returncode != 0
    assert "no-such-section" in result.stderr and "cli.py" in result.stderr
