"""A signal decides the CLI's outcome even when a library masks the KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import time

import pytest

from eoschaos import cli


@pytest.fixture
def fresh_signal_state(monkeypatch):
    monkeypatch.setattr(cli, "_received_signals", [])
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _fails_after(sig: signal.Signals | None):
    def command(_args):
        try:
            if sig is not None:
                os.kill(os.getpid(), sig)
                time.sleep(5)
        except KeyboardInterrupt:
            pass
        # what confluent-kafka raises when interrupted inside AdminClient's constructor
        raise TypeError("expected configuration property name as type unicode string")

    return command


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_error_raised_after_a_signal_exits_as_interrupted(
    fresh_signal_state, monkeypatch, capsys, sig, code
):
    monkeypatch.setattr(cli, "cmd_cleanup", _fails_after(sig))
    assert cli.main(["cleanup"]) == code
    assert capsys.readouterr().err.strip() == (
        "eoschaos: interrupted; everything started was stopped"
    )


def test_an_error_without_a_signal_is_not_taken_for_an_interrupt(fresh_signal_state, monkeypatch):
    monkeypatch.setattr(cli, "cmd_cleanup", _fails_after(None))
    with pytest.raises(TypeError):
        cli.main(["cleanup"])
