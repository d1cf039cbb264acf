"""Every check a verdict can hold, one spec each: the vocabulary the checkers judge in, the
report shows, the synthetic planter plants and docs/checkers.md lists (its table is generated
from here, and a test holds the two equal).

It sits in the contract, below the roles, because checkers and reports are siblings that must
not import each other, and both need it; it is data only (no Spark). Adding a check is one
spec here, its finding in the pass named by `found_by` (eoschaos.checkers), and its tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Evidence(Enum):
    """What a check needs the history to hold beyond the reads every history has. In this
    order a check's first missing evidence is the reason it is not applicable."""

    TRANSACTIONS = "transactions"  # the pipeline's mode uses them
    TRANSACTION_HISTORY = "transaction history"  # the client's own `txn` events (kip447)
    # output records name their place among their transaction's sends (eoschaos.txn.index)
    SEND_INDEX = "send index"
    COORDINATOR_STATES = "coordinator states"  # the coordinators' log (`log-batches` rows)
    BATCH_HEADERS = "batch headers"  # the run's partitions' batches and markers (`log-batches`)
    OFFSET_COMMITS = "offset commits"  # the group coordinators' log (`log-batches` rows)
    AGGREGATE_ROWS = "aggregate rows"  # the pipeline keeps aggregates (Streams)
    EXPECTED_OUTPUT = "an --expect function"
    FINAL_SCAN = "final scans"  # the final committed scan of both topics
    OUTPUT_COPIES = "output as copies"  # each output record is a copy of one input record
    END_STATE = "end state"  # log-end rows
    GROUP_OFFSETS = "group offsets"  # the end state's committed offsets of the group
    LAG_BOUND = "a bound on realtime lag"  # the user's --max-lag (run.json's max_lag)
    # the exit statuses with which the workload's instances say they failed (its capabilities)
    FAILURE_EXITS = "declared failure exits"


class Pass(Enum):
    """The Spark plans that find anomalies; one pass serves every check that names it."""

    DELIVERY = "delivery"  # per input id
    OFFSETS = "offsets"  # per topic-partition-offset
    SEND_ORDER = "send order"  # each producer's acknowledged sends per partition, as sent
    TRANSACTION_ORDER = "transaction order"  # each committed transaction's records, as sent
    TRANSACTION_READS = "transaction reads"  # reads joined to the client's transactions
    ZOMBIES = "zombies"  # the client's transactions per input partition and owner
    STALE_COMMITS = "stale commits"  # coordinator states against the clients' commit calls
    OFFSET_COMMITS = "offset commits"  # each group's committed offsets in log order
    LOG_TRANSACTIONS = "log transactions"  # the transactions the brokers' logs show
    END_STATE = "end state"  # the end rows, on the driver
    INSTANCES = "instances"  # the supervisor's instance exits, on the driver
    AGGREGATES = "aggregates"  # the pipeline's aggregates against the input
    EXPECTED_OUTPUT = "expected output"  # --expect's results against the output


# Where a check's evidence comes from beyond what readers read (verdict.json's `evidence`).
FROM_SOURCE: dict[Evidence, str] = {
    Evidence.TRANSACTION_HISTORY: "client history",
    Evidence.SEND_INDEX: "client history",
    Evidence.COORDINATOR_STATES: "broker logs",
    Evidence.BATCH_HEADERS: "broker logs",
    Evidence.OFFSET_COMMITS: "broker logs",
    Evidence.FAILURE_EXITS: "instance exits",
}
READS = "reads"  # scans, downstream reads and the end state, which every history has


@dataclass(frozen=True)
class JepsenName:
    """An anomaly of Jepsen's Kafka checker (jepsen.tests.kafka) that a check finds: the
    whole check, or, with `kinds`, the sum of those of its sub-kinds (its `counts`)."""

    name: str
    kinds: tuple[str, ...] = ()

    def count(self, total: int, counts: dict[str, Any]) -> int:
        if not self.kinds:
            return total
        return sum(n for kind, n in counts.items() if kind in self.kinds and isinstance(n, int))


@dataclass(frozen=True)
class CheckSpec:
    name: str  # family.anomaly, as verdict.json and the report spell it
    meaning: str  # when it FAILs, in one sentence (verdict.json's description)
    found_by: Pass
    needs: tuple[Evidence, ...] = ()
    implies: tuple[str, ...] = ()  # checks that FAIL too wherever this one does and they apply
    look: str = ""  # where a reviewer looks first when it fails: a pointer into the report
    plants: tuple[str, ...] = ()  # the synthetic planter's anomalies that it must catch
    examples_on_input: bool = False  # its examples' places are offsets of the input topic
    jepsen: tuple[JepsenName, ...] = ()  # Jepsen's names for what it finds

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def sources(self) -> tuple[str, ...]:
        """Where its evidence comes from: the client's own history and/or the brokers' logs,
        or only what readers read."""
        found = dict.fromkeys(FROM_SOURCE[e] for e in self.needs if e in FROM_SOURCE)
        return tuple(found) or (READS,)


LOST = CheckSpec(
    "delivery.lost",
    "An acknowledged input record (or one in the final input scan) has no record in the "
    "final committed output, and the pipeline moved past it: its input offset is below the "
    "group's final committed offset of its partition (every such record, where the end "
    "state holds no group offsets).",
    Pass.DELIVERY,
    (Evidence.FINAL_SCAN, Evidence.OUTPUT_COPIES),
    look="follow an example id's lineage: which transaction consumed it, whether its commit "
    "returned, and which fault was active then",
    plants=("lost",),
    examples_on_input=True,
    jepsen=(JepsenName("lost-write"),),
)
DUPLICATE = CheckSpec(
    "delivery.duplicate",
    "One input id has more records in the final committed output than in the input (an "
    "id the input holds twice is reflected twice by a correct pipeline: that is "
    "delivery.duplicate-input, the producer's anomaly).",
    Pass.DELIVERY,
    (Evidence.FINAL_SCAN, Evidence.OUTPUT_COPIES),
    look="compare the example's two outputs in its lineage drawing: two transactions (a "
    "zombie or a retry after a rebalance) or one batch appended twice",
    plants=("duplicate",),
    jepsen=(JepsenName("duplicate"),),
)
PHANTOM = CheckSpec(
    "delivery.phantom",
    "A committed output record names a source id that was never sent and is not in the input.",
    Pass.DELIVERY,
    (Evidence.FINAL_SCAN, Evidence.OUTPUT_COPIES),
    look="the output record's headers name a source that never existed: look for a writer "
    "other than the pipeline, or corrupted lineage headers",
    plants=("phantom",),
)
DUPLICATE_INPUT = CheckSpec(
    "delivery.duplicate-input",
    "The input topic holds one id at more than one offset (a producer without idempotence "
    "retried).",
    Pass.DELIVERY,
    (Evidence.FINAL_SCAN,),
    look="the seeder's producer retried a send across a leader change (docs/findings.md): "
    "the input itself holds the record twice",
    plants=("duplicate_input",),
    examples_on_input=True,
)
INPUT_COMMITTED_TWICE = CheckSpec(
    "delivery.input-committed-twice",
    "A group's committed offset of an input partition moved backwards: a commit that took "
    "effect (a plain one, or a transactional one its COMMIT marker resolved) named a lower "
    "offset than one committed before it, so the input in between was consumed and committed "
    "by two transactions. Read from the group coordinators' log, for any pipeline.",
    Pass.OFFSET_COMMITS,
    (Evidence.OFFSET_COMMITS,),
    look="the two commits' producers and times against the fault timeline: a consumer that "
    "started from an older offset while a newer commit was pending (docs/findings.md, the "
    "99 duplicates), or a zombie whose commit was not fenced",
    plants=("input_committed_twice",),
    examples_on_input=True,
)
TORN_TRANSACTION = CheckSpec(
    "delivery.torn-transaction",
    "A transaction the coordinator committed was not whole, per the brokers' logs: it "
    "committed output but no offsets of the input, or (output of copies) committed offsets "
    "that moved an input partition forward with no output, or over input records whose "
    "every committed copy another producer or no transaction wrote, or its markers "
    "disagreed. Read from the logs, for any transactional pipeline (one that keeps its input "
    "offsets in checkpoints of its own, as Flink does, by its markers alone).",
    Pass.LOG_TRANSACTIONS,
    (
        Evidence.TRANSACTIONS,
        Evidence.COORDINATOR_STATES,
        Evidence.BATCH_HEADERS,
        Evidence.OFFSET_COMMITS,
    ),
    look="the example's output ranges and offsets: a pipeline that commits its offsets "
    "outside its transaction (a plain commit, or none), or that sends no offsets with output; "
    "`written_outside`: input whose copies a producer of its own wrote (an error handler's)",
)
ABORTED_OFFSET_READ = CheckSpec(
    "isolation.aborted-offset-read",
    "A reader that must see only committed data returned a record at an offset below the "
    "final last stable offset that the final committed scan does not return: an aborted "
    "record, found by offsets alone, so it holds for pipelines that write no transaction "
    "history.",
    Pass.OFFSETS,
    (Evidence.FINAL_SCAN, Evidence.END_STATE),
    look="the offset against the final last stable offset: the reader returned a record the "
    "committed scan does not hold",
    jepsen=(JepsenName("G1a"),),
)
ABORTED_READ = CheckSpec(
    "isolation.aborted-read",
    "A downstream reader, or the committed scan, returned a record of a transaction that "
    "aborted (intended fate abort, or an abort invoked): Jepsen's G1a.",
    Pass.TRANSACTION_READS,
    (Evidence.TRANSACTIONS, Evidence.TRANSACTION_HISTORY),
    # a read of an aborted record is also an offset the final committed scan skipped
    implies=(ABORTED_OFFSET_READ.name,),
    look="the reader's isolation level and the aborted transaction's lane on the timeline: "
    "when it aborted and when the reader saw it",
    plants=("aborted_read",),
    jepsen=(JepsenName("G1a"),),
)
UNCOMMITTED_READ = CheckSpec(
    "isolation.uncommitted-read",
    "A downstream reader returned a record before its transaction's commit was invoked.",
    Pass.TRANSACTION_READS,
    (Evidence.TRANSACTIONS, Evidence.TRANSACTION_HISTORY),
    look="the read's time against its transaction's commit on the timeline: a read before "
    "the commit means the reader ignored the last stable offset",
    plants=("uncommitted_read",),
)
FRACTURED_READ = CheckSpec(
    "isolation.fractured-read",
    "A reader that drained to the end saw only some of a committed transaction's records.",
    Pass.TRANSACTION_READS,
    (Evidence.TRANSACTIONS, Evidence.TRANSACTION_HISTORY, Evidence.FINAL_SCAN),
    look="which of the transaction's partitions the reader missed, and whether a fault cut "
    "the reader off from one partition's leader",
    plants=("fractured_read",),
)
ORDER = CheckSpec(
    "isolation.order",
    "A reader's offsets in a partition went backwards or repeated, or it stepped over a "
    "record the committed scan holds.",
    Pass.OFFSETS,
    look="the reader's positions around the example offset: a rewind after a rebalance, or "
    "a fetch that skipped a committed record",
    plants=("order_backwards", "order_skip"),
    jepsen=(
        JepsenName("nonmonotonic-poll", ("backwards", "repeat")),
        JepsenName("poll-skip", ("skip",)),
    ),
)
NONMONOTONIC_SEND = CheckSpec(
    "isolation.nonmonotonic-send",
    "A producer's send was acknowledged at a lower offset of its partition than the send it "
    "made there just before: the partition does not hold its records in the order they were "
    "sent.",
    Pass.SEND_ORDER,
    look="the example's two sends against the fault timeline: a producer without idempotence "
    "retried the earlier one (a timeout, a leader change) while the later one was in flight",
    plants=("nonmonotonic_send",),
    examples_on_input=True,
    jepsen=(JepsenName("nonmonotonic-send"),),
)
# Jepsen's int-* family: order inside one committed transaction of a processor, by the place
# each record's copy holds among the transaction's sends (it sends in the order it read). Only
# whole transactions are judged: a torn one's gaps are the tear's, not the processor's.
_IN_TRANSACTION = (
    Evidence.TRANSACTIONS,
    Evidence.TRANSACTION_HISTORY,
    Evidence.SEND_INDEX,
    Evidence.FINAL_SCAN,
)
INT_NONMONOTONIC_POLL = CheckSpec(
    "isolation.int-nonmonotonic-poll",
    "Within one whole committed transaction (every send of it in the final committed "
    "scan), the processor read an input partition out of order: a "
    "record it sent later came from an input offset at or below that of the record it sent "
    "just before from that partition.",
    Pass.TRANSACTION_ORDER,
    _IN_TRANSACTION,
    look="the example transaction's records in the order it sent them: its consumer was "
    "rewound (a seek, a rebalance) while the transaction was open",
    plants=("int_poll_reorder",),
    jepsen=(JepsenName("int-nonmonotonic-poll"),),
)
INT_POLL_SKIP = CheckSpec(
    "isolation.int-poll-skip",
    "Within one whole committed transaction (every send of it in the final committed "
    "scan), the processor stepped over input records: two records "
    "it sent one after the other from one input partition came from offsets with records of "
    "the final committed input scan between them.",
    Pass.TRANSACTION_ORDER,
    _IN_TRANSACTION,
    look="the skipped input offsets: whether another transaction processed them (a "
    "rebalance mid-transaction) or none did (delivery.lost)",
    plants=("int_poll_skip",),
    jepsen=(JepsenName("int-poll-skip"),),
)
INT_NONMONOTONIC_SEND = CheckSpec(
    "isolation.int-nonmonotonic-send",
    "Within one whole committed transaction (every send of it in the final committed "
    "scan), a record landed at a lower offset of an output "
    "partition than the record the transaction sent there just before it.",
    Pass.TRANSACTION_ORDER,
    _IN_TRANSACTION,
    look="the example's two output offsets and their batches: a producer that retried the "
    "earlier batch while the later one was in flight",
    plants=("int_send_reorder",),
    jepsen=(JepsenName("int-nonmonotonic-send"),),
)
# Jepsen's int-send-skip (another transaction's record between two consecutive sends of one
# transaction to a partition) is normal in Kafka, whose transactions do not isolate their
# appends: the same pass counts it for information (verdict.json's stats), not as a check.
INT_SEND_SKIP = "int-send-skip"
INCONSISTENT_OFFSETS = CheckSpec(
    "isolation.inconsistent-offsets",
    "Two readers saw different records at the same topic, partition and offset.",
    Pass.OFFSETS,
    look="the two readers' records at that offset: a log that diverged after an unclean "
    "leader election",
    plants=("inconsistent_offsets",),
    jepsen=(JepsenName("inconsistent-offsets"),),
)
UNCOMMITTED_OFFSET_READ = CheckSpec(
    "isolation.uncommitted-offset-read",
    "A reader that must see only committed data returned an output record before the "
    "marker that committed its transaction in that partition was written, or one no marker "
    "ever closed: it read past the last stable offset. Judged by the record's offset against "
    "the brokers' logs (batch ranges and marker times), for any transactional pipeline.",
    Pass.LOG_TRANSACTIONS,
    (Evidence.TRANSACTIONS, Evidence.BATCH_HEADERS),
    look="the read's time against its transaction's marker: a reader configured "
    "read_uncommitted, or a broker that served records above the last stable offset",
)
ZOMBIE_WRITE = CheckSpec(
    "fencing.zombie-write",
    "A transaction of an older owner (lower group generation) of an input partition "
    "committed output although its commit was invoked after a newer owner's transaction on "
    "that partition had committed.",
    Pass.ZOMBIES,
    (Evidence.TRANSACTIONS, Evidence.TRANSACTION_HISTORY),
    look="the older owner's lane on the timeline: it committed after its partition moved, so "
    "its generation was not checked",
    plants=("zombie_write",),
)
STALE_COMMIT = CheckSpec(
    "fencing.stale-commit",
    "The transaction coordinator wrote a PrepareCommit for one of the run's transactional "
    "ids while no client of that id had a commit call in flight (from its invoke to that "
    "process's next commit event): a commit request the client had given up on landed later, "
    "in another transaction (KAFKA-17754, docs/findings.md).",
    Pass.STALE_COMMITS,
    (Evidence.TRANSACTIONS, Evidence.TRANSACTION_HISTORY, Evidence.COORDINATOR_STATES),
    look="the instance lane at that time: its previous commit timed out and was retried, and "
    "its request landed later, committing what the open transaction held so far "
    "(KAFKA-17754; a client on transaction version 2 is fenced)",
    plants=("stale_commit",),
)
OLDER_EPOCH_COMMIT = CheckSpec(
    "fencing.older-epoch-commit",
    "The transaction coordinator committed a transaction of an older producer epoch of a "
    "transactional id after a newer producer session of that id had been initialised "
    "(InitProducerId at a higher epoch): a zombie that was not fenced. Read from the "
    "coordinators' log, for any transactional pipeline.",
    Pass.LOG_TRANSACTIONS,
    # the logs' transaction table is built with the run's partitions: without their batch
    # headers it would hold no run's transaction to judge
    (Evidence.TRANSACTIONS, Evidence.COORDINATOR_STATES, Evidence.BATCH_HEADERS),
    look="the transactional id's sessions on the timeline: the older instance's commit after "
    "the newer one's start (a broker that did not check the epoch)",
)
OPEN_TRANSACTIONS = CheckSpec(
    "liveness.open-transactions",
    "A transaction of the run was still open at the end, after its faults healed (Kafka's "
    "TransactionsCommand).",
    Pass.END_STATE,
    (Evidence.TRANSACTIONS, Evidence.END_STATE),
    look="the instance lane whose last bar is unknown: a producer that hung or died "
    "mid-transaction and was never aborted",
    plants=("open_transaction",),
)
HANGING_TRANSACTION = CheckSpec(
    "liveness.hanging-transaction",
    "Per the brokers' logs, a transaction of the run was never finished: the coordinator's "
    "last record of it is not a completion (still Ongoing, or decided but never completed: "
    "a marker it never wrote), or an output partition holds a producer's transactional "
    "batches with no marker after them (Kafka's hanging transaction, KIP-664: it holds the "
    "partition's last stable offset). Read from the logs, for any transactional pipeline.",
    Pass.LOG_TRANSACTIONS,
    (Evidence.TRANSACTIONS, Evidence.COORDINATOR_STATES, Evidence.BATCH_HEADERS),
    look="the transactional id's last states and the partition's last batches on the "
    "timeline: a producer that died mid-transaction and was never aborted, or a marker the "
    "coordinator decided and never wrote (KAFKA-19999)",
)
LSO = CheckSpec(
    "liveness.lso",
    "A partition's last stable offset stayed below its high watermark at the end (a hanging "
    "transaction blocks read_committed readers).",
    Pass.END_STATE,
    (Evidence.END_STATE,),
    look="the partition's open transaction: the instance lane with an unknown bar at the end, "
    "and whether its transaction timeout expired",
    plants=("lso_behind",),
)
GROUP_OFFSETS = CheckSpec(
    "liveness.group-offsets",
    "The group's committed offset of an input partition stayed below the input's end.",
    Pass.END_STATE,
    (Evidence.END_STATE, Evidence.GROUP_OFFSETS),
    look="the group's committed offsets: the pipeline stopped consuming (a hung or exited "
    "instance on the timeline) before the input's end",
    plants=("group_offsets_behind",),
)
UNSEEN = CheckSpec(
    "liveness.unseen",
    "An acknowledged input record (or one in the final input scan) has no record in the "
    "final committed output and sits at or above the group's final committed offset of its "
    "partition: the pipeline never moved past it (it stalled), so it is unseen, not lost "
    "(Jepsen's unseen against lost-write).",
    Pass.DELIVERY,
    (
        Evidence.FINAL_SCAN,
        Evidence.OUTPUT_COPIES,
        Evidence.END_STATE,
        Evidence.GROUP_OFFSETS,
    ),
    # the group's committed offset of that partition stayed below the input's end
    implies=(GROUP_OFFSETS.name,),
    look="the examples' partitions and the group's committed offset of each: the instance "
    "that owned them hung, exited or stopped fetching (its lane on the timeline)",
    plants=("unseen",),
    examples_on_input=True,
    jepsen=(JepsenName("unseen"),),
)
REALTIME_LAG = CheckSpec(
    "liveness.realtime-lag",
    "A downstream read_committed reader first read a committed output record more than the "
    "run's --max-lag seconds after the COMMIT marker of its transaction was written in that "
    "partition (judged only when the user sets the bound; the lag itself is always in the "
    "verdict's statistics and the report).",
    Pass.LOG_TRANSACTIONS,
    (Evidence.TRANSACTIONS, Evidence.BATCH_HEADERS, Evidence.LAG_BOUND),
    look="the realtime lag chart: which partitions lagged, and the fault or stalled instance "
    "(its lane on the timeline) in that window",
    jepsen=(JepsenName("worst-realtime-lag"),),
)
INSTANCE_FAILURE = CheckSpec(
    "liveness.instance-failure",
    "An instance of the pipeline exited on its own with a status its workload declares a "
    "failure (a Kafka Streams instance whose stream thread died of a fatal error, or that "
    "did not close in time): its client gave up on an error that exactly-once promises to "
    "survive, even where the supervisor's restart kept the output exactly-once.",
    Pass.INSTANCES,
    (Evidence.FAILURE_EXITS,),
    look="the example instance's log (workload/processor-<instance>.<incarnation>.log): the "
    "exception its client died of, and the fault on the timeline just before its exit",
    plants=("instance_failure",),
)
AGGREGATE_MISMATCH = CheckSpec(
    "aggregate.mismatch",
    "A stateful pipeline's final aggregate of a key (count, sum, min, max of the ids; the "
    "last committed value on its aggregate topic) differs from the one computed from the "
    "committed input, or a key is missing or extra.",
    Pass.AGGREGATES,
    (Evidence.AGGREGATE_ROWS, Evidence.FINAL_SCAN),
    look="the example key's expected and found values: a duplicate or lost input record "
    "counted in the pipeline's state",
    plants=("aggregate_mismatch",),
)
EXPECTED_OUTPUT = CheckSpec(
    "aggregate.expected-output",
    "An aggregating pipeline's final result for a key (the last committed value of an "
    "output key) differs from what the run's --expect function computed from the committed "
    "input, or a key is on one side only (docs/byo.md).",
    Pass.EXPECTED_OUTPUT,
    (Evidence.EXPECTED_OUTPUT, Evidence.FINAL_SCAN),
    look="the example key's expected and found results: the pipeline's output for that key "
    "against what --expect computed",
)

# In the order verdict.json and the report list them.
CATALOGUE: dict[str, CheckSpec] = {
    spec.name: spec
    for spec in (
        LOST,
        DUPLICATE,
        PHANTOM,
        DUPLICATE_INPUT,
        INPUT_COMMITTED_TWICE,
        TORN_TRANSACTION,
        ABORTED_READ,
        UNCOMMITTED_READ,
        FRACTURED_READ,
        ORDER,
        NONMONOTONIC_SEND,
        INT_NONMONOTONIC_POLL,
        INT_POLL_SKIP,
        INT_NONMONOTONIC_SEND,
        INCONSISTENT_OFFSETS,
        ABORTED_OFFSET_READ,
        UNCOMMITTED_OFFSET_READ,
        ZOMBIE_WRITE,
        STALE_COMMIT,
        OLDER_EPOCH_COMMIT,
        OPEN_TRANSACTIONS,
        HANGING_TRANSACTION,
        LSO,
        GROUP_OFFSETS,
        UNSEEN,
        REALTIME_LAG,
        INSTANCE_FAILURE,
        AGGREGATE_MISMATCH,
        EXPECTED_OUTPUT,
    )
}


@dataclass
class CheckResult:
    """One check's entry in verdict.json: what the checkers write and every reader (the
    report, the CLI, the pytest plugin, the matrix) reads, instead of dict lookups."""

    verdict: str  # PASS or FAIL: FAIL exactly when it found an anomaly
    count: int
    description: str
    counts: dict[str, Any] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # its spec's sources
    jepsen: dict[str, int] = field(default_factory=dict)  # Jepsen's names: how many of each

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Any) -> CheckResult:
        """Tolerant: a damaged or hand-edited verdict.json reads as what it holds (a report
        must render whatever it is given; an example that is not an object is left out),
        never raises."""
        entry = raw if isinstance(raw, dict) else {}
        count, counts, examples = entry.get("count"), entry.get("counts"), entry.get("examples")
        evidence, jepsen = entry.get("evidence"), entry.get("jepsen")
        return cls(
            verdict=str(entry.get("verdict", "")),
            count=count if isinstance(count, int) else 0,
            description=str(entry.get("description", "")),
            counts=counts if isinstance(counts, dict) else {},
            examples=[e for e in examples if isinstance(e, dict)]
            if isinstance(examples, list)
            else [],
            evidence=[str(e) for e in evidence] if isinstance(evidence, list) else [],
            jepsen={str(k): n for k, n in jepsen.items() if isinstance(n, int)}
            if isinstance(jepsen, dict)
            else {},
        )


def results_of(verdict: Any) -> dict[str, CheckResult]:
    """The checks of a verdict (verdict.json's content), typed."""
    checks = verdict.get("checks") if isinstance(verdict, dict) else None
    if not isinstance(checks, dict):
        return {}
    return {str(name): CheckResult.from_json(raw) for name, raw in checks.items()}


# The kinds of disagreement between a client's transactions and the brokers' logs (verdict.json
# stats.transactions.agreement), in the order a reviewer reads them, each with what disagrees.
# None changes a check's verdict: which side is wrong is for a reviewer to find out.
COMMITTED_COUNT = "committed-count"
FATE = "fate"
SPLIT = "split"
SHARED = "shared"
UNPLACED = "unplaced"
RECORDS = "records"
AGREEMENT_KINDS = {
    COMMITTED_COUNT: "an id's committed transactions, counted on each side",
    FATE: "a transaction the client saw committed that the coordinator did not commit, "
    "or one the client aborted that it committed",
    SPLIT: "one client transaction's records in several of the coordinator's transactions",
    SHARED: "one coordinator transaction holding records of several client transactions",
    UNPLACED: "a committed client transaction's records in no transaction of the logs",
    RECORDS: "a committed pair whose logs hold another number of records than the client produced",
}


def needing(evidence: Evidence) -> tuple[str, ...]:
    """The checks that cannot be judged without `evidence`."""
    return tuple(name for name, spec in CATALOGUE.items() if evidence in spec.needs)


def needing_pass(found_by: Pass) -> tuple[str, ...]:
    """The checks that `found_by` finds."""
    return tuple(name for name, spec in CATALOGUE.items() if spec.found_by is found_by)


def first_missing(spec: CheckSpec, missing: dict[Evidence, str]) -> str | None:
    """Why `spec` cannot be judged, given each missing evidence's reason: the first in
    Evidence's order that it needs; None when it can be."""
    for evidence in Evidence:
        if evidence in spec.needs and evidence in missing:
            return missing[evidence]
    return None


def markdown_table() -> str:
    """docs/checkers.md's table of checks."""
    lines = [
        "| check | FAILs when | needs | implies | Jepsen | where a reviewer looks first |",
        "|---|---|---|---|---|---|",
    ]
    for spec in CATALOGUE.values():
        needs = ", ".join(evidence.value for evidence in spec.needs) or "reads"
        implies = ", ".join(f"`{name}`" for name in spec.implies)
        jepsen = ", ".join(
            f"`{j.name}`" + (f" ({', '.join(j.kinds)})" if j.kinds else "") for j in spec.jepsen
        )
        lines.append(
            f"| `{spec.name}` | {spec.meaning} | {needs} | {implies} | {jepsen} | {spec.look} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # docs/checkers.md's table: python -m eoschaos.contract.checks
    print(markdown_table(), end="")
