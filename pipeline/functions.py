"""User functions named `module:function`, imported with the pipeline file's folder on the path."""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema

from seqline.pipeline.errors import ConfigError

__all__ = ["FUNCTION_PATTERN", "FunctionRef", "load_function"]


def _module_function(ref: str) -> str:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError("'module:function', e.g. 'features:add_columns' for add_columns() in "
                         "features.py beside the pipeline file")
    return ref


# For editors: the same form as a pattern (a module path, a colon, a function name).
FUNCTION_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"

FunctionRef = Annotated[str, AfterValidator(_module_function),
                        WithJsonSchema({"type": "string", "pattern": FUNCTION_PATTERN})]
"""A user function named 'module:function' (checked for its form when parameters load)."""


# Thread workers load the same module at once; `_prefer_folder` edits sys.path and sys.modules,
# which an import running in another thread must not see half-done.
_IMPORTING = threading.RLock()


@functools.cache  # workers resolve the same function once per process, not once per block
def load_function(ref: str, base_dir: str) -> Callable[..., Any]:
    """Import `module:function` from `base_dir` (the pipeline file's folder) or the path.

    Raises:
        ConfigError: the reference is malformed, the module is missing, or has no such name.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"function {ref!r} is not of the form 'module:function'. "
            "Name a module in the pipeline file's folder and a function in it, e.g. "
            "'features:add_columns' for add_columns() in features.py.")
    try:
        with _IMPORTING:
            _prefer_folder(module_name, base_dir)
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise _import_failed(ref, module_name, base_dir, exc) from exc
        raise ConfigError(
            f"function {ref!r}: no module {module_name!r} in {base_dir} or on the Python path. "
            f"Put {module_name}.py beside the pipeline file.") from exc
    except Exception as exc:  # noqa: BLE001 - any error while the user's module runs is theirs
        raise _import_failed(ref, module_name, base_dir, exc) from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        names = [n for n in dir(module) if not n.startswith("_")]
        hint = difflib.get_close_matches(attr, names, n=1)
        did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ConfigError(
            f"function {ref!r}: module {module_name!r} ({Path(module.__file__ or '?')}) has no "
            f"function {attr!r}.{did_you_mean}")
    return fn


def _import_failed(ref: str, module_name: str, base_dir: str, exc: Exception) -> ConfigError:
    """One line for a user module that fails to import: its file and line, and the error.

    The line is the user's own (the deepest frame in the pipeline's folder), not the import
    machinery's; a SyntaxError carries its place itself.
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        file, line = exc.filename, exc.lineno
        what = f"{type(exc).__name__}: {exc.msg}"
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.filename.startswith("<")]
        own = [f for f in frames if Path(f.filename).is_relative_to(base_dir)] or frames
        file, line = (own[-1].filename, own[-1].lineno) if own else (module_name, None)
        what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    at = f"{file}, line {line}" if line else file
    fix = ("install the missing module or fix the import" if isinstance(exc, ImportError)
           else "fix the module")
    return ConfigError(f"function {ref!r}: importing module {module_name!r} failed at {at}: "
                       f"{what.rstrip(': ')}. {fix[0].upper()}{fix[1:]}, then run again.")


def _prefer_folder(module_name: str, base_dir: str) -> None:
    """Put `base_dir` first on the path, and forget a same-named module from another folder.

    Two pipelines in one process (tests, a scheduler) may both have a `features.py`; each must
    get its own.
    """
    if base_dir in sys.path:
        sys.path.remove(base_dir)
    sys.path.insert(0, base_dir)
    loaded = sys.modules.get(module_name)
    own = Path(base_dir, *module_name.split("."))
    if loaded is not None and not Path(getattr(loaded, "__file__", "") or "").is_relative_to(
            own.parent) and (own.with_suffix(".py").exists() or own.is_dir()):
        del sys.modules[module_name]
