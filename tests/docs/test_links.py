"""Links that work where the pages are read: every relative link of README.md and the docs
pages names a file of the repository (the generated references have committed placeholders,
which `make docs` replaces), so a page read on the repository never leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md")
                                    if "snippets" not in p.parts and "gen" not in p.parts)]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)  # links inside code are not links


def _relative_links(page: Path) -> list[str]:
    text = CODE.sub("", page.read_text())
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)]  # not a URL, not this page's anchor


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_links_name_files_of_the_repository(page):
    missing = [target for target in _relative_links(page)
               if not (page.parent / target.split("#")[0]).exists()]
    assert missing == [], f"{page.relative_to(REPO)} links to files that are not there"


def test_links_reference_placeholders_are_the_pages_the_generators_write():
    for name in ("pipeline", "cli", "api"):
        generator = (REPO / "docs" / "gen" / f"ref_{name}.py").read_text()
        assert f'mkdocs_gen_files.open("reference/{name}.md", "w")' in generator
        assert (REPO / "docs" / "reference" / f"{name}.md").read_text().startswith("# ")
