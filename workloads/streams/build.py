"""Build the Kafka Streams workload's application against the Kafka version under test.

The app must run the client of the cluster's own version (a 4.x client on a 4.x cluster uses
transaction.version 2, a 3.9 client the older protocol), so the same sources are compiled with
Maven against each version's kafka-streams. The result is cached per version in
`cache_root()/streams/<version>/` with a stamp holding a digest of the sources: an unchanged app
costs one digest, an edited one rebuilds.
"""

from __future__ import annotations

import fcntl
import hashlib
import platform
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, java_binary, require_tool

APP_DIR = Path(__file__).parent / "app"
MAIN_CLASS = "eoschaos.streams.App"
JAR_NAME = "eoschaos-streams.jar"
BUILD_TIMEOUT_S = 900
# Small heap, one GC thread and C1 only: two to three instances share two cores with three
# brokers, and a run is too short for C2 to pay for its compile time.
JVM_FLAGS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")
# The name rocksdbjni gives its Linux library per machine, in the jar and for System.loadLibrary.
_ROCKSDB_PLATFORMS = {"x86_64": "linux64", "aarch64": "linux-aarch64"}
_UNREACHABLE = re.compile(
    r"Could not transfer|UnknownHost|Connection refused|Network is unreachable"
)
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
    home.mkdir(parents=True, exist_ok=True)
    digest = sources_digest(app_dir)
    stamp = home / ".complete"
    with _exclusive(home / ".lock"):  # two runs starting at once must not build into one dir
        if not (stamp.exists() and stamp.read_text().strip() == digest):
            stamp.unlink(missing_ok=True)
            _build(kafka_version, app_dir, home, progress)
            stamp.write_text(digest + "\n")
    return _app(kafka_version, home)


def sources_digest(app_dir: Path) -> str:
    """SHA-256 over every file of the app (path and content), ignoring Maven's target/ dirs."""
    digest = hashlib.sha256()
    for path in sorted(p for p in app_dir.rglob("*") if p.is_file()):
        relative = path.relative_to(app_dir)
        if "target" in relative.parts:
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(version: str, app_dir: Path, home: Path, progress: Callable[[str], None]) -> None:
    mvn = require_tool("mvn", "install Maven 3.8+ (apt-get install maven)")
    build_dir = home / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    shutil.rmtree(home / "native", ignore_errors=True)
    log = home / "build.log"
    progress(f"building the streams workload against Kafka {version} (log: {log})")
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(app_dir / "pom.xml"),
        f"-Dkafka.version={version}",
        f"-Dbuild.dir={build_dir}",
        "package",
        "dependency:copy-dependencies",
    ]
    with open(log, "w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        try:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S, check=False
            )
            failed = proc.returncode != 0
        except subprocess.TimeoutExpired:
            failed = True
            out.write(f"\nmvn did not finish within {BUILD_TIMEOUT_S} s\n")
    if failed:
        raise EoschaosError(
            f"the streams workload failed to build against Kafka {version}"
            f"{_likely_cause(log.read_text(), version)}; read {log}"
        )
    _extract_rocksdb_library(build_dir / "libs", home / "native")


def _likely_cause(output: str, version: str) -> str:
    if _NO_SUCH_KAFKA.search(output):
        return f" (Kafka {version} is not on Maven Central; use a released version)"
    if _UNREACHABLE.search(output):
        return " (Maven Central is unreachable; check the network or ~/.m2/settings.xml)"
    return ""


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
