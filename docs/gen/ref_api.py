"""Write reference/api.md: the public `seqline` package, from its docstrings (mkdocstrings).

mkdocstrings reads the package through links under its installed names, made by the
`on_startup` hook in docs/gen/hooks.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mkdocs_gen_files

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"__init__.py": "orchestration/public/__init__.py"}


def public_names() -> list[str]:
    """`seqline.__all__`, read from the source (importing would load the components)."""
    tree = ast.parse((REPO / FOLDERS["__init__.py"]).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [n for n in ast.literal_eval(node.value) if not n.startswith("_")]
    raise SystemExit("orchestration/public/__init__.py has no __all__")


def page() -> str:
    lines = ["# Python API", "",
             "Generated from the docstrings of the public `seqline` package "
             "(`import seqline`; every name below is `seqline.NAME`). The same pipeline as a "
             "file, with the same checks and messages: see the "
             "[pipeline file reference](pipeline.md) for every parameter's bounds and "
             "choices.", "",
             "::: seqline", "    options:", "      members: false",
             "      show_root_heading: false", ""]
    for name in public_names():
        lines += [f"::: seqline.{name}", "    options:", "      show_root_full_path: false",
                  "      heading_level: 2", ""]
    return "\n".join(lines)


with mkdocs_gen_files.open("reference/api.md", "w") as out:
    out.write(page())
mkdocs_gen_files.set_edit_path("reference/api.md", "gen/ref_api.py")
