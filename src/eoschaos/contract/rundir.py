"""The run directory: the names of what a run leaves in it, and its manifest (run.json).

A run directory is the only thing that passes from the half that runs to the half that judges
(`eoschaos check RUN_DIR` re-judges one), so every reader and writer takes these names from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eoschaos.contract.errors import EoschaosError

SCHEMA_VERSION = 1  # of the history and of run.json; docs/history.md
HISTORY_DIR = "history"  # one JSON-lines file per writer, appended live
PARQUET_DIR = "history.parquet"  # the history compacted for the checkers
RUN_MANIFEST = "run.json"  # what was run and how
SCHEDULE_FILE = "schedule.json"  # the run's resolved schedule, replayable with --schedule
CLUSTER_FILE = "cluster.json"  # the facts about the cluster the run used
VERDICT_FILE = "verdict.json"
REPORT_FILE = "report.html"


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> Path:
    """run.json: what was run and how, so a reviewer (and `eoschaos check`) can replay it."""
    path = Path(run_dir) / RUN_MANIFEST
    body = {"history_schema": SCHEMA_VERSION, **manifest}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """run.json, refused with one line naming the fix if it is missing, unreadable, or of a
    history schema version this eoschaos does not read."""
    path = Path(run_dir) / RUN_MANIFEST
    if not path.is_file():
        raise EoschaosError(
            f"{path}: missing; {run_dir} is not an eoschaos run directory "
            "(pass the run dir an eoschaos run wrote)"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise EoschaosError(f"{path}: unreadable ({error}); restore it from the run") from None
    except RecursionError:  # JSON nested deeper than Python's parser goes: not a manifest
        raise EoschaosError(f"{path}: nested too deeply to be a run.json; restore it") from None
    if not isinstance(manifest, dict):
        raise EoschaosError(f"{path}: not a JSON object; restore it from the run")
    version = manifest.get("history_schema")
    if version != SCHEMA_VERSION:
        raise EoschaosError(
            f"{path}: history schema version {version!r} is not supported (this eoschaos "
            f"reads version {SCHEMA_VERSION}); check it with the eoschaos that wrote it"
        )
    return manifest
