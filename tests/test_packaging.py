"""eoschaos installs under one import name, so nothing in a user's project can shadow it.

The role folders at the top of the repository map into `eoschaos` by the build's package-dir;
these tests prove it from a built wheel, from the repository root, and from a user's project
that has packages of its own named like our roles. No cluster is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROLES = ("clusters", "chaos", "workloads", "checkers", "reports", "contract")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("eoschaos-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def _where(module: str, *, cwd: Path, pythonpath: Path | None = None) -> Path:
    """The file `module` is imported from by a fresh interpreter started in `cwd`."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    code = f"import {module} as m; print(m.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return Path(result.stdout.strip())


def test_a_wheel_installs_exactly_one_top_level_import_name(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = {name.split("/", 1)[0] for name in archive.namelist()}
    assert {name for name in names if not name.endswith(".dist-info")} == {"eoschaos"}


def test_a_wheel_carries_every_role_and_the_files_they_read(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {f"eoschaos/{role}/__init__.py" for role in ROLES} <= names
    assert "eoschaos/clusters/log_configs/log4j2.properties" in names
    assert "eoschaos/workloads/streams/app/pom.xml" in names
    assert "eoschaos/workloads/flink/job/pom.xml" in names
    assert "eoschaos/workloads/flink/job/src/main/java/eoschaos/flink/Job.java" in names


@pytest.mark.parametrize("role", ROLES)
def test_from_the_repository_root_a_wheel_install_is_not_shadowed_by_the_role_folders(
    installed, role
):
    assert _where(f"eoschaos.{role}", cwd=REPO, pythonpath=installed).is_relative_to(installed)


def test_a_user_project_with_its_own_reports_and_workloads_runs_the_eoschaos_plugin(tmp_path):
    """`python -m pytest` puts the project's root first on sys.path: its own `reports/` and
    `workloads/` packages must stay its own, and eoschaos's fixtures and checkers ours."""
    project = tmp_path / "user-project"
    for package in ("reports", "workloads"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text("")
    (project / "reports" / "html.py").write_text("OWNER = 'user'\n")
    (project / "conftest.py").write_text("")
    (project / "test_user.py").write_text(
        textwrap.dedent(
            """
            import reports.html

            import eoschaos.checkers.verdict
            import eoschaos.pytest_plugin
            from eoschaos.reports.html import write_report


            def test_each_package_is_its_owners(request):
                assert reports.html.OWNER == "user"
                assert request.config.pluginmanager.has_plugin("eoschaos")
                assert callable(write_report) and eoschaos.checkers.verdict.check_run
                assert "user-project" not in eoschaos.pytest_plugin.__file__
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
