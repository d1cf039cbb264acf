"""Open a page in real headless Chromium (Debian's, installed by scripts/setup_chromium.sh)
and return the DOM it rendered: what a reviewer's browser shows, not what we wrote."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=3000",
)


def rendered_dom(page: Path) -> str:
    return _chromium(page, "--dump-dom").stdout


def screenshot(page: Path, png: Path, width: int = 1250, height: int = 2400) -> Path:
    """What a reviewer sees of `page`, as a PNG kept next to the test's other files."""
    _chromium(page, f"--screenshot={png}", f"--window-size={width},{height}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    return png


def _chromium(page: Path, *action: str) -> subprocess.CompletedProcess[str]:
    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    assert binary, "chromium is not installed; run scripts/install.sh (scripts/setup_chromium.sh)"
    with tempfile.TemporaryDirectory(prefix="eoschaos-chromium-") as profile:
        result = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *action, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def in_page(page: Path, *steps: str, typed: dict[int, str] | None = None) -> list[Any]:
    """Open `page` in real headless Chromium, let its own scripts run, then evaluate each
    JavaScript step in it, in order, and return their values (JSON). `typed` maps a step's
    index to text typed before that step runs, as keystrokes into the focused element.

    Driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`, no port opened):
    clicks and typing reach the page's own event handlers the way a reviewer's would."""
    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    assert binary, "chromium is not installed; run scripts/install.sh (scripts/setup_chromium.sh)"
    flags = [flag for flag in FLAGS if not flag.startswith("--virtual-time-budget")]
    commands_read, commands = os.pipe()
    answers, answers_write = os.pipe()

    def as_fds_3_and_4() -> None:  # where Chromium's --remote-debugging-pipe expects them
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_read, answers_write)]
        os.dup2(high[0], 3)  # by way of fds >= 10: either end may itself be fd 3 or 4
        os.dup2(high[1], 4)

    with tempfile.TemporaryDirectory(prefix="eoschaos-chromium-") as profile:
        browser = subprocess.Popen(
            [binary, *flags, "--remote-debugging-pipe", f"--user-data-dir={profile}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=as_fds_3_and_4,
            close_fds=False,
        )
        os.close(commands_read)
        os.close(answers_write)
        devtools = _DevTools(commands, answers)
        try:
            uri = page.resolve().as_uri()
            target = devtools.call("Target.createTarget", url=uri)
            session = devtools.call(
                "Target.attachToTarget", targetId=target["targetId"], flatten=True
            )
            devtools.session = session["sessionId"]
            # A new tab starts at about:blank, which is "complete" at once: wait for the page
            # itself (a question asked mid-navigation may find no document to ask, so ask again).
            loaded = f"location.href === {json.dumps(uri)} && document.readyState === 'complete'"
            devtools.until(lambda: devtools.answer("Runtime.evaluate", expression=loaded) is True)
            values = []
            for index, step in enumerate(steps):
                if typed and index in typed:
                    devtools.call("Input.insertText", text=typed[index])
                values.append(devtools.evaluate(step))
            return values
        finally:
            devtools.call_quietly("Browser.close")
            os.close(commands)
            os.close(answers)
            try:
                browser.wait(timeout=30)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait()


class _DevTools:
    """The DevTools protocol over Chromium's pipe: JSON messages ended by a NUL byte."""

    TIMEOUT_S = 60.0

    def __init__(self, commands: int, answers: int) -> None:
        self._commands, self._answers = commands, answers
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        answer = self._exchange(method, params)
        assert "error" not in answer, f"{method}: {answer['error']}"
        return answer.get("result", {})

    def answer(self, method: str, **params: Any) -> Any:
        """The value a call returned, or None if it failed or threw: for questions asked
        again until they get the answer wanted."""
        result = self._exchange(method, {**params, "returnByValue": True}).get("result", {})
        return None if "exceptionDetails" in result else result.get("result", {}).get("value")

    def _exchange(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._send(method, params)
        deadline = time.monotonic() + self.TIMEOUT_S
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                return answer

    def _send(self, method: str, params: dict[str, Any]) -> None:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")

    def call_quietly(self, method: str) -> None:
        with contextlib.suppress(OSError):  # the browser is gone already
            self._send(method, {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def until(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.TIMEOUT_S
        while not condition():
            assert time.monotonic() < deadline, "the page did not finish loading"
            time.sleep(0.05)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "Chromium did not answer over the DevTools pipe"
            ready, _, _ = select.select([self._answers], [], [], left)
            if ready:
                chunk = os.read(self._answers, 1 << 16)
                assert chunk, "Chromium closed the DevTools pipe"
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)
