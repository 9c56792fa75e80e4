"""The docs site's examples. Each page's `bash` and `python` blocks are collected from here
as tests of their own (conftest.py); the tests below keep the pages runnable as a whole."""

from __future__ import annotations

import re

from tests.docs.conftest import pages
from tests.docs.examples import FENCE, REPO, SNIPPETS, masked

ANY_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)
SKIP = re.compile(r"<!-- skip: (?P<args>[^>]*)-->")
SHELLS = {"sh", "shell", "console", "zsh", "shell-session"}


def test_every_command_block_runs_or_says_why_not():
    """A shell block the tests would not run is a `bash` block, or it is marked with the
    reason it cannot run; shell sessions (`console`) are not used: outputs are snippets."""
    problems = []
    for page, _ in pages():
        text = page.read_text()
        for match in ANY_FENCE.finditer(text):
            lang = match.group("lang")
            where = f"{page.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
            if lang in SHELLS:
                problems.append(f"{where}: a ```{lang} block; write ```bash (run) instead")
            if lang == "" and match.group("body").strip():
                problems.append(f"{where}: a block without a language")
        for match in SKIP.finditer(text):
            if not re.fullmatch(r'next "[^"]{10,}" ', match.group("args")):
                problems.append(f"{page.relative_to(REPO)}: `skip: {match.group('args')}`: "
                                'write `<!-- skip: next "why it cannot run here" -->`')
    assert problems == []


def test_every_snippet_is_shown_and_every_shown_output_exists():
    shown = set()
    for page, _ in pages():
        shown |= {m.group("snippet") for m in FENCE.finditer(page.read_text())
                  if m.group("snippet")}
    committed = {p.name for p in SNIPPETS.glob("*.txt")}
    assert shown - committed == set(), "run `make docs-outputs`"
    assert committed - shown == set(), "snippets no page shows: delete them"


def test_masking_keeps_counts_and_hides_timings():
    """The comparison with a committed output ignores timings, never counts."""
    run = ("┃ stage ┃ in ┃ s ┃ records/s ┃\n"
           "│ read  │ 600 │ 0.62 │ 962 │\n"
           "stages (7.7 s)\n")
    later = run.replace("0.62", "11.30").replace("962", "53").replace("7.7", "12.1")
    assert masked(run) == masked(later)
    assert masked(run) != masked(run.replace("600", "601"))
