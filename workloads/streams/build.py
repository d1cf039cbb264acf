"""Build the Kafka Streams workload's application against the Kafka version under test.

The app must run the client of the cluster's own version (a 4.x client on a 4.x cluster uses
transaction.version 2, a 3.9 client the older protocol), so the same sources are compiled with
Maven against each version's kafka-streams, cached per version in `cache_root()/streams/<version>/`
(eoschaos.workloads.maven).
"""

from __future__ import annotations

import platform
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, java_binary
from eoschaos.workloads.maven import build_cached

APP_DIR = Path(__file__).parent / "app"
MAIN_CLASS = "eoschaos.streams.App"
JAR_NAME = "eoschaos-streams.jar"
# Small heap, one GC thread and C1 only: two to three instances share two cores with three
# brokers, and a run is too short for C2 to pay for its compile time.
JVM_FLAGS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")
# The name rocksdbjni gives its Linux library per machine, in the jar and for System.loadLibrary.
_ROCKSDB_PLATFORMS = {"x86_64": "linux64", "aarch64": "linux-aarch64"}
_NO_SUCH_KAFKA = re.compile(
    r"Could not find artifact org\.apache\.kafka:kafka-streams|kafka-streams:\S+ was not found"
)


@dataclass(frozen=True)
class StreamsApp:
    """A built app: what starts one instance, which then reads the instance contract's env."""

    version: str
    home: Path
    java: str
    classpath: str
    jvm_flags: tuple[str, ...]

    def command(self) -> list[str]:
        return [self.java, *self.jvm_flags, "-cp", self.classpath, MAIN_CLASS]


def build_streams_app(
    kafka_version: str,
    progress: Callable[[str], None] = lambda _message: None,
    app_dir: Path = APP_DIR,
) -> StreamsApp:
    """Return the app built against `kafka_version`, building it first unless the cache is warm.

    Raises EoschaosError naming the build log when Maven fails (unknown Kafka version, Maven
    Central unreachable on the first build, a compile error).
    """
    if not _VERSION_RE.fullmatch(kafka_version):
        raise EoschaosError(f"'{kafka_version}' is not a Kafka version; use e.g. 4.4.0")
    home = cache_root() / "streams" / kafka_version

    def likely_cause(output: str) -> str:
        if _NO_SUCH_KAFKA.search(output):
            return f" (Kafka {kafka_version} is not on Maven Central; use a released version)"
        return ""

    def unpack_rocksdb(build_dir: Path) -> None:
        shutil.rmtree(home / "native", ignore_errors=True)
        _extract_rocksdb_library(build_dir / "libs", home / "native")

    build_cached(
        app_dir,
        home,
        {"kafka.version": kafka_version},
        "the streams workload",
        f" against Kafka {kafka_version}",
        progress,
        likely_cause,
        unpack_rocksdb,
    )
    return _app(kafka_version, home)


def _extract_rocksdb_library(libs: Path, native: Path) -> None:
    """Unpack RocksDB's native library once, for `-Djava.library.path`.

    Otherwise rocksdbjni copies its ~15 MB library into /tmp at every start and deletes it only
    on a normal JVM exit, which a killed (or halted) instance never has: chaos runs kill often.
    On a machine without a known library name the app falls back to that default.
    """
    name = _ROCKSDB_PLATFORMS.get(platform.machine())
    jars = sorted(libs.glob("rocksdbjni-*.jar"))
    if name is None or not jars or platform.system() != "Linux":
        return
    entry = f"librocksdbjni-{name}.so"
    with zipfile.ZipFile(jars[0]) as jar:
        if entry not in jar.namelist():
            return
        native.mkdir()
        (native / entry).write_bytes(jar.read(entry))


def _app(version: str, home: Path) -> StreamsApp:
    build_dir = home / "build"
    flags = JVM_FLAGS
    if (home / "native").is_dir():
        flags = (*flags, f"-Djava.library.path={home / 'native'}")
    return StreamsApp(
        version=version,
        home=home,
        java=java_binary(),
        classpath=f"{build_dir / JAR_NAME}:{build_dir / 'libs'}/*",
        jvm_flags=flags,
    )
