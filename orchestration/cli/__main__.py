"""`python -m seqline.orchestration.cli`: the `seqline` console script."""

from seqline.orchestration.cli import main_command

main_command()
