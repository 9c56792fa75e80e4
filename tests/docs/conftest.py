"""Collect every example of the docs site (docs/**/*.md) as tests, with Sybil.

pytest only walks `testpaths` (tests/), so the pages are collected from here: the module
tests/docs/test_examples.py stands for them (see `pytest_collect_file`), and each page
becomes a Sybil file of its own, `docs/PAGE.md::line:N`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sybil import Sybil
from sybil.integration.pytest import SybilFile
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from tests.docs.examples import DOCS, REPO, BashBlocks, PythonInFolder, cleanup

# Pages with no examples to run: the decision records quote commands as history.
NOT_EXAMPLES = ["decisions/*", "examples/**", "snippets/**", "gen/**"]

SITE = Sybil(parsers=[SkipParser(), BashBlocks(),
                      CodeBlockParser("python", PythonInFolder())],
             path=str(DOCS), patterns=["*.md", "**/*.md"], excludes=NOT_EXAMPLES,
             teardown=cleanup, name="docs")


# The README is the front door: its examples run the same way as the site's.
FRONT_DOOR = Sybil(parsers=[SkipParser(), BashBlocks(),
                            CodeBlockParser("python", PythonInFolder())],
                   path=str(REPO), patterns=["README.md"], teardown=cleanup, name="readme")


def pages() -> list[tuple[Path, Sybil]]:
    site = [(p, SITE) for p in sorted(DOCS.rglob("*.md")) if SITE.should_parse(p)]
    return [(REPO / "README.md", FRONT_DOOR), *site]


class Pages(pytest.File):
    """The docs pages, each a Sybil file of examples."""

    def collect(self):
        for page, sybil in pages():
            yield SybilFile.from_parent(self, path=page, sybils=[sybil])


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path == Path(__file__).with_name("test_examples.py"):
        return Pages.from_parent(parent, path=file_path, name="site-examples")
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The pages' examples run the CLI end to end on real files: the `e2e` tier."""
    for item in items:
        if DOCS in item.path.parents or item.path == REPO / "README.md":
            item.add_marker(pytest.mark.e2e)
