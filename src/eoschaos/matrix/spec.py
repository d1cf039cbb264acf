"""A matrix file (TOML): cells of `eoschaos run` options, each run per (Kafka version, seed).

    [defaults]                    # any `eoschaos run` option, by its long name
    duration = 30
    kafka_versions = ["4.4.0", "3.9.2"]
    seeds = [1, 2, 3]

    [[cell]]
    name = "kip447-alos-crash"
    mode = "alos"
    faults = "kill,crash"         # or: schedule = "schedule.json" (next to the matrix file)
    expect = "FAIL:delivery.duplicate"

The whole file is checked before anything starts (every cell run's options go through
RunConfig.from_options), so a typo in the last cell costs seconds, not a night.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoschaos.clusters import kafka_dist
from eoschaos.config import OPTIONS, RunConfig, names_of_a_run
from eoschaos.contract.checks import CATALOGUE, results_of
from eoschaos.contract.errors import EoschaosError

# Options the matrix sets per cell run itself: it shares one cluster per Kafka version and
# gives every cell run its own topics and group.
MATRIX_SET = (
    "kafka_version",
    "seed",
    "input_topic",
    "output_topic",
    "run_tag",
    "group",
    "backend",
    "image",
)
CELL_KEYS = ("name", "expect", "kafka_versions", "seeds")
# In a matrix `expect` is the cell's expectation; `eoschaos run --expect` is spelled so:
EXPECT_OUTPUT = "expect_output"


@dataclass(frozen=True)
class Expectation:
    """PASS, or FAIL with a named check failing (a known-bad calibration cell); `FAIL:a|b`
    asks for at least one of the checks named (a zombie's writes are caught as one or the
    other, depending on where it lands)."""

    verdict: str
    checks: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: Any, where: str) -> Expectation:
        if text == "PASS":
            return cls("PASS")
        if isinstance(text, str) and text.startswith("FAIL:"):
            checks = tuple(text.removeprefix("FAIL:").split("|"))
            for check in checks:
                if check not in CATALOGUE:
                    raise EoschaosError(
                        f"{where}: expect names no check {check!r}; checks: {', '.join(CATALOGUE)}"
                    )
            return cls("FAIL", checks)
        raise EoschaosError(f'{where}: expect must be "PASS" or "FAIL:<check>", got {text!r}')

    def met_by(self, verdict: dict[str, Any]) -> bool:
        if self.verdict == "PASS":
            return verdict["verdict"] == "PASS"
        checks = results_of(verdict)
        return any(check in checks and checks[check].failed for check in self.checks)

    def expects_failure_of(self, check: str) -> bool:
        return check in self.checks

    def __str__(self) -> str:
        return self.verdict if not self.checks else f"FAIL:{'|'.join(self.checks)}"


@dataclass(frozen=True)
class CellRun:
    """One cell at one Kafka version and one seed: a run and its verdict."""

    cell: str
    kafka_version: str
    seed: int
    options: dict[str, Any]  # `eoschaos run` options, without those the matrix sets
    expect: Expectation

    @property
    def key(self) -> str:
        """Its name in results.jsonl and below DIR/runs."""
        return f"{self.cell}@{self.kafka_version}#s{self.seed}"

    @property
    def dir_name(self) -> str:
        return f"{self.cell}-k{self.kafka_version}-s{self.seed}"

    def config(self, suffix: str) -> RunConfig:
        """Its RunConfig, with topics and a group of its own (`suffix`)."""
        return RunConfig.from_options(
            **self.options,
            seed=self.seed,
            kafka_version=self.kafka_version,
            **names_of_a_run(self.options.get("workload", "kip447"), suffix),
        )


def load_matrix(path: Path) -> list[CellRun]:
    """Every cell run of the matrix file, in file order; bad input: one line naming the entry."""
    try:
        document = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise EoschaosError(f"{path}: no such matrix file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EoschaosError(f"{path}: not a readable TOML matrix file: {exc}") from None
    except RecursionError:  # nested deeper than Python's TOML parser goes
        raise EoschaosError(f"{path}: not a readable TOML matrix file: nested too deeply") from None
    unknown = sorted(set(document) - {"defaults", "cell"})
    if unknown:
        raise EoschaosError(f"{path}: unknown table {unknown[0]!r}; use [defaults] and [[cell]]")
    cells = document.get("cell", [])
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise EoschaosError(f"{path}: 'cell' must be [[cell]] tables, got {cells!r:.60}")
    if not cells:
        raise EoschaosError(f"{path}: no [[cell]] entries; a matrix needs at least one")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise EoschaosError(f"{path}: 'defaults' must be a [defaults] table, got {defaults!r:.60}")
    _check_keys(defaults, f"{path}: [defaults]", allow_cell_keys=False)
    runs: list[CellRun] = []
    names: set[str] = set()
    for number, cell in enumerate(cells, 1):
        name = cell.get("name")
        where = f"{path}: cell {number}" + (f" ({name!r})" if name else "")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise EoschaosError(f"{where}: needs a name of letters, digits, '-' and '_'")
        if name in names:
            raise EoschaosError(f"{where}: the name {name!r} is used twice")
        names.add(name)
        _check_keys(cell, where, allow_cell_keys=True)
        merged = {**defaults, **cell}
        if "expect" not in merged:
            raise EoschaosError(f'{where}: needs expect = "PASS" or "FAIL:<check>"')
        expect = Expectation.parse(merged["expect"], where)
        options = {k: v for k, v in merged.items() if k in OPTIONS and k != "expect"}
        if EXPECT_OUTPUT in merged:
            options["expect"] = merged[EXPECT_OUTPUT]
        if isinstance(options.get("schedule"), str):
            options["schedule"] = Path(path).parent / options["schedule"]
        versions = _list_of(merged, "kafka_versions", [kafka_dist.DEFAULT_KAFKA_VERSION], where)
        seeds = _list_of(merged, "seeds", [0], where)
        for version in versions:
            for seed in seeds:
                run = CellRun(name, str(version), seed, options, expect)
                try:
                    run.config("check")
                except EoschaosError as exc:
                    raise EoschaosError(f"{where}: {exc}") from None
                except TypeError as exc:  # a value of the wrong type for its option
                    raise EoschaosError(f"{where}: {exc}") from None
                runs.append(run)
    return runs


def _check_keys(table: dict[str, Any], where: str, *, allow_cell_keys: bool) -> None:
    allowed = set(OPTIONS) - set(MATRIX_SET) | {"kafka_versions", "seeds", "expect", EXPECT_OUTPUT}
    if allow_cell_keys:
        allowed |= set(CELL_KEYS)
    for key in table:
        if key in MATRIX_SET:
            raise EoschaosError(
                f"{where}: {key!r} is set by the matrix per cell run; "
                + ("use kafka_versions = [...]" if key == "kafka_version" else "")
                + ("use seeds = [...]" if key == "seed" else "")
                + ("" if key in ("kafka_version", "seed") else "leave it out")
            )
        if key not in allowed:
            raise EoschaosError(
                f"{where}: unknown option {key!r}; options are `eoschaos run`'s long names "
                f"with '_' for '-' ({', '.join(sorted(allowed))})"
            )


def _list_of(table: dict[str, Any], key: str, default: list[Any], where: str) -> list[Any]:
    value = table.get(key, default)
    if not isinstance(value, list) or not value:
        raise EoschaosError(f"{where}: {key} must be a non-empty list, got {value!r}")
    return value
