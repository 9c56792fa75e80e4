"""Write reference/cli.md: every command, argument and option of `seqline`, read from the CLI's
own definitions (the Typer app turned into its click command), and the exit codes from the
constants the commands exit with.

Typer 0.29 ships its own copy of click (`typer._click`), so the command tree is read by the
attributes every click object has, not by isinstance against the `click` package."""

from __future__ import annotations

import enum
import re
import signal
from typing import Any

import mkdocs_gen_files
import typer.main

from seqline.orchestration.cli import app
from seqline.orchestration.cli.options import CONFIG_EXIT


def kind(param: Any) -> str:
    """The value's type: choices for an enum, bounds for a number (Typer keeps the annotation
    in `type_descriptor`; a click parameter has `type`)."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if getattr(param, "is_flag", False):
        return "flag"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    choices = getattr(getattr(param, "type", None), "choices", None)
    if choices:
        return " \\| ".join(f"`{c}`" for c in choices)
    name = getattr(annotation, "__name__", None) or getattr(param.type, "name", "text")
    name = {"str": "text", "Path": "path", "int": "integer", "float": "number"}.get(name, name)
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    bounds = [f"≥ {low}" if low is not None else "", f"≤ {high}" if high is not None else ""]
    return " ".join([name, ", ".join(b for b in bounds if b)]).strip()


def default(param: Any) -> str:
    if getattr(param, "is_flag", False) and param.secondary_opts:
        on = param.opts[0] if param.default else param.secondary_opts[0]
        return f"`{on}`"
    value = param.default
    if param.required:
        return "**required**"
    if value is None or (getattr(param, "is_flag", False) and not value):
        return "—"
    return f"`{getattr(value, 'value', value)}`"


def cell(text: str | None) -> str:
    """Help text as one table cell: `|` escaped, and `<` and `>` outside code spans (a
    placeholder such as `<name>` is otherwise taken for an HTML tag and hidden)."""
    parts = " ".join((text or "").split()).replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;")
                    for i, part in enumerate(parts))


def command_section(path: str, command: Any, ctx: Any) -> list[str]:
    out = [f"## `{path}` {{#{path.replace(' ', '-')}}}", "", cell(command.help), "",
           "```text", usage(path, command, ctx), "```", ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)
              and p.name not in ("help", "show_version")]
    args = [p for p in params if p.param_type_name == "argument"]
    opts = [p for p in params if p.param_type_name == "option"]
    if args:
        out += ["| argument | type | help |", "| --- | --- | --- |"]
        out += [f"| `{(a.metavar or a.name).upper()}` | {kind(a)} | {cell(a.help)} |"
                for a in args]
        out.append("")
    if opts:
        out += ["| option | type | default | help |", "| --- | --- | --- | --- |"]
        for o in opts:
            names = " / ".join(f"`{n}`" for n in [*o.opts, *o.secondary_opts])
            envvar = f" (env `{o.envvar}`)" if o.envvar else ""
            out.append(f"| {names} | {kind(o)} | {default(o)} | {cell(o.help)}{envvar} |")
        out.append("")
    return out


def usage(path: str, command: Any, ctx: Any) -> str:
    pieces = re.sub(r"\{(\w+)\}", lambda m: m.group(1).upper(),
                    " ".join(command.collect_usage_pieces(ctx)))
    return f"{path} {pieces}".strip()


def walk(path: str, command: Any, parent: Any) -> list[str]:
    ctx = command.context_class(command, info_name=path.rsplit(" ", 1)[-1], parent=parent)
    if hasattr(command, "list_commands"):
        out = command_section(path, command, ctx) if parent is not None else []
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += walk(f"{path} {name}", sub, ctx)
        return out
    return command_section(path, command, ctx)


def exit_codes() -> list[str]:
    return ["## Exit codes", "",
            "Every command exits with one of these (`seqline run` and `seqline verify` print "
            "the reason on stderr, in one line naming the stage, file, line and seq where one "
            "applies):", "",
            "| code | meaning |", "| --- | --- |",
            "| 0 | success |",
            "| 1 | the run failed (user code raised, a bad record beyond the error budget, a "
            "broken ordering contract), `verify` found a problem, or a backfill run did not "
            "succeed |",
            f"| {CONFIG_EXIT} | usage or configuration: a bad pipeline file (with its line), "
            "an unknown component or parameter, a missing input, a run id already used; found "
            "before anything runs |",
            f"| {128 + signal.SIGINT} | cancelled by Ctrl-C (SIGINT); resumable with "
            "`seqline run PIPELINE --resume --run-id ID` |",
            f"| {128 + signal.SIGTERM} | cancelled by SIGTERM; resumable the same way |", ""]


def page() -> str:
    root = typer.main.get_command(app)
    intro = ["# Command line", "",
             "Generated from the `seqline` command's own definitions (its Typer app, as "
             "click sees it): every command, argument and option, with its type, default "
             "and help.", "",
             "```text", "seqline [--version] COMMAND ...", "```", ""]
    return "\n".join(intro + walk("seqline", root, None) + exit_codes())


with mkdocs_gen_files.open("reference/cli.md", "w") as f:
    f.write(page())
mkdocs_gen_files.set_edit_path("reference/cli.md", "gen/ref_cli.py")
