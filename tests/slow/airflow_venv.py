"""Build (or reuse) build/airflow-venv, the virtualenv with Airflow the export test drives.

Airflow pins hundreds of packages (its own constraints); they stay away from the ML stack in a
virtualenv of their own, built from tests/slow/airflow-constraints.txt by uv and reused
while that file is unchanged. `make test` builds it beside the main install, where the second
core is idle (`python3 tests/slow/airflow_venv.py`); the test builds it if it is missing.
Imports nothing but the standard library: it runs before any virtualenv exists.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

__all__ = ["AIRFLOW", "VENV", "AirflowVenvError", "airflow_venv"]

AIRFLOW = "apache-airflow==3.3.2"
CONSTRAINTS = Path(__file__).parent / "airflow-constraints.txt"
VENV = Path(__file__).resolve().parents[2] / "build" / "airflow-venv"


class AirflowVenvError(Exception):
    """Airflow could not be installed."""


def airflow_venv() -> Path:
    """The virtualenv's bin folder; rebuilt when the constraints or the version change.

    Raises:
        AirflowVenvError: the install failed (its last lines say why).
    """
    stamp = VENV / ".installed"
    wanted = hashlib.sha256(CONSTRAINTS.read_bytes() + AIRFLOW.encode() + b"uv").hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return VENV / "bin"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True,
                   timeout=300)
    # uv, as for the main install (the Makefile): a tenth of pip's CPU, pinned where it is
    uv = next(line for line in (VENV.parents[1] / "constraints.txt").read_text().splitlines()
              if line.startswith("uv=="))
    done = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", uv],
                          capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        done = subprocess.run([str(VENV / "bin" / "uv"), "pip", "install", "--python",
                               str(VENV / "bin" / "python"), "-q", "--compile-bytecode",
                               "-c", str(CONSTRAINTS),
                               AIRFLOW], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise AirflowVenvError(f"installing {AIRFLOW} failed: {done.stderr.strip()[-800:]}")
    stamp.write_text(wanted)
    return VENV / "bin"


if __name__ == "__main__":
    try:
        print(f"Airflow's virtualenv: {airflow_venv().parent}")
    except AirflowVenvError as exc:
        sys.exit(str(exc))
