"""RunConfig.from_options: one place turns `eoschaos run` options into a checked config."""

from __future__ import annotations

import pytest

from eoschaos.chaos.schedule import FaultEvent
from eoschaos.config import RunConfig
from eoschaos.contract.errors import EoschaosError

# run.json's keys before the config was nested (schema 1); the checkers read some of them
MANIFEST_KEYS_SCHEMA_1 = {
    "workload", "mode", "faults", "schedule_events", "intensity", "recovery_wait",
    "non_idempotent_seeder", "duration", "seed", "records", "instances", "partitions",
    "brokers", "kafka_version", "backend", "image", "input_topic", "output_topic", "group",
    "command", "id_from", "expect", "start_timeout", "max_lag",
}  # fmt: skip


def test_defaults_are_those_eoschaos_run_documents():
    config = RunConfig.from_options()
    assert (config.workload, config.mode, config.duration) == ("kip447", "eos", 30.0)
    assert config.pipeline.instances == 3
    assert config.pipeline.group.startswith("eoschaos-kip447-")
    assert config.start_timeout == 60.0


def test_two_runs_share_no_topic_group_or_transactional_id():
    """A client left from one run (an orphan, a stale address) can never enter the next:
    everything it could read, write, join or fence is named for its own run."""
    first, second = RunConfig.from_options().pipeline, RunConfig.from_options().pipeline
    assert first.input_topic != second.input_topic
    assert first.output_topic != second.output_topic
    assert first.group != second.group
    assert first.transactional_id_prefix != second.transactional_id_prefix


def test_names_given_explicitly_are_kept():
    config = RunConfig.from_options(input_topic="in", output_topic="out", group="g")
    assert (config.pipeline.input_topic, config.pipeline.output_topic) == ("in", "out")
    assert config.pipeline.group == "g"


def test_the_workload_receives_the_duration_as_its_seeding_time():
    assert RunConfig.from_options(duration=45).pipeline.seed_seconds == 45


def test_faults_are_parsed_from_the_comma_separated_string():
    assert RunConfig.from_options(faults="kill,zombie").faults == ["kill", "zombie"]


def test_an_explicit_schedule_names_its_faults():
    schedule = [FaultEvent(at=5.0, fault="kill", target="broker:1", duration=3.0)]
    config = RunConfig.from_options(schedule=schedule)
    assert config.faults == ["kill"]
    assert config.schedule_events == [schedule[0].to_json()]


def test_no_recovery_wait_turns_the_wait_off():
    assert RunConfig.from_options(no_recovery_wait=True).recovery_wait is False


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(EoschaosError, match="unknown option 'recrods'"):
        RunConfig.from_options(recrods=10)


def test_faults_and_a_schedule_together_are_refused():
    with pytest.raises(EoschaosError, match="either --faults"):
        RunConfig.from_options(faults="kill", schedule=[])


def test_the_copier_gets_one_instance_per_partition():
    assert RunConfig.from_options(workload="copier", partitions=4).pipeline.instances == 4


def test_run_json_keeps_its_flat_schema_1_shape():
    manifest = RunConfig.from_options(faults="kill", seed=3).to_manifest()
    assert set(manifest) == MANIFEST_KEYS_SCHEMA_1
    assert manifest["seed"] == 3 and manifest["duration"] == 30.0
    assert manifest["command"][:2] == ["eoschaos", "run"]


def test_run_json_names_a_byo_runs_own_input_only_where_it_has_one():
    config = RunConfig.from_options(
        workload="byo",
        command="./orders",
        input="eoschaos.workloads.byo_orders:order",
        id_from="json:order_id",
    )
    manifest = config.to_manifest()
    assert (manifest["input"], "input_id_from" in manifest) == (config.pipeline.input, False)
    line = config.command_line()
    assert line[line.index("--input") + 1] == "eoschaos.workloads.byo_orders:order"
    assert "--input-id-from" not in line


def test_run_json_names_the_streams_apps_kafka_client_the_clusters_by_default():
    default = RunConfig.from_options(workload="streams", kafka_version="4.3.1")
    assert default.to_manifest()["client_version"] == "4.3.1"
    older = RunConfig.from_options(
        workload="streams", kafka_version="4.3.1", client_version="3.9.2"
    )
    assert older.to_manifest()["client_version"] == "3.9.2"
    assert older.command_line()[-2:] == ["--client-version", "3.9.2"]


def test_a_bound_on_realtime_lag_is_kept_in_run_json_and_its_command():
    config = RunConfig.from_options(max_lag=2.5)
    assert config.to_manifest()["max_lag"] == 2.5
    assert config.command_line()[-2:] == ["--max-lag", "2.5"]
    assert RunConfig.from_options().to_manifest()["max_lag"] is None


def test_a_recording_child_reads_back_the_same_config():
    config = RunConfig.from_options(workload="byo", command="./my-app", faults="crash", seed=2)
    assert RunConfig.from_json(config.to_json()) == config
