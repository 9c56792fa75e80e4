"""setuptools' PEP 517 backend, without the note every editable install of this layout prints.

The top-level folders install as `seqline.*` (pyproject.toml's package-dir), so setuptools
makes an editable install with an import finder, and says so each time in a warning
("Editable installation. Please be careful with folders in your working directory with the
same name as your package"). There is no such folder here; the note is the only line the
install would print, so it is left out. Every other warning of setuptools still shows.
"""

import warnings

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - the backend's hooks, unchanged
from setuptools.warnings import InformationOnly

__all__ = build_meta.__all__

warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)
