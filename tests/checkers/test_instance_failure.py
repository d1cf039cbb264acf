"""liveness.instance-failure: an instance that exits on its own with a status its workload
declares a failure FAILs the check; a stop, a kill by a fault and a fencing do not. Judged on
the census' exit rows on the driver (no Spark: the census here is built by hand)."""

from __future__ import annotations

from eoschaos.checkers.census import Census
from eoschaos.checkers.liveness import instance_failure_tally
from eoschaos.contract.checks import INSTANCE_FAILURE

START = 1000.0
STREAMS_FAILED = (1,)


def census_with_exits(*statuses: str | None) -> Census:
    """A census whose only rows are instance 0's exits, one a second, with these statuses."""
    exits = [
        {"f": "exit", "instance": 0, "incarnation": n, "error": status, "time": START + n + 1}
        for n, status in enumerate(statuses)
    ]
    return Census(
        events=len(exits),
        start=START,
        end=START + len(exits),
        readers=[],
        records={},
        acked_sends=0,
        first_offsets={},
        last_offsets={},
        end_rows=[],
        faults=[],
        log_rows={},
        exits=exits,
    )


def test_an_exit_with_a_declared_failure_status_is_a_failure_with_its_place_and_time():
    tally = instance_failure_tally(census_with_exits("-9", "1", "0"), STREAMS_FAILED, 5)
    found = tally[INSTANCE_FAILURE.name]
    assert (found.count, found.examples) == (
        1,
        [{"instance": 0, "incarnation": 1, "status": 1, "at_s": 2.0}],
    )


def test_stops_kills_by_faults_and_fencings_are_not_failures():
    """0: stopped; -9 and 137: SIGKILL of a process and of a container; 143: SIGTERM in a
    container; 3: the kip447 processor's fenced exit; None: an exit row without a status."""
    census = census_with_exits("0", "-9", "137", "143", "3", None, "not a number")
    assert instance_failure_tally(census, STREAMS_FAILED, 5)[INSTANCE_FAILURE.name].count == 0


def test_every_failure_is_counted_but_only_the_first_ones_are_examples():
    tally = instance_failure_tally(census_with_exits("1", "1", "1"), STREAMS_FAILED, 2)
    found = tally[INSTANCE_FAILURE.name]
    assert found.count == 3
    assert [example["incarnation"] for example in found.examples] == [0, 1]
