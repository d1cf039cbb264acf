"""Build a Java workload (the Streams app, the Flink job) with Maven, once per source digest.

Each build lives in its own cache directory with a stamp holding a digest of the sources: an
unchanged project costs one digest, an edited one rebuilds. `package dependency:copy-dependencies`
leaves the jar and every runtime dependency in `<home>/build` and `<home>/build/libs`.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import require_tool

BUILD_TIMEOUT_S = 900
_UNREACHABLE = re.compile(
    r"Could not transfer|UnknownHost|Connection refused|Network is unreachable"
)


def build_cached(
    project: Path,
    home: Path,
    properties: dict[str, str],
    what: str,
    target: str,
    progress: Callable[[str], None],
    likely_cause: Callable[[str], str] = lambda _output: "",
    after: Callable[[Path], None] = lambda _build_dir: None,
) -> Path:
    """Build `project` (`what`, e.g. "the streams workload", `target` e.g. " against Kafka
    4.4.0") into `home`/build unless its stamp says these sources are built there;
    `after(build_dir)` runs once after a fresh build. Returns the build dir.

    Raises EoschaosError naming the build log when Maven fails; `likely_cause(output)` may add
    what the log's lines point to (an unknown version, say).
    """
    home.mkdir(parents=True, exist_ok=True)
    digest = sources_digest(project)
    stamp = home / ".complete"
    build_dir = home / "build"
    with _exclusive(home / ".lock"):  # two runs starting at once must not build into one dir
        if not (stamp.exists() and stamp.read_text().strip() == digest):
            stamp.unlink(missing_ok=True)
            _build(
                project,
                build_dir,
                home / "build.log",
                properties,
                what,
                target,
                progress,
                likely_cause,
            )
            after(build_dir)
            stamp.write_text(digest + "\n")
    return build_dir


def sources_digest(project: Path) -> str:
    """SHA-256 over every file of the project (path and content), ignoring Maven's target/."""
    digest = hashlib.sha256()
    for path in sorted(p for p in project.rglob("*") if p.is_file()):
        relative = path.relative_to(project)
        if "target" in relative.parts:
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(
    project: Path,
    build_dir: Path,
    log: Path,
    properties: dict[str, str],
    what: str,
    target: str,
    progress: Callable[[str], None],
    likely_cause: Callable[[str], str],
) -> None:
    mvn = require_tool("mvn", "install Maven 3.8+ (apt-get install maven)")
    shutil.rmtree(build_dir, ignore_errors=True)
    progress(f"building {what}{target} (log: {log})")
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(project / "pom.xml"),
        *(f"-D{key}={value}" for key, value in properties.items()),
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
        output = log.read_text()
        cause = likely_cause(output)
        if not cause and _UNREACHABLE.search(output):
            cause = " (Maven Central is unreachable; check the network or ~/.m2/settings.xml)"
        raise EoschaosError(f"{what} failed to build{target}{cause}; read {log}")
