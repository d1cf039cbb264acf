"""Spark's Kafka connector jars, resolved once with Maven so that a run never needs the network.

pyspark ships Spark without its Kafka source and sink (`spark-sql-kafka-0-10`). Spark's own
answer, `spark.jars.packages`, resolves them with Ivy at every driver start: a network round
trip per restart, and a restart that fails when the registry is slow. Instead the connector is
resolved here once (at install time) into the eoschaos cache and the job passes the jars as
`spark.jars`.

Only what pyspark's jars folder lacks is kept (kafka-clients, spark-token-provider-kafka,
commons-pool2 and the connector itself): a second scala-library or hadoop-client on the
driver's classpath, in another version, would be an accident waiting to happen.

pyspark can be on PyPI before Spark's artifacts are on Maven Central (pyspark 4.3.0 is, as
this is written). Then the previous minor's connector is used: it builds on Spark's data
source V2 API, which holds within a major version (the 4.2.0 connector runs on Spark 4.3.0;
tests/test_spark_job.py runs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyspark

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, require_tool

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
STAMP = ".complete"
MAVEN_LOG = "maven.log"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>eoschaos</groupId>
  <artifactId>spark-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""
# artifact-1.2.3.jar, artifact_2.13-4.0.0-preview1.jar, zstd-jni-1.5.7-7.jar: the version is
# the last "-<digits>.<digits>..." of the name, so "log4j-1.2-api-2.25.jar" is log4j-1.2-api.
_JAR_NAME = re.compile(r"^(?P<artifact>.+)-\d+(?:\.\d+)+[^/]*\.jar$")
_NOT_FOUND = re.compile(
    r"Could not find artifact org\.apache\.spark:|org\.apache\.spark:\S+ was not found"
    r"|No versions available for org\.apache\.spark"
)
_UNREACHABLE = re.compile(
    r"Could not transfer|UnknownHost|Connection refused|timed out|Network is|No plugin"
)


def _quiet(_message: str) -> None:
    """The default progress callback: say nothing."""


def connector_jars(
    spark_version: str | None = None, progress: Callable[[str], None] = _quiet
) -> list[Path]:
    """The jars to pass as `spark.jars` for Spark `spark_version` (default: pyspark's).

    The first call resolves them from Maven Central into
    `cache_root()/spark-kafka/<spark version>/libs` (stamped with `.complete`, which records
    the connector version used); later calls only read the cache.
    """
    spark_version = spark_version or pyspark.__version__
    target = cache_root() / "spark-kafka" / spark_version
    libs = target / "libs"
    if not (target / STAMP).exists():
        _resolve(spark_version, target, progress)
    return sorted(libs.glob("*.jar"))


def _resolve(spark_version: str, target: Path, progress: Callable[[str], None]) -> None:
    mvn = require_tool("mvn", "install Maven 3.8+ (apt-get install maven)")
    target.mkdir(parents=True, exist_ok=True)
    (target / MAVEN_LOG).unlink(missing_ok=True)
    staging = target / "staging"
    progress(f"resolving {CONNECTOR} for Spark {spark_version} with Maven into {target}")
    for version in _candidates(spark_version):
        try:
            _copy_dependencies(mvn, version, target, staging)
            break
        except _NotOnCentral:
            progress(f"{CONNECTOR}:{version} is not on Maven Central")
    else:
        raise EoschaosError(
            f"Maven Central has no release of {CONNECTOR} for Spark {spark_version}; install a "
            f"pyspark whose Spark is released there; see {target / MAVEN_LOG}"
        )
    connector_version = _connector_version(staging)
    _drop_jars_pyspark_has(staging)
    shutil.rmtree(target / "libs", ignore_errors=True)
    staging.rename(target / "libs")
    (target / STAMP).write_text(f"spark {spark_version}\nconnector {connector_version}\n")
    progress(f"Spark Kafka connector {connector_version} for Spark {spark_version}: {target}")


def _candidates(spark_version: str) -> list[str]:
    """The exact version, then the previous minor's .0 release (every Spark minor has one).

    Not a Maven version range: Maven sorts "4.2.0-preview1" after "4.2.0" and reads the pom of
    every version in a range, and previews' poms name parents and repositories that are not
    all on Central.
    """
    match = re.match(r"^(\d+)\.(\d+)\.", spark_version)
    if not match or match.group(2) == "0":
        return [spark_version]
    return [spark_version, f"{match.group(1)}.{int(match.group(2)) - 1}.0"]


class _NotOnCentral(Exception):
    """Maven Central has no connector of the version asked for."""


def _copy_dependencies(mvn: str, version: str, target: Path, staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pom = target / "pom.xml"
    pom.write_text(_POM.format(version=version))
    log = target / MAVEN_LOG
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    output = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # Maven colours in -B too
    with log.open("a") as out:  # one section per candidate version
        out.write(f"$ {' '.join(cmd)}\n{output}\n")
    if proc.returncode == 0:
        return
    if _NOT_FOUND.search(output):
        raise _NotOnCentral
    if _UNREACHABLE.search(output):
        raise EoschaosError(
            f"Maven Central is unreachable while resolving {CONNECTOR}; check the network or "
            f"the mirror/proxy in ~/.m2/settings.xml, then run `bash scripts/install.sh`; see {log}"
        )
    raise EoschaosError(f"Maven failed to resolve {CONNECTOR}:{version}; see {log}")


def _connector_version(staging: Path) -> str:
    prefix = CONNECTOR.split(":")[1] + "-"
    jar = next(staging.glob(f"{prefix}*.jar"))
    return jar.stem.removeprefix(prefix)


def _artifact(jar: Path) -> str:
    match = _JAR_NAME.match(jar.name)
    return match.group("artifact") if match else jar.stem


def _drop_jars_pyspark_has(staging: Path) -> None:
    """Remove every jar whose artifact pyspark's jars folder already has, in any version."""
    bundled = {_artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in staging.glob("*.jar"):
        if _artifact(jar) in bundled:
            jar.unlink()
