"""The real Toxiproxy server: built once with `go install`, one per cluster, and its HTTP API.

toxiproxy-python speaks the API but keeps one global host/port, sets no HTTP timeouts and lets
5xx answers pass as success. `ToxiproxyAPI` uses its request layer (and its 400/404/409
exceptions) under a lock, always with a timeout, and turns every other failure into an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import requests
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, require_tool

TOXIPROXY_VERSION = "v2.12.0"
_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
_HTTP_TIMEOUT_S = 5.0


class ToxiproxyError(RuntimeError):
    """The Toxiproxy server refused or failed a request."""


def server_binary() -> Path:
    """Path of the cached toxiproxy server, building it with `go install` on first use."""
    target = cache_root() / "toxiproxy" / TOXIPROXY_VERSION / "toxiproxy-server"
    if target.exists():
        return target
    go = require_tool("go", "install Go 1.22+ (https://go.dev/doc/install) to build Toxiproxy")
    gobin = target.parent / "gobin"
    shutil.rmtree(gobin, ignore_errors=True)
    gobin.mkdir(parents=True)
    env = dict(os.environ, GOBIN=str(gobin), CGO_ENABLED="0")
    proc = subprocess.run(
        [go, "install", f"{_MODULE}@{TOXIPROXY_VERSION}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise EoschaosError(
            f"building Toxiproxy {TOXIPROXY_VERSION} with go install failed ({last}); "
            "check that the Go module proxy is reachable (GOPROXY)"
        )
    (gobin / "server").rename(target)
    shutil.rmtree(gobin, ignore_errors=True)
    return target


class ToxiproxyAPI:
    """Client of one Toxiproxy server; safe to use from several threads."""

    _lock = threading.Lock()  # APIConsumer's host/port are process-global

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        with self._lock:
            APIConsumer.host, APIConsumer.port = self.host, self.port
            try:
                if method == "GET":
                    response = APIConsumer.get(path, timeout=_HTTP_TIMEOUT_S)
                elif method == "DELETE":
                    response = APIConsumer.delete(path, timeout=_HTTP_TIMEOUT_S)
                else:
                    response = APIConsumer.post(path, json=body, timeout=_HTTP_TIMEOUT_S)
            except (ProxyExists, NotFound, InvalidToxic) as exc:
                raise ToxiproxyError(f"{method} {path}: {exc}") from exc
            except requests.RequestException as exc:
                raise ToxiproxyError(f"{method} {path}: Toxiproxy at {self.url}: {exc}") from exc
        if response.status_code >= 300:
            raise ToxiproxyError(f"{method} {path}: HTTP {response.status_code} {response.text}")
        return response.json() if response.content else None

    def version(self) -> str:
        with self._lock:
            APIConsumer.host, APIConsumer.port = self.host, self.port
            return APIConsumer.get("/version", timeout=_HTTP_TIMEOUT_S).text.strip()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.version()
                return
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise ToxiproxyError(f"Toxiproxy at {self.url} did not answer") from None
                time.sleep(0.05)

    def create_proxy(self, name: str, listen: str, upstream: str) -> None:
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream})

    def proxies(self) -> dict[str, Any]:
        return self._call("GET", "/proxies")

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(
        self,
        proxy: str,
        toxic_type: str,
        *,
        stream: str = "downstream",
        attributes: dict[str, Any] | None = None,
        toxicity: float = 1.0,
        name: str | None = None,
    ) -> str:
        """Add a toxic and return its name (needed to remove it again)."""
        toxic_name = name or f"{toxic_type}_{stream}"
        self._call(
            "POST",
            f"/proxies/{proxy}/toxics",
            {
                "name": toxic_name,
                "type": toxic_type,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": attributes or {},
            },
        )
        return toxic_name

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/proxies/{proxy}/toxics")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic: the heal-all used before final reads."""
        self._call("POST", "/reset")
