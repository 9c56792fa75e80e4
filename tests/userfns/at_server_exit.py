"""Preloaded into a fork server by test_local_pool.py: at the server's exit, an atexit handler
writes its pid to $SEQLINE_TEST_AT_EXIT (a preloaded module's handlers still run there)."""

import atexit
import os
from pathlib import Path

atexit.register(lambda: Path(os.environ["SEQLINE_TEST_AT_EXIT"]).write_text(str(os.getpid())))
