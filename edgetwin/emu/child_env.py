"""The environment of a process the real code paths start: a rank, a foreman, a worker."""

from __future__ import annotations

import os
from pathlib import Path

import edgetwin


def package_env() -> dict[str, str]:
    """``PYTHONPATH`` with this package's root first, so that ``python -m edgetwin...`` in a
    child process or a Mininet host runs this copy of edgetwin, installed or not."""
    package_root = str(Path(edgetwin.__file__).resolve().parents[1])
    return {
        "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    }


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child: ``package_env``, unbuffered output (its log
    is read while it runs), and ``extra``."""
    return {**os.environ, **package_env(), "PYTHONUNBUFFERED": "1", **extra}
