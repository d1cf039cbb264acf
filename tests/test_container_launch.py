"""How an instance of a user's image is started (workloads.harness.containers): pure logic, no
runtime needed."""

from __future__ import annotations

import signal
from pathlib import Path

from eoschaos.clusters.container_runtime import Runtime
from eoschaos.clusters.containers_backend import RUN_LABEL
from eoschaos.contract import instance_env
from eoschaos.workloads.harness.containers import (
    ContainerSignaller,
    container_arguments,
    container_launch,
    container_name,
)

ENV = {
    instance_env.BOOTSTRAP_SERVERS: "127.0.0.1:20001",
    instance_env.INSTANCE: "2",
    instance_env.TRANSACTIONAL_ID: "eoschaos-byo-ab12-2",
    "HOME": "/root",
}
RUNTIME = Runtime("podman", "/usr/bin/podman", "unix:///x.sock", {"CONTAINERS_CONF": "/c.conf"})


def test_the_contracts_variables_are_put_into_the_arguments_without_a_shell():
    arguments = container_arguments(
        "run --bootstrap $EOSCHAOS_BOOTSTRAP_SERVERS --id ${EOSCHAOS_TRANSACTIONAL_ID}-x", ENV
    )
    assert arguments == ["run", "--bootstrap", "127.0.0.1:20001", "--id", "eoschaos-byo-ab12-2-x"]


def test_other_variables_and_quoted_words_are_left_as_a_shell_would_split_them():
    arguments = container_arguments("echo $HOME '$PRICE in $' \"a b\" /opt/libs/*", ENV)
    assert arguments == ["echo", "$HOME", "$PRICE in $", "a b", "/opt/libs/*"]


def test_an_instance_container_gets_the_variables_by_name_the_label_and_its_workload_dir(
    tmp_path: Path,
):
    extra = {"MY_SETTING": "1"}
    launch = container_launch(
        RUNTIME, "orders:1", "serve --port 1", "eoschaos-x-processor-2.0", tmp_path, ENV, extra
    )
    argv = launch.argv
    assert argv[:5] == ["/usr/bin/podman", "run", "--rm", "--name", "eoschaos-x-processor-2.0"]
    assert argv[-4:] == ["orders:1", "serve", "--port", "1"]
    passed = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--env"}
    assert passed == {
        *[n for n in ENV if n.startswith("EOSCHAOS_")],
        "MY_SETTING",
        instance_env.OWNER_DIR,
    }
    assert not any("127.0.0.1:20001" in arg for arg in argv[: argv.index("orders:1")])
    assert f"{RUN_LABEL}={tmp_path.resolve()}" in argv
    assert f"{tmp_path.resolve()}:{tmp_path.resolve()}" in argv
    assert launch.env["CONTAINERS_CONF"] == "/c.conf" and launch.env["HOME"] == "/root"


def test_each_signal_an_instance_gets_is_one_runtime_command():
    sent: list[tuple[str, ...]] = []

    class Recording(Runtime):
        def run(self, *args, timeout=120.0, check=True):
            sent.append(args)
            return type("Done", (), {"returncode": 0})()

    signaller = ContainerSignaller(Recording("podman", "podman", "unix:///x"), "c1")
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT, signal.SIGTERM):
        assert signaller.send(sig)
    assert sent == [
        ("kill", "--signal", "KILL", "c1"),
        ("pause", "c1"),
        ("unpause", "c1"),
        ("kill", "--signal", "TERM", "c1"),
    ]


def test_container_names_differ_between_runs_and_incarnations(tmp_path: Path):
    names = {
        container_name(tmp_path / "a", "processor-0.0"),
        container_name(tmp_path / "b", "processor-0.0"),
        container_name(tmp_path / "a", "processor-0.1"),
    }
    assert len(names) == 3
