"""No process eoschaos starts outlives its run unnoticed: an instance dies with the harness that
started it (the kernel's parent-death signal), one that finds its named parent gone exits at
once, and `cleanup` finds by their environment the processes no PID file names (what an
instance started, even outside its process group). Pure process logic: no cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from eoschaos.clusters import processes
from eoschaos.clusters.registry import register_run_dir, registered_run_dirs, stop_run_dir
from eoschaos.contract.host import CACHE_ENV
from eoschaos.contract.instance_env import OWNER_DIR, PARENT_PID
from eoschaos.workloads.harness.orphan import EXIT_ORPHANED

# A harness in miniature: starts one bound instance (a long sleep), prints its pid, waits.
HARNESS = """
import sys, time
from pathlib import Path
from eoschaos.clusters import processes
work = Path(sys.argv[1])
popen, _ = processes.Spawner("spawner").spawn(
    "instance", ["sleep", "300"], work / "instance.log", work / "pids", None
)
print(popen.pid, flush=True)
time.sleep(300)
"""


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not processes.process_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_an_instance_dies_with_the_harness_that_started_it_when_that_is_killed(tmp_path):
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    instance = int(harness.stdout.readline())
    try:
        assert processes.process_alive(instance)
        harness.kill()  # SIGKILL: nothing of the harness runs to stop it
        harness.wait()
        assert _gone_within(instance, 5), "the instance outlived its harness"
    finally:
        if processes.process_alive(instance):
            os.kill(instance, signal.SIGKILL)


def test_a_bound_process_outlives_the_thread_that_asked_for_it_until_the_spawner_closes(
    tmp_path,
):
    """The supervisor's watcher starts replacements and ends at stop(), before it stops them
    gracefully: the kernel would kill them with that thread, were it the one that forked."""
    spawner = processes.Spawner("spawner")
    started = []
    asker = threading.Thread(
        target=lambda: started.append(
            spawner.spawn("s", ["sleep", "60"], tmp_path / "s.log", tmp_path / "pids", None)
        )
    )
    asker.start()
    asker.join()
    popen, proc = started[0]
    time.sleep(0.5)
    assert proc.alive(), "killed with the thread that asked for it"
    spawner.close()
    popen.wait(timeout=5)
    assert not proc.alive()


def test_a_process_started_by_eoschaos_names_its_owner_and_its_parent(tmp_path):
    popen, proc = processes.spawn(
        "sleeper", ["sleep", "60"], tmp_path / "sleeper.log", tmp_path / "pids"
    )
    try:
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert f"{OWNER_DIR}={tmp_path.resolve()}".encode() in environ
        assert f"{PARENT_PID}={os.getpid()}".encode() in environ
    finally:
        processes.kill(proc, popen)


def test_an_instance_whose_named_harness_is_already_gone_exits_at_once():
    """The harness is the one its starter named, not the parent found when the watch begins:
    one that died before then (the new parent is init) is never mistaken for alive."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    watcher = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from eoschaos.workloads.harness.orphan import exit_when_orphaned\n"
            "exit_when_orphaned()\n"
            "time.sleep(30)\n",
        ],
        env={**os.environ, PARENT_PID: str(gone.pid)},
        timeout=20,
        check=False,
    )
    assert watcher.returncode == EXIT_ORPHANED


def test_an_instance_whose_named_harness_lives_keeps_running_even_below_a_shell():
    """A BYO command's process is the shell's child, the harness's grandchild."""
    program = (
        "from eoschaos.workloads.harness.orphan import exit_when_orphaned\n"
        "exit_when_orphaned()\n"
        "print('running', flush=True)\n"
        "import time; time.sleep(30)\n"
    )
    watcher = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "$PROGRAM"; echo "exit $?"'],
        env={**os.environ, PARENT_PID: str(os.getpid()), "PROGRAM": program},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert watcher.stdout.readline().strip() == "running"
        time.sleep(1.5)  # past one check of the watch
        assert watcher.poll() is None
    finally:
        os.killpg(watcher.pid, signal.SIGKILL)
        watcher.wait()


def test_cleanup_stops_what_an_instance_started_even_outside_its_process_group(
    tmp_path, monkeypatch
):
    """A user's command may start children that leave its group (setsid, a daemon): no PID
    file names them and a group signal misses them, but their environment names the run."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # a registry of the test's own
    workload = tmp_path / "workload"
    escaped_pid_file = tmp_path / "escaped.pid"
    command = f"setsid sh -c 'echo $$ > {escaped_pid_file}; exec sleep 300' & exec sleep 300"
    popen, proc = processes.spawn(
        "instance", ["sh", "-c", command], workload / "instance.log", workload / "pids"
    )
    register_run_dir(workload)
    deadline = time.monotonic() + 10
    while not escaped_pid_file.exists() or not escaped_pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the escaping child never started"
        time.sleep(0.05)
    escaped = int(escaped_pid_file.read_text())
    try:
        assert os.getpgid(escaped) != os.getpgid(proc.pid)
        assert {s.pid for s in processes.strays(tmp_path)} == {proc.pid, escaped}
        stopped = stop_run_dir(workload)
        popen.wait(timeout=10)
        assert _gone_within(escaped, 10), "the child outside the group survived cleanup"
        assert any(str(escaped) in name for name in stopped)
        assert workload not in registered_run_dirs()
    finally:
        for pid in (escaped, proc.pid):
            if processes.process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_strays_of_a_directory_are_only_its_own(tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    started = [
        processes.spawn("s", ["sleep", "60"], d / "s.log", d / "pids") for d in (mine, other)
    ]
    try:
        assert [s.pid for s in processes.strays(mine)] == [started[0][1].pid]
        assert {s.pid for s in processes.strays(tmp_path)} == {p.pid for _, p in started}
    finally:
        for popen, proc in started:
            processes.kill(proc, popen)
