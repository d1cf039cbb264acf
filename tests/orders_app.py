"""The walkthrough's pipeline (docs/byo.md, workloads/orders_app): a Kafka Streams app of JSON
orders from two shops, built as a jar with Maven and as an image with the runtime's `build`,
as a user would build theirs. Both builds are cached under the sources' digest, so an
unchanged app costs one digest; `--dead-letters-outside-transaction` selects the known-bad
variant in either form."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

import copier_image

from eoschaos.clusters.container_runtime import require_runtime
from eoschaos.contract.host import cache_root
from eoschaos.workloads.maven import sources_digest

APP_DIR = Path(__file__).parent.parent / "workloads" / "orders_app"
JVM = "java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
KNOWN_BAD = "--dead-letters-outside-transaction"
_DIGEST = sources_digest(APP_DIR)
_HOME = cache_root() / "orders-app" / _DIGEST[:16]
JAR = _HOME / "dist" / "orders-pipeline.jar"  # alone in its dir: the image's build context
IMAGE = f"eoschaos-example/orders-pipeline:{_DIGEST[:16]}"
# The image's own command runs the jar; --command replaces it to pass an argument.
IMAGE_JAR = "/app/orders-pipeline.jar"

# Orders from two shops (workloads/byo_orders.py's input), one in 20 without an amount
TOPICS = {
    "workload": "byo",
    "input": "eoschaos.workloads.byo_orders:two_shops",
    "id_from": "json:order_id",
    "input_topics": "web-orders,shop-orders:3",
    "output_topics": "enriched-orders",
    "dead_letter_topics": "rejected-orders:2",
}
AS_JAR = {**TOPICS, "command": f"{JVM} -jar {JAR}"}
AS_JAR_KNOWN_BAD = {**TOPICS, "command": f"{JVM} -jar {JAR} {KNOWN_BAD}"}
AS_IMAGE = {**TOPICS, "pipeline_image": IMAGE}
AS_IMAGE_KNOWN_BAD = {**AS_IMAGE, "command": f"{JVM} -jar {IMAGE_JAR} {KNOWN_BAD}"}


def built_jar() -> Path:
    """The jar, built with Maven unless the cache holds this digest's (a few seconds warm)."""
    _HOME.mkdir(parents=True, exist_ok=True)
    with open(_HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions building at once must not mix
        if not JAR.exists():
            build_dir = _HOME / "build"
            subprocess.run(
                [
                    "mvn",
                    "-B",
                    "-q",
                    "-Dstyle.color=never",
                    "-f",
                    str(APP_DIR / "pom.xml"),
                    f"-Dbuild.dir={build_dir}",
                    "package",
                ],
                check=True,
                timeout=900,
            )
            JAR.parent.mkdir(exist_ok=True)
            (build_dir / JAR.name).rename(JAR)
    return JAR


def built_image() -> str:
    """The image of the jar on the local Kafka image's Java (no registry to pull a JRE from)."""
    runtime = require_runtime()
    if runtime.run("image", "inspect", IMAGE, check=False).returncode != 0:
        base = copier_image.built(runtime)
        jar = built_jar()
        runtime.run(
            "build", "--build-arg", f"BASE={base}", "-t", IMAGE,
            "-f", str(APP_DIR / "Containerfile"), str(jar.parent),
            timeout=600,
        )  # fmt: skip
    return IMAGE
