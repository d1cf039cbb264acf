"""Writer `observer`: a downstream reader of the output topics while the pipeline runs.

It sees the output as a consumer application would, as it is committed (read_committed) —
or, in mode read-uncommitted, as it is written, aborted transactions included: the known-bad
reader the isolation checks must catch. On stop it reads on to the end offsets it can reach
(the LSO for read_committed, the high watermark otherwise) before it exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from eoschaos.contract.history import OBSERVER, HistoryWriter
from eoschaos.workloads.harness.offsets import admin_for, end_offsets, partition_ids
from eoschaos.workloads.harness.reader import KEY_IDS, IdSet, IdSource, TopicReader


class Observer(threading.Thread):
    def __init__(
        self,
        bootstrap: str,
        run_dir: Path,
        topics: tuple[str, ...],
        isolation: str,
        progress: Callable[[str], None],
        *,
        track_ids: int = 0,
        id_source: IdSource = KEY_IDS,
        together: tuple[str, ...] = (),
    ) -> None:
        """`track_ids`: count the distinct ids below it that the output reflects (ids_seen)."""
        super().__init__(name=OBSERVER, daemon=True)
        self._topics = topics
        self._progress = progress
        self._bootstrap_servers = bootstrap
        self._history = HistoryWriter(run_dir, OBSERVER)
        self._seen = IdSet(track_ids)
        self._reader = TopicReader(
            bootstrap,
            self._history,
            {topic: partition_ids(admin_for(bootstrap), topic) for topic in topics},
            isolation,
            seen=self._seen,
            ids=dict.fromkeys(topics, id_source),
            together=together,
            repeats_below=track_ids,
        )
        self._drain_timeout = 0.0
        self._stop_requested = threading.Event()
        self.reached: dict[tuple[str, int], int] = {}
        self.targets: dict[tuple[str, int], int] = {}
        self.failure: Exception | None = None
        self._closed = False
        self._records_seen = 0

    @property
    def records_seen(self) -> int:
        """Output records read so far, whether or not they name a source id."""
        return self._records_seen

    @property
    def ids_seen(self) -> int:
        return self._seen.count

    def stop(self, drain_timeout: float) -> None:
        """Drain to the end offsets (up to `drain_timeout` s), then stop."""
        self._drain_timeout = drain_timeout
        self._stop_requested.set()
        if self.is_alive():
            self.join()
        else:
            self._close()

    def run(self) -> None:
        try:
            while not self._stop_requested.is_set():
                self._records_seen += self._reader.poll()
            committed = self._reader.isolation == "read_committed"
            # an admin handle only for this: one held for the run would outlive the cluster
            handle = admin_for(self._bootstrap_servers)
            self.targets = {
                (topic, p): end
                for topic in self._topics
                for p, end in end_offsets(handle, topic, committed=committed).items()
            }
            self.reached = self._reader.drain(self.targets, self._drain_timeout, self._progress)
            short = {pos: end for pos, end in self.targets.items() if self.reached[pos] < end}
            if short:
                self._progress(f"observer stopped short of the end on {sorted(short)}")
        except Exception as exc:  # kept for stop()'s caller: the observer's history is short
            self.failure = exc
        finally:
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._reader.close()
            self._history.close()
