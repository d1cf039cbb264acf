"""Build the Flink workload: the job and the Flink runtime its cluster's processes run.

Maven Central has no flink-dist, so the job's own dependencies (flink-runtime, flink-clients,
flink-container, the RPC loader, the Kafka connector) are the runtime: one classpath serves the
JobManager (application mode, the job's main on it) and every TaskManager. Flink's version is
pinned in the pom, to the minor the connector is built for. Cached in `cache_root()/flink/`
(eoschaos.workloads.maven).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eoschaos.contract.host import cache_root, java_binary
from eoschaos.workloads.flink.checkpoints import LOG_TIME_FORMAT
from eoschaos.workloads.maven import build_cached

JOB_DIR = Path(__file__).parent / "job"
MAIN_CLASS = "eoschaos.flink.Job"
JAR_NAME = "eoschaos-flink.jar"
JOBMANAGER_CLASS = "org.apache.flink.container.entrypoint.StandaloneApplicationClusterEntryPoint"
TASKMANAGER_CLASS = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
# Heaps inside the processes' configured sizes (workloads/flink/pipeline.py), one GC thread, C1
# only: three JVMs share two cores with three brokers. Flink's own scripts derive these from
# the memory configuration; started directly, a JVM takes them from here.
JOBMANAGER_FLAGS = ("-Xms64m", "-Xmx384m", "-XX:MaxMetaspaceSize=192m")
TASKMANAGER_FLAGS = ("-Xms64m", "-Xmx448m", "-XX:MaxDirectMemorySize=192m")
COMMON_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    # slf4j-simple to the instance's log, each line stamped with its wall-clock time (the
    # checkpoints are read back by it); the Kafka clients' INFO lines (a config dump per
    # client) would bury Flink's
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    f"-Dorg.slf4j.simpleLogger.dateTimeFormat={LOG_TIME_FORMAT}",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka=warn",
    # what Flink's default env.java.opts.all opens on Java 17 (its serializers reflect into these)
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.lang.reflect",
            "java.io",
            "java.net",
            "java.nio",
            "sun.nio.ch",
            "java.text",
            "java.time",
            "java.util",
            "java.util.concurrent",
            "java.util.concurrent.atomic",
            "java.util.concurrent.locks",
        )
    ),
)


@dataclass(frozen=True)
class FlinkJob:
    """A built job: what starts the JobManager (running the job) and each TaskManager."""

    home: Path
    java: str
    classpath: str

    def jobmanager_command(self, conf_dir: Path, tmp_dir: Path, restore: Path | None) -> list[str]:
        """`tmp_dir`: the run's, for what Flink unpacks and writes to java.io.tmpdir (its RPC
        system's jar, the REST server's files, a JAAS file), which a killed JVM leaves."""
        restored = ["--fromSavepoint", str(restore)] if restore is not None else []
        return [
            *self._jvm(JOBMANAGER_FLAGS, tmp_dir),
            JOBMANAGER_CLASS,
            "--configDir",
            str(conf_dir),
            "--job-classname",
            MAIN_CLASS,
            *restored,
        ]

    def taskmanager_command(self, conf_dir: Path, tmp_dir: Path) -> list[str]:
        jvm = self._jvm(TASKMANAGER_FLAGS, tmp_dir)
        return [*jvm, TASKMANAGER_CLASS, "--configDir", str(conf_dir)]

    def _jvm(self, flags: tuple[str, ...], tmp_dir: Path) -> list[str]:
        tmp = f"-Djava.io.tmpdir={tmp_dir}"
        return [self.java, *flags, *COMMON_FLAGS, tmp, "-cp", self.classpath]


def build_flink_job(progress: Callable[[str], None] = lambda _message: None) -> FlinkJob:
    """Return the job, building it first unless the cache is warm (EoschaosError naming the
    build log when Maven fails)."""
    home = cache_root() / "flink"
    build_dir = build_cached(JOB_DIR, home, {}, "the flink workload", "", progress)
    return FlinkJob(
        home=home,
        java=java_binary(),
        classpath=f"{build_dir / JAR_NAME}:{build_dir / 'libs'}/*",
    )
