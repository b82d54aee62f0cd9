"""Load Debian's Mininet (``apt-get install mininet``) into this interpreter, untyped.

Debian installs Mininet for its own Python, which a virtual environment does not
see; this loads that one package (not the rest of ``dist-packages``) under its own
name, so ``import mininet.net`` works here.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

DEBIAN_MININET = Path("/usr/lib/python3/dist-packages/mininet")
IP = "ip"  # iproute2's: what emu-cleanup runs, to list and delete the links a run left
IP_HINT = "apt-get install -y iproute2"
# what the emulator runs (iptables, ethtool, ping: loss and latency without netem)
TOOLS = ("mnexec", "tc", IP, "brctl", "ifconfig", "iperf3", "iptables", "ethtool", "ping")
INSTALL_HINT = "apt-get install -y mininet bridge-utils iperf3 iptables ethtool iputils-ping"
ROOT_NEEDED = "root (Mininet creates network namespaces; run edgetwin as root)"


def is_root() -> bool:
    """Whether this process may build, and remove, Mininet's namespaces and interfaces."""
    return os.geteuid() == 0


def missing_requirements() -> list[str]:
    """What stops the emulator on this machine (empty: nothing), each said in a few words."""
    missing = []
    if not is_root():
        missing.append(ROOT_NEEDED)
    if not _mininet_found():
        missing.append(f"Mininet's Python package ({INSTALL_HINT})")
    tools = missing_tools(TOOLS)
    if tools:
        missing.append(f"the programs {', '.join(tools)} ({INSTALL_HINT})")
    return missing


def missing_tools(tools: tuple[str, ...]) -> list[str]:
    """Those of ``tools`` (program names) not found on ``PATH``."""
    return [tool for tool in tools if shutil.which(tool) is None]


def mininet_module(name: str) -> Any:
    """``mininet.<name>`` (e.g. ``net``, ``nodelib``), loading Debian's package if needed.

    ``mininet.log`` makes its own logger class the class of every logger created after
    it, each with a handler of its own on stderr: an edgetwin module imported after
    Mininet wrote its warnings twice, once without a newline. The class is put back."""
    logger_class = logging.getLoggerClass()
    try:
        if "mininet" not in sys.modules and importlib.util.find_spec("mininet") is None:
            init = DEBIAN_MININET / "__init__.py"
            spec = importlib.util.spec_from_file_location(
                "mininet", init, submodule_search_locations=[str(DEBIAN_MININET)]
            )
            if spec is None or spec.loader is None:
                raise ModuleNotFoundError(f"Mininet not found ({INSTALL_HINT})")
            package = importlib.util.module_from_spec(spec)
            sys.modules["mininet"] = package
            spec.loader.exec_module(package)
        return importlib.import_module(f"mininet.{name}")
    finally:
        logging.setLoggerClass(logger_class)


def _mininet_found() -> bool:
    return "mininet" in sys.modules or (
        importlib.util.find_spec("mininet") is not None
        or (DEBIAN_MININET / "__init__.py").is_file()
    )
