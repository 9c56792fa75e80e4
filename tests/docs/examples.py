"""Running the docs site's examples: every `bash` and `python` block of docs/**/*.md.

Conventions the pages follow (docs/contributing-docs is this docstring):
- A `bash` block runs with `bash -e -o pipefail` in the page's own working folder (a fresh
  copy of docs/examples/readings/ and data/, shared by the page's blocks in order), with the
  venv's `seqline` first on PATH. It must exit 0, unless its first line is a comment
  `# exits with N: why`.
- A `bash` block followed by a ```text block holding only `--8<-- "NAME.txt"` shows its
  output: the block's real output, made stable by `stable()`, must equal
  docs/snippets/NAME.txt. `make docs-outputs` (SEQLINE_DOCS_OUTPUTS=write) rewrites the
  snippets from a real run instead of comparing.
- A `python` block runs in the page's namespace, in the same folder.
- A block that cannot run here (it installs, or needs a cloud account or a cluster) is
  preceded by `<!-- skip: next "the reason" -->`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from sybil import Document, Example, Region
from sybil.evaluators.python import PythonEvaluator

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SNIPPETS = DOCS / "snippets"
WRITE = os.environ.get("SEQLINE_DOCS_OUTPUTS") == "write"
BASH_TIMEOUT_S = 300

FENCE = re.compile(r"^```bash[^\n]*\n(?P<source>.*?)^```[ \t]*\n"
                   r"(?:\s*^```text[^\n]*\n\s*--8<-- \"(?P<snippet>[^\"]+)\"\s*\n^```)?",
                   re.M | re.S)
EXITS = re.compile(r"\A# exits with (\d+)")

# Columns and phrases whose values are timings: the docs show a real run's, and a later run
# is compared with them masked.
TIMED_COLUMNS = {"s", "records/s", "waited in", "waited out"}
TIMED_TEXT = [
    (re.compile(r"\(\d+(\.\d+)? s\)"), "(… s)"),
    (re.compile(r"took \d+(\.\d+)? s"), "took … s"),  # a reused stage's earlier time
    (re.compile(r"\b(mae|rmse|mse|accuracy|loss) \d+\.\d+"), r"\1 …"),
    (re.compile(r"pid \d+"), "pid …"),
    # seqline's own frames in a worker traceback: their line numbers move with every edit
    (re.compile(r'(File "…/seqline/[^"]+", line )\d+'), r"\1…"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"), "…T…+00:00"),
]
# Engines' own start-up lines (TensorFlow's C++ and absl logs): not seqline's output.
CHATTER = re.compile(r"^(WARNING: All log messages before absl|[IWE]\d{4} \d\d:\d\d:\d\d|"
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] )")


def workdir(namespace: dict) -> Path:
    """The page's working folder: the example project and the sample data, fresh per page."""
    if "workdir" not in namespace:
        folder = Path(tempfile.mkdtemp(prefix="seqline-docs-"))
        shutil.copytree(DOCS / "examples" / "readings", folder, dirs_exist_ok=True)
        shutil.copytree(REPO / "data", folder / "data")
        namespace["workdir"] = folder
    return namespace["workdir"]


def stable(output: str, folder: Path) -> str:
    """The output as the docs show it: the page's folder shown as `~/work`, seqline's own
    folder as `…/seqline`, engine chatter dropped, trailing spaces cut."""
    text = output.replace(str(folder.resolve()), "~/work").replace(str(folder), "~/work")
    text = text.replace(str(REPO), "…/seqline")
    lines = [line.rstrip() for line in text.splitlines() if not CHATTER.match(line)]
    return "\n".join(lines).strip("\n") + "\n"


def masked(text: str) -> str:
    """`text` with timings masked and tables reduced to their cells (column widths follow
    the widest value, which for a timing changes from run to run)."""
    out: list[str] = []
    header: list[str] = []
    for line in text.splitlines():
        if re.fullmatch(r"[\s┏┓┗┛┡┩└┘┌┐├┤┳┻╇┼┬┴━─═╋]+", line):
            continue
        if "┃" in line or "│" in line:
            cells = [c.strip() for c in re.split(r"[┃│]", line)[1:-1]]
            if "┃" in line:
                header = cells
            else:
                cells = ["…" if i < len(header) and header[i] in TIMED_COLUMNS else _timed(c)
                         for i, c in enumerate(cells)]
            out.append(" | ".join(cells))
            continue
        out.append(" ".join(_timed(line).split()))
    return "\n".join(out)


def _timed(text: str) -> str:
    for pattern, replacement in TIMED_TEXT:
        text = pattern.sub(replacement, text)
    return text


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQLINE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"  # tables as a wide terminal shows them, whatever runs the tests
    return env


class BashBlocks:
    """Finds `bash` blocks and the output snippet that may follow each."""

    def __call__(self, document: Document) -> Iterable[Region]:
        for match in FENCE.finditer(document.text):
            yield Region(match.start(), match.end(),
                         (match.group("source"), match.group("snippet")), run_bash)


def run_bash(example: Example) -> str | None:
    source, snippet = example.parsed
    folder = workdir(example.namespace)
    exits = EXITS.match(source)
    expected = int(exits.group(1)) if exits else 0
    done = _bash(source, folder)
    both = done.stdout + done.stderr
    if done.returncode != expected:
        return f"exit {done.returncode}, expected {expected}\n{source}\n{both}"
    if snippet is None:
        return None
    shown = stable(both, folder)
    path = SNIPPETS / snippet
    if WRITE:
        path.write_text(shown)
        return None
    if not path.exists():
        return f"{path} is missing: run `make docs-outputs`"
    if masked(path.read_text()) != masked(shown):
        return (f"the output of this block changed; run `make docs-outputs` and review the "
                f"diff of {path.relative_to(REPO)}.\n--- shown in the docs\n"
                f"{path.read_text()}\n--- now\n{shown}")
    return None


def _bash(source: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run a block in a process group of its own; on a timeout, end the whole group, so that
    what the block started in the background (`seqline dashboard &`) does not outlive it and
    hold its port for the next run."""
    with subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", source], cwd=folder,
                          env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=BASH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


class PythonInFolder(PythonEvaluator):
    """Sybil's Python evaluator, run in the page's working folder."""

    def __call__(self, example: Example) -> str | None:
        here = Path.cwd()
        os.chdir(workdir(example.namespace))
        try:
            return super().__call__(example)
        finally:
            os.chdir(here)


def cleanup(namespace: dict) -> None:
    folder = namespace.get("workdir")
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
