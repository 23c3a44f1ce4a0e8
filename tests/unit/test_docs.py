"""The README stays one screen and every link in it and in docs/ leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_the_readme_is_one_screen() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 120


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    targets = [m.group(1) for m in LINK.finditer(page.read_text()) if "://" not in m.group(1)]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.name}: {missing}"


def test_every_docs_page_is_in_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert {p for p in pages if f"]({p})" not in index} == set()
