"""A failed example whose record the run kept as it was carries it into the verdict."""

from __future__ import annotations

import json

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.history import FINAL_COMMITTED, raw_record
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import OUTPUT_TOPIC, Plants, RunShape, generate


def _keep_raw(run_dir, record_id: int, raw: dict, *, last_output_copy: bool = False) -> None:
    """Give the final scan's reads of `record_id` (or only its last read in the output) the
    raw record a reader keeps."""
    path = run_dir / HISTORY_DIR / f"{FINAL_COMMITTED}.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    reads = [event for event in events if event.get("id") == record_id]
    if last_output_copy:
        reads = [event for event in reads if event["topic"] == OUTPUT_TOPIC][-1:]
    for event in reads:
        event["params"] = json.dumps(raw)
    path.write_text("".join(json.dumps(event) + "\n" for event in events))


def test_a_phantom_example_gets_the_record_its_read_kept(spark, tmp_path):
    run = generate(spark, tmp_path, RunShape(), Plants(phantom=1))
    (phantom,) = (p["id"] for p in run.planted["phantom"])
    raw = raw_record(b"\xff<b>", b"v", [("h", b"x")])
    _keep_raw(run.run_dir, phantom, raw)
    verdict = check_run(spark, run.run_dir, lineage=False)
    (example,) = verdict["checks"]["delivery.phantom"]["examples"]
    assert example["id"] == phantom and example["record"] == raw


def test_an_example_whose_record_was_not_kept_has_none(spark, tmp_path):
    run = generate(spark, tmp_path, RunShape(), Plants(phantom=1))
    verdict = check_run(spark, run.run_dir, lineage=False)
    (example,) = verdict["checks"]["delivery.phantom"]["examples"]
    assert "record" not in example


def test_a_duplicate_example_gets_the_later_copy_its_read_kept(spark, tmp_path):
    run = generate(spark, tmp_path, RunShape(), Plants(duplicate=1))
    (duplicate,) = (p["id"] for p in run.planted["duplicate"])
    raw = raw_record(str(duplicate).encode(), b"copy", [])
    _keep_raw(run.run_dir, duplicate, raw, last_output_copy=True)
    verdict = check_run(spark, run.run_dir, lineage=False)
    (example,) = verdict["checks"]["delivery.duplicate"]["examples"]
    assert example["id"] == duplicate and example["record"] == raw
