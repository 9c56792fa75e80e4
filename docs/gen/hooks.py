"""MkDocs hooks (mkdocs.yml `hooks:`): link the package under its installed names first.

The package's folders install under other names (pyproject's package-dir: `seqline` is
orchestration/public/), which griffe cannot follow from the source tree; as `make typecheck`
does for mypy, they are linked under their installed names in build/docs-api/, the path
mkdocs.yml gives mkdocstrings. This must happen at start-up: mkdocstrings reads its paths when
the configuration loads, before gen-files runs the page scripts (a fresh clone has no links).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINKS = REPO / "build" / "docs-api" / "seqline"
FOLDERS = {"__init__.py": "orchestration/public/__init__.py", "pipeline": "pipeline",
           "components": "components", "orchestration": "orchestration"}


def on_startup(command: str, dirty: bool) -> None:
    LINKS.mkdir(parents=True, exist_ok=True)
    for name, target in FOLDERS.items():
        link = LINKS / name
        if not link.is_symlink():
            link.symlink_to(REPO / target)
