"""Bad input and missing prerequisites: one line naming problem and fix, exit 2, nothing left."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eoschaos.clusters import processes
from eoschaos.clusters.ports import layout
from eoschaos.clusters.registry import register_run_dir, registered_run_dirs

BYO = ["--workload", "byo", "--command", "true"]
ORDERS = "eoschaos.workloads.byo_orders:order"
INPUT_FUNCTIONS = Path(__file__).parent / "input_functions.py"


def assert_clear_error(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("eoschaos: error: ")
    for phrase in phrases:
        assert phrase in lines[0]


def without_tools(env: dict[str, str]) -> dict[str, str]:
    """PATH with only this Python's bin dir: no java, mvn or go."""
    reduced = dict(env, PATH=str(Path(sys.executable).parent))
    reduced.pop("JAVA_HOME", None)
    return reduced


@pytest.mark.parametrize(
    ("version", "phrase"),
    [("2.8.0", "not supported"), ("3.8.1", "not supported"), ("four", "not a Kafka version")],
)
def test_unsupported_or_malformed_kafka_version_is_refused(version, phrase, eoschaos):
    assert_clear_error(
        eoschaos("cluster", "up", "--kafka-version", version), phrase, "--kafka-version"
    )


def test_kafka_version_missing_from_maven_central_is_named(eoschaos, private_cache):
    result = eoschaos("install", "--kafka-version", "4.9.9", env=private_cache())
    assert_clear_error(result, "Kafka 4.9.9 is not on Maven Central")


def test_unreachable_maven_registry_is_named(tmp_path, eoschaos, private_cache):
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>down</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/</url></mirror></mirrors></settings>"
    )
    env = dict(private_cache(), MAVEN_OPTS=f"-Duser.home={home}")
    assert_clear_error(eoschaos("install", env=env), "Maven Central is unreachable")


def test_missing_maven_is_named_with_the_fix(eoschaos, private_cache):
    env = without_tools(private_cache("toxiproxy", "kafka-proxy"))
    assert_clear_error(eoschaos("install", env=env), "'mvn' was not found", "apt-get install")


def test_missing_go_is_named_with_the_fix(eoschaos, private_cache):
    env = without_tools(private_cache("kafka"))
    assert_clear_error(eoschaos("install", env=env), "'go' was not found")


def test_missing_java_is_named_and_nothing_starts(tmp_path, eoschaos, private_cache):
    run_dir = tmp_path / "run"
    env = without_tools(private_cache("kafka", "toxiproxy"))
    result = eoschaos("cluster", "up", "--run-dir", str(run_dir), env=env)
    assert_clear_error(result, "'java' was not found")
    assert processes.read_history(run_dir / "pids") == []


def test_kafka_home_that_is_not_a_distribution_is_refused(tmp_path, eoschaos):
    env = dict(os.environ, KAFKA_HOME=str(tmp_path))
    assert_clear_error(eoschaos("cluster", "up", env=env), "is not a Kafka distribution")


def test_port_in_use_is_named_and_nothing_starts(tmp_path, eoschaos):
    base = 31600  # below the ephemeral port range, so only our holder owns it
    busy_port = layout(base, [1, 2, 3]).nodes[2].real["client"]
    run_dir = tmp_path / "run"
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", busy_port))
        holder.listen()
        result = eoschaos("cluster", "up", "--base-port", str(base), "--run-dir", str(run_dir))
    assert_clear_error(result, f"port {busy_port}", "--base-port")
    assert processes.read_history(run_dir / "pids") == []


def test_non_empty_run_dir_is_refused_and_left_untouched(tmp_path, eoschaos):
    (tmp_path / "history.jsonl").write_text("precious\n")
    assert_clear_error(eoschaos("cluster", "up", "--run-dir", str(tmp_path)), "not empty")
    assert (tmp_path / "history.jsonl").read_text() == "precious\n"


@pytest.mark.parametrize("command", [["cluster", "down"], ["cleanup"]])
def test_a_directory_that_is_not_a_run_dir_is_refused(tmp_path, command, eoschaos):
    assert_clear_error(eoschaos(*command, str(tmp_path)), "not an eoschaos run directory")


def test_cleanup_of_a_directory_holding_a_cluster_is_not_refused(
    tmp_path, private_cache, monkeypatch, eoschaos
):
    """A matrix killed before its first verdict has no results.jsonl yet, only its shared
    cluster registered inside its output: `eoschaos cleanup OUT` must stop it, not refuse."""
    env = private_cache()  # a private run registry
    monkeypatch.setenv("EOSCHAOS_CACHE", env["EOSCHAOS_CACHE"])
    register_run_dir(tmp_path / "night" / "cluster-4.3.1")
    cleanup = eoschaos("cleanup", str(tmp_path / "night"), env=env)
    assert cleanup.returncode == 0, cleanup.stderr
    assert "in 1 run dirs" in cleanup.stdout
    assert registered_run_dirs() == []


def test_zero_brokers_is_a_usage_error(eoschaos):
    assert_clear_error(eoschaos("cluster", "up", "--brokers", "0"), "--brokers")


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["--workload", "kafka-connect"], "unknown workload 'kafka-connect'; choose from kip447"),
        (["--mode", "yolo"], "unknown mode 'yolo' for kip447; choose from eos"),
        (["--faults", "kill,meteor"], "unknown fault 'meteor'; choose from kill"),
        (["--duration", "-5"], "--duration must be > 0 seconds"),
        (["--duration", "8", "--faults", "zombie"], "leaves no room for the faults"),
        (["--workload", "byo"], "--workload byo needs --command"),
        (["--command", "true"], "--command is for --workload byo, not kip447"),
        (["--workload", "copier", "--instances", "2"], "copier runs 6 instances for 6 partitions"),
        (["--id-from", "body"], "--id-from 'body' is not key, header:NAME or json:PATH"),
        (["--workload", "streams", "--mode", "x"], "unknown mode 'x' for streams"),
        (["--workload", "flink", "--instances", "1"], "--instances 1 leaves no TaskManager"),
        (
            ["--workload", "flink", "--faults", "crash,isolate-instance"],
            "isolate-instance work on an instance's own client lane",
        ),
        (["--client-version", "3.9.2"], "--client-version is for --workload streams"),
        (["--buckets", "1000"], "--buckets is for --workload streams"),
        (["--streams-config", "a=1"], "--streams-config is for --workload streams"),
        (
            ["--workload", "streams", "--streams-config", "commit.interval.ms"],
            "'commit.interval.ms' is not KEY=VALUE",
        ),
        (["--workload", "streams", "--client-version", "3.9"], "'3.9' is not a Kafka version"),
        (["--start-timeout", "0"], "--start-timeout must be > 0 seconds"),
        (["--max-lag", "0"], "--max-lag must be > 0 seconds"),
        (
            ["--expect", "eoschaos.workloads.byo_examples:kip447_output"],
            "--expect is for --workload byo",
        ),
        (
            ["--workload", "byo", "--command", "true", "--expect", "nowhere.py:f"],
            "--expect 'nowhere.py:f': cannot load nowhere.py",
        ),
        (["--input", ORDERS], "--input is for --workload byo, not kip447"),
        ([*BYO, "--input-id-from", "json:order_id"], "give --input too"),
        ([*BYO, "--input", ORDERS, "--input-id-from", "body"], "--input-id-from 'body' is not"),
        ([*BYO, "--input", "nowhere.py:f"], "--input 'nowhere.py:f': cannot load nowhere.py"),
        ([*BYO, "--input", f"{INPUT_FUNCTIONS}:raises"], "raised ValueError: no orders today"),
        ([*BYO, "--input", ORDERS], "--input-id-from key finds no id in the record of id 0"),
        (["--pipeline-image", "eoschaos/kafka:x"], "--pipeline-image is for --workload byo"),
        (["--output-topics", "a,b"], "--output-topics is for --workload byo, not kip447"),
        ([*BYO, "--input-topics", "orders,bad/name"], "--input-topics: 'bad/name' is not a topic"),
        ([*BYO, "--input-topics", "orders:0"], "'orders:0' has '0' where a count of at least 1"),
        ([*BYO, "--output-topics", "out,out"], "topic 'out' is named twice (as output and"),
        ([*BYO, "--input-topics", "a", "--dead-letter-topics", "a"], "as input and as dead-letter"),
        ([*BYO, "--output-topics", "out:6:4"], "replication 4 on 3 brokers; give at most 3"),
        (
            [*BYO, "--output-topics", "a,b", "--expect", f"{INPUT_FUNCTIONS}:raises"],
            "--expect compares the last values of one output topic",
        ),
        (
            [*BYO, "--input-topics", "orders", "--input", f"{INPUT_FUNCTIONS}:to_another_topic"],
            "sends id 0 to topic 'payments', which is not an input topic",
        ),
        ([*BYO, "--pipeline-image", "localhost/eoschaos/none:0"], "has no such image"),
    ],
)
def test_bad_run_arguments_are_refused_before_anything_starts(tmp_path, eoschaos, args, phrase):
    out = tmp_path / "run"
    assert_clear_error(eoschaos("run", "--out", str(out), *args), phrase)
    assert not out.exists()


def test_a_pipeline_image_without_a_container_runtime_is_refused(tmp_path, eoschaos):
    out = tmp_path / "run"
    env = dict(without_tools(dict(os.environ)), DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    result = eoschaos("run", "--out", str(out), *BYO, "--pipeline-image", "any:1", env=env)
    assert_clear_error(result, "no container runtime answers", "install podman")
    assert not out.exists()


@pytest.mark.parametrize(
    ("entries", "phrase"),
    [
        (
            '[{"at": 3, "fault": "kill", "target": "broker:7"}]',
            "entry 1 (kill broker:7 at 3s): there is no broker 7",
        ),
        ('[{"at": 3, "fault": "meteor"}]', "entry 1"),
        ('[{"at": 3, "fault": "zombie", "target": "controller"}]', "cannot target"),
        (
            '[{"at": 3, "fault": "kill", "target": "broker:1"},'
            ' {"at": 5, "fault": "pause", "target": "broker:2"}]',
            "entry 2",
        ),
        ('[{"at": 3, "fault": "kill",}]', "line 1"),
        (
            '[{"at": 3, "fault": "pause", "target": "leader:input/6"}]',
            "the input topic has partitions 0 to 5",
        ),
    ],
    ids=["missing-broker", "unknown-fault", "wrong-target", "overlap", "not-json", "partition"],
)
def test_a_bad_schedule_file_is_refused_naming_the_entry(tmp_path, eoschaos, entries, phrase):
    schedule = tmp_path / "schedule.json"
    schedule.write_text(entries)
    out = tmp_path / "run"
    result = eoschaos("run", "--out", str(out), "--schedule", str(schedule), "--duration", "30")
    assert_clear_error(result, phrase)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["--faults", "kill", "--schedule", "x.json"], "either --faults"),
        (["--faults", "kill", "--intensity", "extreme"], "unknown --intensity 'extreme'"),
    ],
)
def test_conflicting_or_unknown_schedule_options_are_refused(tmp_path, eoschaos, args, phrase):
    out = tmp_path / "run"
    assert_clear_error(eoschaos("run", "--out", str(out), *args), phrase)
    assert not out.exists()


def test_run_refuses_a_non_empty_run_dir_and_leaves_it_alone(tmp_path, eoschaos):
    out = tmp_path / "old-run"
    out.mkdir()
    (out / "verdict.json").write_text("{}")
    assert_clear_error(eoschaos("run", "--out", str(out)), "exists and is not empty")
    assert (out / "verdict.json").read_text() == "{}"


def test_check_refuses_a_directory_that_is_not_a_run(tmp_path, eoschaos):
    assert_clear_error(eoschaos("check", str(tmp_path)), "is not an eoschaos run directory")


@pytest.mark.parametrize(
    ("content", "phrase"),
    [(b"[" * 100_000, "nested too deeply"), (b"\xff\xfe{", "unreadable"), (b"{}", "version")],
    ids=["nested", "not-utf8", "unversioned"],
)
def test_check_refuses_a_damaged_run_json_before_spark_starts(tmp_path, eoschaos, content, phrase):
    (tmp_path / "run.json").write_bytes(content)
    assert_clear_error(eoschaos("check", str(tmp_path)), "run.json", phrase)  # one line: no Spark


def assert_run_stopped(result: subprocess.CompletedProcess[str], run_dir: Path, *phrases: str):
    """A run that started and then stopped on bad input: exit 2, the last line names the
    problem, the cluster is torn down and the history so far is kept. No Kafka client
    outlives the cluster to log its refused connections around that line."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "rdkafka" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("eoschaos: error: "), last
    for phrase in phrases:
        assert phrase in last, last
    assert processes.still_alive(run_dir / "cluster" / "pids") == []
    assert processes.still_alive(run_dir / "workload" / "pids") == []
    assert (run_dir / "history" / "seeder.jsonl").exists()


@pytest.mark.cluster
def test_a_byo_command_that_exits_at_once_stops_the_run_naming_its_log(tmp_path, eoschaos):
    out = tmp_path / "run"
    result = eoschaos(
        "run", "--out", str(out), "--workload", "byo", "--command", "echo no such jar; exit 3"
    )
    log = out / "workload" / "processor-0.0.log"
    assert_run_stopped(result, out, "workload byo: instance", "status 3", f"read {out}/workload/")
    assert "no such jar" in log.read_text()


@pytest.mark.cluster
def test_a_byo_command_that_never_reads_its_input_stops_the_run(tmp_path, eoschaos):
    out = tmp_path / "run"
    args = ["--workload", "byo", "--command", "sleep 600", "--start-timeout", "10"]
    result = eoschaos("run", "--out", str(out), *args)
    assert_run_stopped(result, out, "workload byo wrote no output", "read", "processor-0.0.log")


def test_isolate_instance_beyond_the_clusters_lanes_is_refused_before_the_run(tmp_path):
    from eoschaos.chaos.schedule import FaultEvent
    from eoschaos.clusters import kafka_dist
    from eoschaos.clusters.broker_config import ClusterSpec
    from eoschaos.clusters.process_backend import ProcessCluster
    from eoschaos.contract.errors import EoschaosError
    from eoschaos.run import check_lanes

    dist = kafka_dist.resolve(None)
    cluster = ProcessCluster(tmp_path, ClusterSpec(instance_lanes=2), dist, Path())
    check_lanes([FaultEvent(3, "isolate-instance", "instance:1", 8.5, {})], cluster)
    with pytest.raises(EoschaosError, match="--eoschaos-instance-lanes 3"):
        check_lanes([FaultEvent(3, "isolate-instance", "instance:2", 8.5, {})], cluster)


MATRIX_CELL = '[[cell]]\nname = "eos"\nexpect = "PASS"\n'


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("", ["no [[cell]] entries"]),
        (MATRIX_CELL + "recrods = 100\n", ["cell 1 ('eos')", "unknown option 'recrods'"]),
        (MATRIX_CELL + 'workload = "kafkastreams"\n', ["cell 1 ('eos')", "unknown workload"]),
        (
            MATRIX_CELL.replace('"PASS"', '"FAIL:delivery.dupes"'),
            ["cell 1 ('eos')", "no check 'delivery.dupes'"],
        ),
        (MATRIX_CELL.replace('"PASS"', '"GREEN"'), ["cell 1 ('eos')", "PASS"]),
        (MATRIX_CELL + 'schedule = "gone.json"\n', ["cell 1 ('eos')", "no such schedule file"]),
        (MATRIX_CELL + "seed = 3\n", ["cell 1 ('eos')", "use seeds = [...]"]),
        (MATRIX_CELL + MATRIX_CELL, ["cell 2 ('eos')", "used twice"]),
        ("[[cell]\n", ["not a readable TOML matrix file"]),
    ],
    ids=[
        "empty",
        "unknown-option",
        "unknown-workload",
        "unknown-check",
        "bad-expectation",
        "missing-schedule",
        "seed-set-by-matrix",
        "duplicate-name",
        "not-toml",
    ],
)
def test_a_bad_matrix_file_is_refused_naming_the_entry(text, phrases, tmp_path, eoschaos):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text)
    out = tmp_path / "out"
    assert_clear_error(eoschaos("matrix", str(matrix), "--out", str(out)), *phrases)
    assert not out.exists()  # refused before anything started


def test_a_missing_previous_night_is_refused(tmp_path, eoschaos):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX_CELL)
    result = eoschaos(
        "matrix", str(matrix), "--out", str(tmp_path / "out"), "--previous", str(tmp_path / "x")
    )
    assert_clear_error(result, "--previous", "no results.jsonl")


def _client_port_of(properties: Path, seconds: float = 10.0) -> int:
    """The real client port a node will bind, read from its server.properties once written."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = properties.read_text() if properties.exists() else ""
        found = re.search(r"^listeners=.*?CLIENT://127\.0\.0\.1:(\d+)", text, re.M)
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"{properties} was not written within {seconds}s")


@pytest.mark.cluster
def test_a_port_taken_after_it_was_found_free_stops_the_run_naming_the_port(tmp_path):
    """Between eoschaos finding a block of ports free and a broker binding one of them,
    another process takes it: one line naming the port, exit 2, nothing left running."""
    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--duration", "5", "--records", "100"]
    child = subprocess.Popen(
        [sys.executable, "-m", "eoschaos.cli", *args], stderr=subprocess.PIPE, text=True
    )
    with socket.socket() as intruder:
        lines = []
        for line in child.stderr:
            lines.append(line)
            if "formatting" in line:
                port = _client_port_of(out / "cluster" / "nodes" / "3" / "server.properties")
                intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                intruder.bind(("127.0.0.1", port))
                intruder.listen()
                break
        stderr = "".join(lines) + child.stderr.read()
        child.wait(timeout=300)
    last = stderr.strip().splitlines()[-1]
    assert child.returncode == 2, stderr[-3000:]
    assert last.startswith(f"eoschaos: error: node-3 could not listen on 127.0.0.1:{port}"), last
    assert "another process took that port" in last and "history so far" not in last
    assert processes.still_alive(out / "cluster" / "pids") == []


def test_a_hunt_with_a_bad_triage_file_is_refused_before_anything_starts(tmp_path, eoschaos):
    rules = tmp_path / "triage.toml"
    rules.write_text('[[rule]]\ntriage = "flaky"\nwhy = "w"\ndraws = ["d"]\n')
    out = tmp_path / "night"
    result = eoschaos("hunt", "--out", str(out), "--triage", str(rules))
    assert_clear_error(result, f"--triage {rules}: rule 1", "write one of")
    assert not out.exists()
