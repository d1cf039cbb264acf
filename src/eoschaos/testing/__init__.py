"""Test scaffolding, never used by eoschaos itself: synthetic histories with planted anomalies.

`generate` writes a correct run's history (a RunShape) with the anomalies a Plants asks for, and
says what each check must report; tests and benchmarks judge it as they would a real run.
"""

from eoschaos.testing.synthetic import (
    GROUP,
    INPUT_TOPIC,
    OUTPUT_TOPIC,
    PLANT_CHECKS,
    Plants,
    RunShape,
    SyntheticRun,
    generate,
)

__all__ = [
    "GROUP",
    "INPUT_TOPIC",
    "OUTPUT_TOPIC",
    "PLANT_CHECKS",
    "Plants",
    "RunShape",
    "SyntheticRun",
    "generate",
]
