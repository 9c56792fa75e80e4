"""Help on a terminal: typer's rich help kept a docstring's line breaks inside a paragraph,
so at 80 columns `seqline --help` and `seqline lookup --help` broke lines in mid-sentence."""

from __future__ import annotations

from seqline.orchestration.cli.main import _unwrapped, app


def test_a_paragraph_is_one_line_and_an_indented_one_is_kept():
    doc = """First line
    goes on.

    Second paragraph
    on two lines.

    Example:
        seqline run p.yaml
        seqline verify RUN_ID
    """
    assert _unwrapped(doc) == ("First line goes on.\n\nSecond paragraph on two lines.\n\n"
                               "Example:\n    seqline run p.yaml\n    seqline verify RUN_ID")


def test_every_command_has_its_help_in_whole_paragraphs():
    def commands(typer_app):
        yield from typer_app.registered_commands
        for group in typer_app.registered_groups:
            yield from commands(group.typer_instance)

    helps = [c.help for c in commands(app) if c.help]
    assert len(helps) > 15
    for text in helps:
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            assert len(lines) == 1 or any(line[:1].isspace() or line.startswith(("- ", "\b"))
                                          for line in lines), paragraph
