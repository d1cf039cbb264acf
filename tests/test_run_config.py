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
    "command", "id_from", "expect", "start_timeout", "max_lag", "protocol_proxy",
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


def test_a_streams_runs_own_number_of_aggregate_keys_is_kept_only_where_it_was_asked():
    many = RunConfig.from_options(workload="streams", buckets=1000)
    assert many.to_manifest()["buckets"] == 1000
    assert many.command_line()[-2:] == ["--buckets", "1000"]
    default = RunConfig.from_options(workload="streams")
    assert "buckets" not in default.to_manifest()
    assert "--buckets" not in default.command_line()


def test_a_streams_runs_own_settings_for_its_app_are_kept_only_where_they_were_asked():
    tuned = RunConfig.from_options(workload="streams", streams_config="commit.interval.ms=1000")
    assert tuned.to_manifest()["streams_config"] == "commit.interval.ms=1000"
    assert tuned.command_line()[-2:] == ["--streams-config", "commit.interval.ms=1000"]
    assert "streams_config" not in RunConfig.from_options(workload="streams").to_manifest()


def test_a_bound_on_realtime_lag_is_kept_in_run_json_and_its_command():
    config = RunConfig.from_options(max_lag=2.5)
    assert config.to_manifest()["max_lag"] == 2.5
    assert config.command_line()[-2:] == ["--max-lag", "2.5"]
    assert RunConfig.from_options().to_manifest()["max_lag"] is None


def test_a_recording_child_reads_back_the_same_config():
    config = RunConfig.from_options(workload="byo", command="./my-app", faults="crash", seed=2)
    assert RunConfig.from_json(config.to_json()) == config


BYO_TOPICS = {
    "workload": "byo",
    "command": "true",
    "input_topics": "web-orders,shop-orders:3",
    "output_topics": "enriched",
    "dead_letter_topics": "rejected:1:1",
    "run_tag": "t1",
}


def test_topics_named_by_the_user_get_the_runs_tag():
    """A client of another run on the same cluster (the pytest plugin's session cluster, a
    matrix) never meets this run's topics, named by the user or not."""
    pipeline = RunConfig.from_options(**BYO_TOPICS).pipeline
    assert (pipeline.input_topic, pipeline.output_topic) == ("web-orders-t1", "enriched-t1")
    assert pipeline.topics.inputs == ("web-orders-t1", "shop-orders-t1")
    assert pipeline.topics.delivered_to == ("enriched-t1", "rejected-t1")
    assert pipeline.input_names == {"web-orders": "web-orders-t1", "shop-orders": "shop-orders-t1"}
    other = RunConfig.from_options(**{**BYO_TOPICS, "run_tag": ""}).pipeline
    assert other.topics.inputs == ("web-orders", "shop-orders")


def test_two_runs_naming_the_same_topics_share_none():
    options = {key: value for key, value in BYO_TOPICS.items() if key != "run_tag"}
    first, second = RunConfig.from_options(**options), RunConfig.from_options(**options)
    assert not set(first.pipeline.topics.all) & set(second.pipeline.topics.all)


def test_a_topic_keeps_the_partitions_and_replication_it_was_given():
    pipeline = RunConfig.from_options(**BYO_TOPICS, partitions=4).pipeline
    layout = [(s.name, s.partitions, s.replication) for s in pipeline.input_specs]
    assert layout == [("web-orders-t1", None, None), ("shop-orders-t1", 3, None)]
    assert [(s.partitions, s.replication) for s in pipeline.dead_letter_specs] == [(1, 1)]


def test_run_json_holds_topic_lists_as_created_only_where_a_role_has_more_than_one():
    plain = RunConfig.from_options().to_manifest()
    assert not {"input_topics", "output_topics", "dead_letter_topics", "run_tag"} & set(plain)
    listed = RunConfig.from_options(**BYO_TOPICS).to_manifest()
    assert listed["input_topics"] == ["web-orders-t1", "shop-orders-t1:3"]
    assert listed["dead_letter_topics"] == ["rejected-t1:1:1"]
    assert "output_topics" not in listed  # one output topic: output_topic says it all


def test_the_repeat_command_gives_the_topic_lists_as_the_user_did():
    line = RunConfig.from_options(**BYO_TOPICS).command_line()
    assert line[line.index("--input-topics") + 1] == "web-orders,shop-orders:3"
    assert line[line.index("--dead-letter-topics") + 1] == "rejected:1:1"


def test_topic_lists_survive_the_recording_childs_round_trip():
    config = RunConfig.from_options(**BYO_TOPICS)
    assert RunConfig.from_json(config.to_json()).pipeline.topics == config.pipeline.topics
