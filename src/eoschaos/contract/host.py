"""What eoschaos finds on the host, for every role alike: its cache and the tools it runs.

One definition each, below every role: the brokers, the workloads' builds and the checkers'
Spark all read the same cache root (EOSCHAOS_CACHE) and start the same `java`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from eoschaos.contract.errors import EoschaosError

CACHE_ENV = "EOSCHAOS_CACHE"


def cache_root() -> Path:
    """Downloads and builds shared by every run and every clone (override: EOSCHAOS_CACHE)."""
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "eoschaos"))


def require_tool(name: str, fix: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EoschaosError(f"'{name}' was not found on PATH; {fix}")
    return path


def java_binary() -> str:
    """The `java` to start JVMs with (brokers, tools, builds): JAVA_HOME's if set, else PATH's."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return require_tool("java", "install a JDK 17+ (apt-get install openjdk-17-jdk-headless)")
