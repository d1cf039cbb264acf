"""The kip447 processors' settings, as the harness saves them and each incarnation reads them
back (no cluster)."""

from __future__ import annotations

from pathlib import Path

from eoschaos.contract import instance_env
from eoschaos.workloads.harness.pipeline import PipelineConfig
from eoschaos.workloads.kip447.config import ProcessorConfig, ProcessorSettings


def test_the_clients_log_warnings_only_unless_debug_contexts_are_asked_for(monkeypatch):
    monkeypatch.delenv(instance_env.LIBRDKAFKA_DEBUG, raising=False)
    assert ProcessorSettings().client_logging() == {"log_level": 4}
    monkeypatch.setenv(instance_env.LIBRDKAFKA_DEBUG, "cgrp,fetch")
    assert ProcessorSettings().client_logging() == {"log_level": 7, "debug": "cgrp,fetch"}


def test_the_debug_contexts_asked_for_where_the_run_started_reach_every_incarnation(
    monkeypatch, tmp_path: Path
):
    monkeypatch.setenv(instance_env.LIBRDKAFKA_DEBUG, "cgrp")
    config = ProcessorConfig("127.0.0.1:9092", str(tmp_path), PipelineConfig(), ProcessorSettings())
    config.save(tmp_path / "processor.json")
    monkeypatch.delenv(instance_env.LIBRDKAFKA_DEBUG)
    loaded = ProcessorConfig.load(tmp_path / "processor.json")
    assert loaded.settings.client_logging()["debug"] == "cgrp"
