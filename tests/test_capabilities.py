"""Workloads declare what their history holds; run.json records it; checks read it from there."""

from __future__ import annotations

import pytest

from eoschaos.contract.capabilities import Capabilities
from eoschaos.workloads.registry import KINDS

EVERY_KIND_AND_MODE = [(kind.name, mode) for kind in KINDS.values() for mode in kind.modes]


def test_only_our_own_processors_record_their_transactions():
    recording = {kind.name for kind in KINDS.values() if kind.records_transactions}
    assert recording == {"kip447"}


def test_a_mode_without_transactions_has_no_transactional_ids_to_aim_at():
    capabilities = KINDS["kip447"].capabilities("alos", expect=False)
    assert not capabilities.transactions and not capabilities.assigned_transactional_ids


def test_streams_derives_its_own_transactional_ids():
    assert not KINDS["streams"].capabilities("eos", expect=False).assigned_transactional_ids


def test_an_expect_run_writes_results_not_copies():
    assert not KINDS["byo"].capabilities("eos", expect=True).output_is_copies


@pytest.mark.parametrize(("workload", "mode"), EVERY_KIND_AND_MODE)
@pytest.mark.parametrize("expect", [False, True])
def test_a_run_dir_from_before_capabilities_is_judged_as_its_workload_declares(
    workload, mode, expect
):
    old_manifest = {"workload": workload, "mode": mode, "expect": "f.py:g" if expect else None}
    declared = KINDS[workload].capabilities(mode, expect=expect)
    assert Capabilities.of_manifest(old_manifest) == declared


def test_recorded_capabilities_are_read_back_whatever_the_workload_is_called():
    recorded = Capabilities(
        transactions=True,
        transaction_history=False,
        output_is_copies=True,
        assigned_transactional_ids=True,
    )
    manifest = {"workload": "kip447", "mode": "eos", **recorded.to_manifest()}
    assert Capabilities.of_manifest(manifest) == recorded


def test_streams_declares_the_status_its_app_exits_with_when_it_failed():
    assert KINDS["streams"].capabilities("eos", expect=False).failure_exits == (1,)
    assert KINDS["kip447"].capabilities("eos", expect=False).failure_exits == ()


def test_a_streams_run_recorded_before_failure_exits_were_declared_is_judged_by_them():
    """Its capabilities were recorded without the key; the app exited 1 on failure then too."""
    recorded = KINDS["streams"].capabilities("eos", expect=False).to_manifest()
    del recorded["capabilities"]["failure_exits"]
    manifest = {"workload": "streams", "mode": "eos", **recorded}
    assert Capabilities.of_manifest(manifest).failure_exits == (1,)
