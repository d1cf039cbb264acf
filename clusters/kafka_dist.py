"""Obtain a real Apache Kafka: jars resolved from Maven Central into a cache, or KAFKA_HOME.

No tarball is needed: the broker, the storage tool and the admin tools all live in
`kafka_2.13` and `kafka-tools`, so a two-dependency pom resolved with Maven gives a complete
classpath. The cache lives outside the repository so a fresh clone reuses it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, java_binary, require_tool

DEFAULT_KAFKA_VERSION = "4.4.0"
LATEST_3X_VERSION = "3.9.2"
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_LOG_CONFIGS = Path(__file__).parent / "log_configs"
_MVN_FLAGS = ["-B", "-q"]

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eoschaos</groupId>
  <artifactId>kafka-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


@dataclass(frozen=True)
class KafkaDistribution:
    """A folder of Kafka jars plus what is needed to start JVMs from it."""

    version: str
    libs: Path

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def classpath(self) -> str:
        return f"{self.libs}/*"

    def logging_args(self, log_dir: Path, *, tool: bool = False) -> list[str]:
        """JVM flags that send Kafka's logs to `log_dir` (brokers) or WARN to stderr (tools).

        4.x logs through Log4j2, 3.9.x through reload4j (Log4j 1 API); each needs its own file.
        """
        if self.major >= 4:
            name = "tools-log4j2.properties" if tool else "log4j2.properties"
            flag = f"-Dlog4j2.configurationFile={_LOG_CONFIGS / name}"
        else:
            name = "tools-log4j.properties" if tool else "log4j.properties"
            flag = f"-Dlog4j.configuration=file:{_LOG_CONFIGS / name}"
        return [flag, f"-Dkafka.logs.dir={log_dir}"]


def class_archive(dist: KafkaDistribution) -> Path:
    """Where the broker class-data-sharing archive of `dist` lives; valid for one JVM build."""
    java_id = re.sub(r"[^A-Za-z0-9.]+", "_", _java_build(java_binary()))
    return cache_root() / "kafka" / dist.version / f"broker-{java_id}.jsa"


@functools.cache
def _java_build(java: str) -> str:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    first = out.splitlines()[1] if len(out.splitlines()) > 1 else out
    return first.strip()


def parse_version(version: str) -> tuple[int, int, int]:
    """Validate a Kafka version eoschaos can run: 3.9.x (last 3.x) or any 4.x, KRaft only."""
    match = _VERSION_RE.match(version)
    if not match:
        raise EoschaosError(
            f"'{version}' is not a Kafka version; use MAJOR.MINOR.PATCH, "
            f"e.g. --kafka-version {DEFAULT_KAFKA_VERSION}"
        )
    major, minor, patch = (int(g) for g in match.groups())
    if not (major == 4 or (major, minor) == (3, 9)):
        raise EoschaosError(
            f"Kafka {version} is not supported: eoschaos runs 3.9.x and 4.x in KRaft mode; "
            f"use --kafka-version {DEFAULT_KAFKA_VERSION} or {LATEST_3X_VERSION}"
        )
    return major, minor, patch


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise EoschaosError(f"could not read the version of {java}; set JAVA_HOME to a JDK 17+")
    first = int(match.group(1))
    return int(match.group(2) or 0) if first == 1 else first


def resolve(version: str | None = None) -> KafkaDistribution:
    """Return the Kafka to run: KAFKA_HOME if set, else jars for `version` from the cache.

    Resolves from Maven Central on first use; later calls only check the cache stamp.
    """
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        return _from_kafka_home(Path(kafka_home), version)
    version = version or DEFAULT_KAFKA_VERSION
    parse_version(version)
    target = cache_root() / "kafka" / version
    libs = target / "libs"
    if not (target / ".complete").exists():
        _resolve_with_maven(version, target)
    return KafkaDistribution(version=version, libs=libs)


def _from_kafka_home(home: Path, wanted: str | None) -> KafkaDistribution:
    libs = home / "libs"
    jars = sorted(libs.glob("kafka_2.1*-*.jar")) if libs.is_dir() else []
    core = [j for j in jars if re.fullmatch(r"kafka_2\.1\d-\d+\.\d+\.\d+\.jar", j.name)]
    if not core:
        raise EoschaosError(
            f"KAFKA_HOME={home} is not a Kafka distribution (no libs/kafka_2.13-<version>.jar); "
            "fix KAFKA_HOME or unset it to use the jars eoschaos resolves itself"
        )
    version = core[0].stem.split("-", 1)[1]
    parse_version(version)
    if wanted and wanted != version:
        raise EoschaosError(
            f"--kafka-version {wanted} differs from KAFKA_HOME's Kafka {version}; "
            "drop one of the two"
        )
    return KafkaDistribution(version=version, libs=libs)


def _resolve_with_maven(version: str, target: Path) -> None:
    mvn = require_tool("mvn", "install Maven 3.8+ (apt-get install maven)")
    staging = target / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pom = target / "pom.xml"
    pom.write_text(_POM.format(version=version))
    out = f"-DoutputDirectory={staging}"
    _run_maven([mvn, *_MVN_FLAGS, "-f", str(pom), "dependency:copy-dependencies", out], version)
    binding = _missing_slf4j_binding(staging)
    if binding:
        artifact = f"-Dartifact={binding}"
        _run_maven([mvn, *_MVN_FLAGS, "-f", str(pom), "dependency:copy", artifact, out], version)
    shutil.rmtree(target / "libs", ignore_errors=True)
    staging.rename(target / "libs")
    (target / ".complete").write_text(version + "\n")


def _missing_slf4j_binding(libs: Path) -> str | None:
    """Kafka 4.x's pom brings Log4j2 but no slf4j binding; pick the one matching its jars."""
    if any(libs.glob("slf4j-reload4j-*.jar")) or any(libs.glob("log4j-slf4j*-impl-*.jar")):
        return None
    cores = sorted(libs.glob("log4j-core-*.jar"))
    if not cores:
        return None
    log4j_version = cores[0].stem.removeprefix("log4j-core-")
    slf4j_2 = any(p.name.startswith("slf4j-api-2.") for p in libs.glob("slf4j-api-*.jar"))
    artifact = "log4j-slf4j2-impl" if slf4j_2 else "log4j-slf4j-impl"
    return f"org.apache.logging.log4j:{artifact}:{log4j_version}"


def _run_maven(cmd: list[str], version: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return
    output = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # Maven colours even in -B
    if re.search(
        r"Could not find artifact org\.apache\.kafka:|org\.apache\.kafka:\S+ was not found", output
    ):
        raise EoschaosError(
            f"Kafka {version} is not on Maven Central; use a released version such as "
            f"{DEFAULT_KAFKA_VERSION} or {LATEST_3X_VERSION}"
        )
    unreachable = (
        r"Could not transfer|UnknownHost|Connection refused|timed out|Network is|No plugin"
    )
    if re.search(unreachable, output):
        raise EoschaosError(
            f"Maven Central is unreachable while resolving Kafka {version}; check the network "
            "or the mirror/proxy in ~/.m2/settings.xml, or point KAFKA_HOME at a Kafka install"
        )
    first_error = next((ln for ln in output.splitlines() if "ERROR" in ln), output.strip()[:200])
    raise EoschaosError(f"Maven failed to resolve Kafka {version}: {first_error.strip()}")
