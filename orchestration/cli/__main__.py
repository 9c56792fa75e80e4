"""`python -m seqline.orchestration.cli`: the `seqline` console script."""

from seqline.orchestration.cli.main import main_command

main_command()
