"""eoschaos' Kafka-protocol-aware proxy: built once from its Go sources (clusters/kafka_proxy/,
on franz-go's kmsg), one per cluster that asks for it, and its HTTP API.

Toxiproxy acts on a connection's bytes: it cannot tell an EndTxn from a Produce, keep one
request after its client gave up on the connection, or answer with a Kafka error. This proxy
stands behind each client link's Toxiproxy proxy, in front of the broker's real listener, so
every byte toxic still applies, and acts on the requests a rule matches (by API, client id,
transactional id, group): hold them (delivered late, on a connection of their own once the
client closed), drop them or their answers, send them twice, or answer them itself with an
error code. Each rule counts what it did and notes when its held requests landed and what
the broker answered: the fault's observed effect. With no rule it passes everything through.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root, require_tool

SOURCE_DIR = Path(__file__).parent / "kafka_proxy"
_SOURCES = ("go.mod", "go.sum", "answer.go", "frames.go", "main.go", "proxy.go", "rules.go")
_HTTP_TIMEOUT_S = 5.0

# The requests the rules name, by Kafka's API key.
API_KEYS = {
    "Produce": 0,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "SyncGroup": 14,
    "InitProducerId": 22,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
}
# The errors an `answer` rule gives, by Kafka's name.
ERROR_CODES = {
    "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "INVALID_PRODUCER_EPOCH": 47,
    "INVALID_TXN_STATE": 48,
    "CONCURRENT_TRANSACTIONS": 51,
    "UNSTABLE_OFFSET_COMMIT": 88,
    "PRODUCER_FENCED": 90,
}


def error_name(code: int) -> str:
    """Kafka's name of an error code the proxy reported (NONE for 0)."""
    if code == 0:
        return "NONE"
    names = {number: name for name, number in ERROR_CODES.items()}
    return names.get(code, str(code))


class KafkaProxyError(RuntimeError):
    """The proxy refused or failed a request."""


def proxy_binary() -> Path:
    """Path of the cached proxy built from this package's sources, building it on first use
    (the Go module proxy serves franz-go's kmsg)."""
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    target = cache_root() / "kafka-proxy" / digest.hexdigest()[:16] / "kafka-proxy"
    if target.exists():
        return target
    go = require_tool("go", "install Go 1.24+ (https://go.dev/doc/install) to build the proxy")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as build:
        for name in _SOURCES:  # the package's folder may be read-only (site-packages)
            shutil.copy(SOURCE_DIR / name, Path(build) / name)
        built = Path(build) / "kafka-proxy"
        proc = subprocess.run(
            [go, "build", "-trimpath", "-o", str(built), "."],
            cwd=build,
            capture_output=True,
            text=True,
            env=dict(os.environ, CGO_ENABLED="0"),
            check=False,
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise EoschaosError(
                f"building the Kafka protocol proxy with go build failed ({last}); "
                "check that the Go module proxy is reachable (GOPROXY)"
            )
        built.rename(target)
    return target


@dataclass(frozen=True)
class ProtocolRule:
    """Which requests to act on and how (clusters/kafka_proxy/rules.go says each action's
    meaning); empty match fields match anything."""

    id: str
    api: str  # a name of API_KEYS
    action: str  # hold, drop-request, drop-response, duplicate, answer
    lanes: list[str] = field(default_factory=list)  # proxy names; empty: every lane
    client_id: str = ""  # a prefix of the request header's client id
    transactional_id: str = ""
    group: str = ""
    hold_ms: int = 0
    release_after_close_ms: int | None = None
    error: str = ""  # a name of ERROR_CODES, for answer
    limit: int = 0

    def to_json(self) -> dict[str, Any]:
        """The rule as the proxy's API takes it: API and error by number."""
        body = {k: v for k, v in asdict(self).items() if k not in ("api", "error")}
        body["api_key"] = API_KEYS[self.api]
        if self.error:
            body["error_code"] = ERROR_CODES[self.error]
        if self.release_after_close_ms is None:
            del body["release_after_close_ms"]
        return body


class KafkaProxyAPI:
    """Client of one proxy's HTTP API."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = requests.request(method, self.url + path, json=body, timeout=_HTTP_TIMEOUT_S)
        except requests.RequestException as exc:
            raise KafkaProxyError(f"{method} {path}: the proxy at {self.url}: {exc}") from exc
        if response.status_code >= 300:
            raise KafkaProxyError(f"{method} {path}: HTTP {response.status_code} {response.text}")
        return response.json()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._call("GET", "/version")
                return
            except KafkaProxyError:
                if time.monotonic() > deadline:
                    raise KafkaProxyError(f"the proxy at {self.url} did not answer") from None
                time.sleep(0.05)

    def add_lane(self, name: str, listen: str, upstream: str) -> None:
        self._call("POST", "/lanes", {"name": name, "listen": listen, "upstream": upstream})

    def lanes(self) -> list[dict[str, str]]:
        return self._call("GET", "/lanes")

    def add_rule(self, rule: ProtocolRule) -> None:
        self._call("POST", "/rules", rule.to_json())

    def rules(self) -> list[dict[str, Any]]:
        """Every rule, each with its effects (counts) and events (its holds' moments)."""
        return self._call("GET", "/rules")

    def rule(self, rule_id: str) -> dict[str, Any]:
        """The rule with its effects (counts) and events (its holds' moments)."""
        for view in self.rules():
            if view["id"] == rule_id:
                return view
        raise KafkaProxyError(f"no rule {rule_id!r}")

    def release(self, rule_id: str) -> None:
        """Deliver every request the rule holds now."""
        self._call("POST", f"/rules/{rule_id}/release")

    def remove_rule(self, rule_id: str, *, release: bool) -> None:
        """Remove the rule; what it still holds is delivered with `release`, else lost."""
        self._call("DELETE", f"/rules/{rule_id}?release={'true' if release else 'false'}")

    def reset(self) -> None:
        """Remove every rule; what they hold is lost (the heal-all before final reads)."""
        self._call("DELETE", "/rules")
