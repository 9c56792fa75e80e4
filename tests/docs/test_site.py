"""The docs site builds with `mkdocs build --strict`: a broken link, a missing page, a
reference generator that fails or a docstring mkdocstrings cannot read fails this test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# mkdocs-material 9.8 prints a banner about MkDocs 2 on every build; these turn it off.
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


@pytest.mark.integration
def test_site_builds_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=QUIET)
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ["reference/pipeline/index.html", "reference/cli/index.html",
                 "reference/api/index.html", "decisions/index.html", "tutorial/index.html"]:
        assert (site / page).exists(), page
    cli = (site / "reference/cli/index.html").read_text()
    for option in ["--resume", "--queue", "--one-by-one", "--no-verify", "--beam-mode"]:
        assert option in cli, option
    # a placeholder in help text is text, not a tag the browser hides
    assert "stores/&lt;name&gt;.db" in cli and "<name>" not in cli
    pipeline = (site / "reference/pipeline/index.html").read_text()
    for field in ["stats_records", "num_classes", "label_offset", "retry_user_errors"]:
        assert field in pipeline, field
