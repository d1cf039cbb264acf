"""`eoschaos images build`: a Kafka image made locally, for machines without an image registry.

No base image can be pulled, so the root filesystem is assembled from what the machine already
has: the host's JDK (minus jmods, headers and man pages) with the shared libraries `ldd` says it
needs, plus the cached Kafka jars of the version (eoschaos.clusters.kafka_dist). It is written as
a tar and given to `podman import` (or `docker import`); about 210 MB, seconds to build. The layout
follows the public apache/kafka image, so the containers backend runs either the same way:
`java` on PATH, Kafka's jars in /opt/kafka/libs.

The image is tagged `eoschaos/kafka:<version>` and labelled with a hash of its inputs (every
file's path, size and modification time, and the recipe version); a build whose hash matches the
tagged image's label is a no-op.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from eoschaos.clusters.container_runtime import Runtime, require_runtime
from eoschaos.clusters.kafka_dist import KafkaDistribution, java_major_version
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, java_binary

IMAGE_REPOSITORY = "eoschaos/kafka"
KAFKA_LIBS = "/opt/kafka/libs"
JAVA_HOME = "/opt/java/openjdk"
HASH_LABEL = "eoschaos.content-hash"
_RECIPE = "1"  # bump when the rootfs layout changes, so cached images are rebuilt
_JDK_SKIP = {"jmods", "include", "man", "docs", "demo", "src.zip"}
_ETC_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n",
    "etc/group": "root:x:0:\n",
    "etc/nsswitch.conf": "hosts: files dns\n",
}


def image_tag(version: str) -> str:
    return f"{IMAGE_REPOSITORY}:{version}"


def _jdk_home() -> Path:
    """The JDK the host runs brokers with (JAVA_HOME or `java` on PATH), symlinks resolved."""
    return Path(java_binary()).resolve().parent.parent


def _jdk_files(jdk: Path) -> list[Path]:
    return sorted(
        path
        for path in jdk.rglob("*")
        if path.is_file()
        and not _JDK_SKIP.intersection(path.relative_to(jdk).parts)
        and path.exists()  # a dangling symlink (e.g. to a missing cacerts) is left out
    )


def _shared_libraries(binaries: list[Path]) -> list[Path]:
    """System libraries (outside the JDK) that the JDK's binaries load, plus the loader."""
    found: set[Path] = set()
    for chunk in range(0, len(binaries), 50):
        proc = subprocess.run(
            ["ldd", *map(str, binaries[chunk : chunk + 50])],
            capture_output=True,
            text=True,
            check=False,
        )
        for match in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", proc.stdout):
            found.add(Path(match.group(1)))
    jdk = _jdk_home()
    return sorted(p for p in found if not p.resolve().is_relative_to(jdk) and p.exists())


def _rootfs_members(dist: KafkaDistribution) -> list[tuple[str, Path]]:
    """(path inside the image, host file) for every file of the root filesystem."""
    jdk = _jdk_home()
    jdk_files = _jdk_files(jdk)
    binaries = [p for p in jdk_files if p.suffix == ".so" or p.parent.name == "bin"]
    members = [(f"{JAVA_HOME.lstrip('/')}/{p.relative_to(jdk)}", p) for p in jdk_files]
    members += [(str(lib).lstrip("/"), lib) for lib in _shared_libraries(binaries)]
    jars = sorted(dist.libs.glob("*.jar"))
    if not jars:
        raise EoschaosError(
            f"no Kafka jars in {dist.libs}; run `eoschaos install --kafka-version {dist.version}`"
        )
    members += [(f"{KAFKA_LIBS.lstrip('/')}/{jar.name}", jar) for jar in jars]
    return members


def content_hash(members: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256(_RECIPE.encode())
    for name, path in members:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _write_rootfs(members: list[tuple[str, Path]], target: Path) -> None:
    with tarfile.open(target, "w", dereference=True) as tar:
        for directory in ("tmp", "root", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        for name, text in _ETC_FILES.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, path in members:
            tar.add(path, arcname=name, recursive=False)


def _labels(runtime: Runtime, tag: str) -> dict[str, str] | None:
    """The labels of image `tag`, or None if the runtime has no such image."""
    proc = runtime.run("image", "inspect", "--format", "{{json .Config.Labels}}", tag, check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip() or "null") or {}


def build_image(
    dist: KafkaDistribution,
    progress: Callable[[str], None],
    runtime: Runtime | None = None,
) -> str:
    """Build (or find cached) the local Kafka image of `dist`; return its tag."""
    runtime = runtime or require_runtime()
    if dist.major >= 4 and java_major_version(java_binary()) < 17:
        raise EoschaosError(f"Kafka {dist.version} needs Java 17+; set JAVA_HOME to one")
    tag = image_tag(dist.version)
    members = _rootfs_members(dist)
    wanted = content_hash(members)
    labels = _labels(runtime, tag)
    if labels is not None and labels.get(HASH_LABEL) == wanted:
        progress(f"image {tag} is up to date ({HASH_LABEL}={wanted})")
        return tag
    old_id = _image_id(runtime, tag)
    progress(f"building {tag} from {_jdk_home()} and {len(members)} files")
    work = cache_root() / "images"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        _write_rootfs(members, rootfs)
        changes = [
            f"ENV PATH={JAVA_HOME}/bin:/usr/bin:/bin",
            f"ENV JAVA_HOME={JAVA_HOME}",
            f"LABEL {HASH_LABEL}={wanted}",
            f"LABEL eoschaos.kafka.version={dist.version}",
            "WORKDIR /",
            'CMD ["java", "-version"]',
        ]
        args = [arg for change in changes for arg in ("--change", change)]
        try:
            runtime.run("import", *args, str(rootfs), tag, timeout=600)
        except RuntimeError as exc:
            raise EoschaosError(f"importing the image {tag} failed: {exc}") from None
    if old_id and old_id != _image_id(runtime, tag):
        runtime.run("rmi", old_id, check=False)  # the previous build, now untagged
    progress(f"built {tag}")
    return tag


def _image_id(runtime: Runtime, tag: str) -> str | None:
    proc = runtime.run("image", "inspect", "--format", "{{.Id}}", tag, check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None
