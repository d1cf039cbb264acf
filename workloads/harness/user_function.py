"""A function of the user's, named on the command line as `MODULE:FUNCTION` (importable from
the working directory) or `FILE.py:FUNCTION`: `--expect` and `--input` load theirs this way.
Whatever goes wrong loading it is the user's to see, in one line naming the option."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eoschaos.contract.errors import EoschaosError


def load_function(option: str, spec: str, example: str) -> Callable[..., Any]:
    """The function `spec` names; EoschaosError naming `option` (e.g. "--expect") when it is
    not MODULE:FUNCTION or FILE.py:FUNCTION (`example` shows one), does not load, or is not
    there."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        shape = "MODULE:FUNCTION or FILE.py:FUNCTION"
        raise EoschaosError(f"{option} {spec!r} is not {shape}; e.g. {option} {example}")
    try:
        if where.endswith(".py"):
            path = Path(where)
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None or not path.is_file():
                raise FileNotFoundError(f"no file {path}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except Exception as exc:  # the user's module: any error is theirs to see, in one line
        raise EoschaosError(
            f"{option} {spec!r}: cannot load {where}: {type(exc).__name__}: {exc}"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        raise EoschaosError(f"{option} {spec!r}: {where} has no function {name!r}")
    return function
