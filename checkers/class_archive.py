"""A class-data-sharing archive of the Spark driver's classes: a cold check starts ~5 s sooner.

A cold `eoschaos check` of a README-sized run spends a third of its time with the driver JVM
loading and verifying Spark's ~10,000 classes from jars. The JVM (JDK 13+) can write the
classes an application loaded to an archive when it exits (-XX:ArchiveClassesAtExit) and map
that archive at the next start (-XX:SharedArchiveFile), skipping that work.

The first Spark start on a machine (per Spark and JVM build) writes the archive, which costs
~10 s once when that JVM exits; every later start maps it. The JVM writes to a part file of
its own and puts the archive's header in last, so a part file whose header is there is
complete: the next start adopts it. A JVM that does not accept an archive (another JVM build,
heap settings) runs without it -- slower, never wrong -- so the archive is an optimisation
only, and EOSCHAOS_SPARK_CLASS_ARCHIVE=off turns it off. The brokers get the same treatment
(clusters.process_backend.build_class_archive); the driver's archive is written by whichever
Spark start comes first, because a check has no install step of its own.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import pyspark

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, java_binary

CLASS_ARCHIVE_ENV = "EOSCHAOS_SPARK_CLASS_ARCHIVE"  # "off" turns the archive off
# The first bytes of a finished dynamic archive (CDS_DYNAMIC_ARCHIVE_MAGIC, little-endian).
DYNAMIC_ARCHIVE_MAGIC = bytes.fromhex("a8ab0bf0")
PART_SUFFIX = ".part"
ABANDONED_PART_S = 600  # a part file without its header this old was left by a killed JVM
QUIET = "-Xlog:cds*=off"  # an archive the JVM cannot use is not worth a warning per start


def archive_directory() -> Path | None:
    """Where archives are kept: eoschaos' cache (EOSCHAOS_CACHE), unless turned off."""
    if os.environ.get(CLASS_ARCHIVE_ENV) == "off":
        return None
    return cache_root() / "spark"


def archive_path(directory: Path) -> Path | None:
    """The archive for this Spark and this JVM build, or None when no java is found (Spark
    will say so itself). The name changes when either does, so a stale archive is never
    offered to a new JVM."""
    try:
        java = Path(java_binary()).resolve()
    except EoschaosError:
        return None
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    build = libjvm if libjvm.exists() else java
    spark = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    identity = f"{java}|{build.stat().st_mtime_ns}|{spark}|{pyspark.__version__}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return directory / f"spark-{pyspark.__version__}-classes-{digest}.jsa"


def java_options() -> str:
    """The driver JVM's options for the archive: map it if there is one, else write it at exit."""
    directory = archive_directory()
    archive = archive_path(directory) if directory else None
    if archive is None:
        return ""
    adopt_finished_parts(archive)
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""  # no writable cache: start as before
    part = archive.with_name(f"{archive.name}.{os.getpid()}{PART_SUFFIX}")
    print(
        f"eoschaos: Spark's classes will be archived to {archive} when it exits (once, ~10 s; "
        f"later starts are ~5 s faster; {CLASS_ARCHIVE_ENV}=off to skip)",
        file=sys.stderr,
        flush=True,
    )
    return f"-XX:ArchiveClassesAtExit={part} {QUIET}"


def adopt_finished_parts(archive: Path) -> None:
    """The first finished part file becomes the archive; other finished ones and parts
    abandoned by killed JVMs are removed. Parts still being written are left alone."""
    for part in sorted(archive.parent.glob(f"{archive.name}.*{PART_SUFFIX}")):
        try:
            if _finished(part) and not archive.exists():
                part.rename(archive)
            elif _finished(part) or time.time() - part.stat().st_mtime > ABANDONED_PART_S:
                part.unlink()
        except OSError:
            continue  # another process adopted or removed it first


def _finished(part: Path) -> bool:
    with part.open("rb") as file:
        return file.read(len(DYNAMIC_ARCHIVE_MAGIC)) == DYNAMIC_ARCHIVE_MAGIC
