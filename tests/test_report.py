"""The HTML report renders a verdict as it is, escapes everything, and fetches nothing."""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import in_page, rendered_dom, screenshot

from eoschaos.contract.checks import CATALOGUE
from eoschaos.reports.html import SCRIPT as SORT_AND_FILTER
from eoschaos.reports.html import render_report, write_report

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img onerror=alert(1) src=x>'


def lineage() -> dict:
    return {
        "stats": {
            "nodes": {"input": 8, "txn": 5, "output": 9, "read": 25, "offsets": 5},
            "edges": {"consumed-by": 9, "produced": 9, "read-by": 25, "committed-offsets": 5},
            "committed_outputs_per_input_max": 2,
        },
        "anomalies": [
            {
                "check": "delivery.duplicate",
                "example": 0,
                "title": "delivery.duplicate: id 2",
                "nodes": [
                    {"id": "in:2", "type": "input", "label": "id 2 p0@1", "anomalous": True},
                    {"id": "txn:0.0.0", "type": "txn", "label": "txn 0.0.0", "anomalous": False},
                    {"id": "txn:2.0.0", "type": "txn", "label": "txn 2.0.0", "anomalous": False},
                    {"id": "out:1:0", "type": "output", "label": "p1@0 id 2", "anomalous": True},
                    {"id": "out:0:5", "type": "output", "label": "p0@5 id 2", "anomalous": True},
                    {"id": "offsets:2.0.0:0", "type": "offsets", "label": "p0 → 2"},
                ],
                "edges": [
                    {"source": "in:2", "target": "txn:0.0.0", "type": "consumed-by"},
                    {"source": "in:2", "target": "txn:2.0.0", "type": "consumed-by"},
                    {"source": "txn:0.0.0", "target": "out:1:0", "type": "produced"},
                    {"source": "txn:2.0.0", "target": "out:0:5", "type": "produced"},
                    {
                        "source": "txn:2.0.0",
                        "target": "offsets:2.0.0:0",
                        "type": "committed-offsets",
                    },
                ],
                "omitted": {"read": 3},
                "from_logs": [
                    "input id 2 at p0@1 was consumed by transaction #1 of kip447-0 (producer "
                    "7, epoch 0, COMMIT) and transaction #4 of kip447-2 (producer 9, epoch 0, "
                    "COMMIT)"
                ],
            }
        ],
        "cycles": {
            "G0": 1,
            "G1c": 0,
            "examples": [
                {
                    "anomaly": "G0",
                    "component_size": 2,
                    "cycle": ["0.0.0", "1.0.0", "0.0.0"],
                    "edges": [
                        {"source": "0.0.0", "target": "1.0.0", "type": "ww"},
                        {"source": "1.0.0", "target": "0.0.0", "type": "ww"},
                    ],
                }
            ],
            "note": "Information only, not part of the verdict: Kafka does not promise ...",
        },
    }


def verdict(result: str = "FAIL") -> dict:
    duplicate = {
        "verdict": result,
        "count": 1 if result == "FAIL" else 0,
        "counts": {"ids": 1},
        "examples": [{"id": 2, "partition": 0, "offset": 5}] if result == "FAIL" else [],
        "description": "one input id with more than one committed output",
        "evidence": ["reads"],
        "jepsen": {"duplicate": 1 if result == "FAIL" else 0},
    }
    return {
        "verdict": result,
        "complete": True,
        "damage": [],
        "workload": "kip447",
        "mode": "eos",
        "seed": 42,
        "kafka_version": "4.3.1",
        "faults": ["kill", "latency"],
        "backend": "process",
        "command": ["eoschaos", "run", "--faults", "kill,latency", "--seed", "42"],
        "checks": {
            "delivery.duplicate": duplicate,
            "delivery.lost": {
                "verdict": "PASS",
                "count": 0,
                "counts": {},
                "examples": [],
                "description": "an acked input with no committed output",
            },
        },
        "not_applicable": {"fencing.zombie-write": "mode alos has no transactions"},
        "stats": {"input_records": 8, "transactions": {"committed": 4, "aborted": 1}},
        "timeline": {
            "start": 1_700_000_000.0,
            "end": 1_700_000_040.0,
            "faults": [
                {"f": "kill", "target": "broker 2", "params": "{}", "start": 5.0, "end": 12.5},
                {"f": "latency", "target": "broker 1", "params": "{}", "start": 20, "end": None},
            ],
            "throughput": [{"t": t, "sends": 100, "commits": 2, "reads": 90} for t in range(40)],
            "lane_bin_seconds": 0.05,
            "lanes": lanes(),
        },
        "lineage": lineage() if result == "FAIL" else {},
        "checker": {
            "seconds": 12.5,
            "jobs": 37,
            "spark_master": "local[*]",
            "spark_version": "4.3.0",
        },
        "cluster": {"metadata_version": "4.3-IV0", "transaction_version": "2"},
        "config": {
            "versions": {"eoschaos": "0.1.0", "confluent_kafka": "2.16.1", "librdkafka": "2.16.1"}
        },
    }


def lanes() -> list[dict]:
    """The seeder; instance 0's first incarnation (exited) and its second (still running at
    the end), with a transaction of every outcome; the observer."""

    def lane(name: str, started=None, exited=None, transactions=()) -> dict:
        kind = "instance" if name.startswith("instance") else "process"
        activity = [[started or 0.0, exited or 39.0, 400]]
        return {
            "lane": name,
            "kind": kind,
            "started": started,
            "exited": exited,
            "activity": activity,
            "transactions": list(transactions),
        }

    return [
        lane("seeder"),
        lane(
            "instance 0.0",
            0.1,
            6.0,
            [[0.5, 4.0, "committed", {"committed": 7}], [4.0, 5.0, "aborted", {"aborted": 1}]],
        ),
        lane(
            "instance 0.1",
            7.0,
            None,
            [
                [8.0, 9.0, "fenced", {"fenced": 1, "committed": 2}],
                [9.0, 39.0, "committed", {"committed": 30}],
                [39.0, 40.0, "unknown", {"unknown": 1}],
            ],
        ),
        lane("observer"),
    ]


class _Elements(HTMLParser):
    """Every start tag and attribute name in a document, and the text of every script, as a
    browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        if tag == "script":
            self.scripts.append("")

    def handle_data(self, data: str) -> None:
        if self.lasttag == "script" and self.scripts and not self.scripts[-1]:
            self.scripts[-1] = data


def elements(document: str) -> _Elements:
    parser = _Elements()
    parser.feed(document)
    return parser


def hostile() -> dict:
    """A failing verdict with attacker-controlled strings everywhere the history can reach."""
    data = verdict("FAIL")
    check = data["checks"]["delivery.duplicate"]
    record = {"key": SCRIPT, "value": BREAKOUT, "headers": [[SCRIPT, BREAKOUT]]}
    check["examples"] = [{"id": 2, "value": SCRIPT, "error": BREAKOUT, "record": record}]
    check["counts"] = {SCRIPT: BREAKOUT}
    data["checks"][BREAKOUT] = copy.deepcopy(check)
    data["damage"] = [SCRIPT]
    data["complete"] = False
    data["not_applicable"] = {SCRIPT: BREAKOUT}
    data["command"] = ["eoschaos", SCRIPT, BREAKOUT]
    data["stats"] = {
        SCRIPT: BREAKOUT,
        "transactions": {
            "agreement": {
                "transactions": SCRIPT,
                "counts": {SCRIPT: BREAKOUT},
                "disagreements": [{"kind": SCRIPT, BREAKOUT: SCRIPT}],
            }
        },
    }
    data["config"]["note"] = SCRIPT
    data["timeline"]["faults"][0] |= {"f": SCRIPT, "target": BREAKOUT, "params": SCRIPT}
    data["timeline"]["lanes"][1] |= {"lane": SCRIPT}
    data["timeline"]["lanes"][1]["transactions"][0] = [0.5, 4.0, BREAKOUT, {SCRIPT: BREAKOUT}]
    data["timeline"]["lanes"][1]["activity"][0][2] = BREAKOUT
    anomaly = data["lineage"]["anomalies"][0]
    anomaly["title"] = SCRIPT
    anomaly["nodes"][0] |= {"label": BREAKOUT, "detail": SCRIPT, "type": BREAKOUT}
    anomaly["nodes"][1] |= {"id": BREAKOUT, "label": SCRIPT}
    anomaly["edges"][0] |= {"target": BREAKOUT, "type": SCRIPT}
    anomaly["from_logs"] = [SCRIPT, BREAKOUT]
    data["lineage"]["cycles"]["examples"][0]["cycle"] = [SCRIPT]
    data["forensics"] = {
        "recorded": True,
        "examples": [
            {
                "check": SCRIPT,
                "id": BREAKOUT,
                "places": [{"topic": SCRIPT, "batch": {"producer_id": BREAKOUT, "node": SCRIPT}}],
                "pattern": SCRIPT,
            }
        ],
    }
    return data


def test_a_passing_verdict_renders_pass_and_every_check():
    document = render_report(verdict("PASS"))
    assert '<div class="verdict PASS">PASS</div>' in document
    assert "delivery.duplicate" in document and "delivery.lost" in document
    assert 'class="badge FAIL"' not in document


def test_the_run_table_says_how_long_the_check_took_and_in_how_many_spark_jobs():
    document = render_report(verdict("PASS"))
    assert "<td>checked in</td><td>12.5 s</td>" in document
    assert '<td>Spark jobs</td><td class="num">37</td>' in document


def test_a_failing_verdict_renders_fail_with_its_example_records():
    document = render_report(verdict("FAIL"))
    assert '<div class="verdict FAIL">FAIL</div>' in document
    assert "1 failed: delivery.duplicate" in document
    examples = re.search(r'<details id="check-delivery.duplicate" open>.*?</details>', document)
    assert examples is not None
    assert "<th>id</th><th>partition</th><th>offset</th>" in examples.group(0)


def test_each_check_says_what_it_was_judged_from():
    document = render_report(verdict("FAIL"))
    row = re.search(r"<tr><td><a href=\"#check-delivery.duplicate\">.*?</tr>", document)
    assert row is not None and "<td>reads</td>" in row.group(0)


def test_each_check_names_jepsens_anomalies_it_counts():
    document = render_report(verdict("FAIL"))
    row = re.search(r"<tr><td><a href=\"#check-delivery.duplicate\">.*?</tr>", document)
    assert row is not None and "Jepsen: duplicate=1" in row.group(0)


def test_not_applicable_checks_are_listed_with_their_reason():
    document = render_report(verdict())
    assert "fencing.zombie-write</strong>: mode alos has no transactions" in document


def test_hostile_strings_from_the_history_appear_only_escaped():
    document = render_report(hostile())
    parsed = elements(document)
    assert not parsed.tags & {"img", "iframe", "object", "embed", "link"}
    assert parsed.scripts == [SORT_AND_FILTER]  # the page's own, and nothing else
    assert not {name for name in parsed.attributes if name.startswith("on")}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in document
    assert "&quot;&gt;&lt;img onerror=alert(1) src=x&gt;" in document


def test_the_browser_may_run_the_pages_own_script_and_no_other():
    document = render_report(hostile())
    [script] = elements(document).scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', document)
    assert policy is not None
    assert f"script-src 'sha256-{digest}'" in policy.group(1)
    assert "unsafe" not in policy.group(1).split("script-src")[1]


def test_the_report_has_nothing_to_fetch():
    document = render_report(verdict())
    assert "http://" not in document and "https://" not in document
    assert not re.search(r"\bsrc\s*=|<link|@import", document)
    assert set(re.findall(r"url\(([^)]*)\)", document)) <= {"#arrow-0"}
    assert "default-src 'none'" in document  # and the browser is told to refuse any fetch


def test_every_fault_gets_a_band_on_the_timeline_and_a_window_on_the_charts():
    document = render_report(verdict())
    assert document.count('class="fault-band"') == 1  # the kill, healed
    assert document.count('class="fault-band unhealed"') == 1  # the latency, never healed
    assert document.count('class="fault-window"') == 2 * 2  # across the lanes, on the chart
    assert "latency broker 1: 20.0s, never healed" in document


def test_fault_params_read_as_words_and_times_to_the_millisecond():
    data = verdict()
    data["timeline"]["faults"][0] |= {
        "params": '{"instance": 0, "mid_transaction": true}',
        "start": 7.725637674331665,
    }
    document = render_report(data)
    row = re.search(r"<tr><td>kill</td>.*?</tr>", document).group(0)
    assert "<td>instance 0, mid transaction yes</td>" in row
    assert '<td class="num">' not in row and "<td>7.726</td><td>12.500</td>" in row
    assert "kill broker 2 (instance 0, mid transaction yes): 7.7s to 12.5s" in document
    latency = re.search(r"<tr><td>latency</td>.*?</tr>", document).group(0)
    assert latency.endswith("<td>20.000</td><td>never healed</td></tr>")


def test_an_example_kept_as_it_was_shows_key_value_and_headers_as_one_line():
    data = verdict()
    examples = data["checks"]["delivery.duplicate"]["examples"]
    examples.append({"id": 3, "partition": 1, "offset": 2})  # one not kept: an empty cell
    examples[0]["record"] = {
        "key": "\\xffk",
        "value": None,
        "headers": [["trace", "t-1"], ["src", "in/0/5"]],
    }
    document = render_report(data)
    expected = 'key "\\xffk"; value (null); headers "trace"="t-1", "src"="in/0/5"'
    assert f"<td>{html.escape(expected)}</td>" in document
    assert '<td class="num">3</td><td class="num">1</td><td class="num">2</td><td></td>' in document


def test_a_fault_that_took_no_effect_is_named_above_the_fault_table_and_marked_no():
    data = verdict()
    data["timeline"]["faults"][0]["params"] = (
        '{"broker": 2, "took_effect": false, "was_running": false}'
    )
    document = render_report(data)
    warning = re.search(r'<p class="warn" id="faults-without-effect">(.*?)</p>', document)
    assert warning.group(1).startswith("1 of 2 faults did not take effect")
    assert "kill broker 2 at " in warning.group(1)
    row = re.search(r"<tr><td>kill</td>.*?</tr>", document).group(0)
    assert "<td>NO</td><td>broker 2, was running no</td>" in row


def test_faults_that_took_effect_raise_no_warning_and_say_yes():
    data = verdict()
    for fault in data["timeline"]["faults"]:
        fault["params"] = '{"broker": 1, "took_effect": true}'
    document = render_report(data)
    assert "faults-without-effect" not in document
    assert document.count("<td>yes</td><td>broker 1</td>") == 2


def test_the_timeline_has_one_lane_per_process_seeder_first():
    document = render_report(verdict())
    timeline = re.search(r'<section id="timeline">.*?</section>', document).group(0)
    assert re.findall(r'data-lane="([^"]*)"', timeline) == [
        "seeder",
        "instance 0.0",
        "instance 0.1",
        "observer",
    ]


def test_transactions_are_bars_named_by_their_outcome_in_class_and_words():
    document = render_report(verdict())
    bars = re.findall(r'<rect class="txn (\w+)".*?<title>(.*?)</title>', document)
    assert [outcome for outcome, _ in bars] == [
        "committed",
        "aborted",
        "fenced",
        "committed",
        "unknown",
    ]
    assert bars[1][1] == "instance 0.0: aborted; begun here: 1 aborted, 4.000s to 5.000s"
    assert bars[2][1] == "instance 0.1: fenced; begun here: 1 fenced, 2 committed, 8.000s to 9.000s"


def test_an_instance_life_runs_from_its_start_to_its_exit_or_the_end():
    document = render_report(verdict())
    lives = re.findall(r'<line class="life".*?<title>(.*?)</title>', document)
    assert lives == [
        "instance 0.0: started 0.100s, exited 6.000s",
        "instance 0.1: started 7.000s, still running at the end",
    ]


def test_a_long_run_gets_a_wider_timeline_that_scrolls_instead_of_shrinking():
    data = verdict()
    data["timeline"]["end"] = data["timeline"]["start"] + 600
    document = render_report(data)
    lanes_chart = re.search(r'<div class="scroll"><svg class="chart" viewBox="0 0 (\d+) ', document)
    assert int(lanes_chart.group(1)) > 600 * 10
    assert re.search(r'aria-label="process timeline"', document)


def test_the_throughput_chart_draws_one_line_per_series():
    document = render_report(verdict())
    assert document.count('<polyline class="series"') == 3


def test_realtime_lag_is_drawn_per_output_partition_and_unseen_input_as_one_line():
    data = verdict()
    data["stats"] |= {
        "realtime_lag": {"records": 40, "worst_s": 2.5, "p99_s": 0.75, "partitions": {}},
        "unseen": {"peak": 12, "peak_at_s": 3, "at_end": 0},
    }
    data["timeline"] |= {
        "realtime_lag": [[0, 0, 0.1], [1, 0, 2.5], [0, 1, 0.2], [1, 1, 0.3]],
        "unseen": [[0, 5], [1, 12], [2, 0]],
    }
    document = render_report(data)
    lag = re.search(r'<h3 id="realtime-lag">.*?</svg>', document, re.S).group(0)
    assert "Worst 2.5 s, p99 0.75 s over 40 committed records" in lag
    assert lag.count('<polyline class="series"') == 2  # partitions 0 and 1
    assert "partition 0" in lag and "partition 1" in lag
    unseen = re.search(r'<h3 id="unseen">.*?</svg>', document, re.S).group(0)
    assert "Peak 12 at 3 s; 0 at the end of the run." in unseen
    assert unseen.count('<polyline class="series"') == 1


def test_a_verdict_without_lag_or_unseen_series_draws_neither_chart():
    document = render_report(verdict())
    assert 'id="realtime-lag"' not in document and 'id="unseen"' not in document


def test_an_incomplete_history_shows_a_banner_with_its_damage():
    data = verdict("PASS") | {"complete": False, "damage": ["processor-1.0.jsonl: last line cut"]}
    document = render_report(data)
    assert '<div class="banner incomplete">' in document
    assert "processor-1.0.jsonl: last line cut" in document


def test_a_complete_history_shows_no_banner():
    assert 'class="banner incomplete"' not in render_report(verdict("PASS"))


def test_each_anomaly_is_drawn_with_its_anomalous_nodes_outlined():
    document = render_report(verdict("FAIL"))
    assert document.count('<svg class="chart"') == 4  # lanes, faults, throughput, an anomaly
    assert document.count('<g class="node anomalous">') == 3
    assert document.count('<g class="node">') == 3
    assert document.count('<path class="edge"') == 5
    assert "Not drawn (farther from the anomaly): 3 read." in document


def test_an_anomaly_says_in_words_which_transactions_the_logs_name():
    document = render_report(verdict("FAIL"))
    words = document[document.index("Per the brokers' logs:") :]
    assert "<li>input id 2 at p0@1 was consumed by transaction #1 of kip447-0" in words


def _with_agreement(counts: dict, disagreements: list) -> dict:
    data = verdict("PASS")
    data["stats"]["transactions"]["agreement"] = {
        "transactional_ids": 3,
        "transactions": 120,
        "counts": counts,
        "disagreements": disagreements,
    }
    return data


def test_client_transactions_that_agree_with_the_logs_say_so_in_one_line():
    document = render_report(_with_agreement({}, []))
    section = document[document.index('<section id="agreement">') :]
    section = section[: section.index("</section>")]
    assert "120 client transactions of 3 transactional ids" in section
    assert "they agree." in section and "<table" not in section


def test_each_kind_of_disagreement_is_listed_with_its_meaning_count_and_examples():
    fate = {"kind": "fate", "instance": 0, "outcome": "committed", "logs": [{"fate": "ABORT"}]}
    document = render_report(_with_agreement({"fate": 1, "split": 2}, [fate]))
    section = document[document.index('<section id="agreement">') :]
    section = section[: section.index("</section>")]
    assert "they disagree." in section
    assert (
        "<tr><td>fate</td><td>a transaction the client saw committed that the coordinator did "
        'not commit, or one the client aborted that it committed</td><td class="num">1</td></tr>'
    ) in section
    assert "<td>split</td><td>one client transaction&#x27;s records in several" in section
    assert html.escape('"outcome": "committed"') in section


def test_a_verdict_without_an_agreement_has_no_such_section():
    assert '<section id="agreement">' not in render_report(verdict("FAIL"))


def test_cycles_are_reported_as_information_not_verdict():
    document = render_report(verdict("FAIL"))
    assert "They do not decide the verdict." in document
    assert "0.0.0 →ww 1.0.0 →ww 0.0.0" in document


def test_reproduce_section_names_command_seed_and_versions():
    document = render_report(verdict())
    reproduce = document[document.index("<h2>Reproduce</h2>") :]
    assert "eoschaos run --faults kill,latency --seed 42" in reproduce
    for version in ("4.3.1", "4.3-IV0", "<td>2</td>", "0.1.0", "4.3.0", "2.16.1"):
        assert version in reproduce


@pytest.mark.parametrize("missing", ["timeline", "lineage", "checks", "cluster", "config"])
def test_a_verdict_without_an_optional_section_still_renders(missing):
    data = verdict()
    del data[missing]
    assert render_report(data).endswith("</html>\n")


def test_write_report_writes_the_rendered_document(tmp_path: Path):
    path = write_report(verdict(), tmp_path / "report.html")
    assert path.read_text(encoding="utf-8") == render_report(verdict())


def test_an_unfinished_run_reads_as_unknown_with_what_it_lacks():
    data = verdict("PASS") | {
        "verdict": "UNKNOWN",
        "complete": False,
        "unfinished": ["no end state (log-end rows)"],
    }
    document = render_report(data)
    assert '<div class="verdict UNKNOWN">UNKNOWN</div>' in document
    assert 'id="unfinished"' in document and "no end state (log-end rows)" in document


def test_a_failing_report_in_a_real_browser_shows_verdict_checks_lanes_and_forensics(
    tmp_path: Path,
):
    page = write_report(verdict("FAIL") | {"forensics": forensics()}, tmp_path / "report.html")
    dom = rendered_dom(page)
    assert '<div class="verdict FAIL">FAIL</div>' in dom
    assert re.search(r'<tr><td><a href="#check-delivery.duplicate">delivery.duplicate', dom)
    timeline = dom[dom.index('<section id="timeline">') :]
    assert timeline.count('<g class="lane"') == 4
    assert timeline.count('<rect class="txn ') == 5
    forensics_rows = dom[dom.index('<section id="forensics">') :]
    assert "<td>output-topic p3@83</td>" in forensics_rows
    assert screenshot(page, tmp_path / "report.png").stat().st_size > 10_000


EXAMPLES = "document.getElementById('check-delivery.duplicate').querySelector('table')"
SHOWN_IDS = (
    f"Array.from({EXAMPLES}.tBodies[0].rows).filter(row => !row.hidden)"
    ".map(row => Number(row.cells[0].textContent))"
)


def _click_heading(column: int) -> str:
    heading = f"{EXAMPLES}.tHead.rows[0].cells[{column}]"
    return f"{heading}.click(), [{heading}.getAttribute('aria-sort'), {SHOWN_IDS}]"


def test_a_reviewer_sorts_and_filters_an_anomaly_table_in_a_real_browser(tmp_path: Path):
    data = verdict("FAIL")
    places = [(12, 1, 40), (3, 0, 7), (25, 2, 9), (7, 1, 100), (40, 0, 2)]
    data["checks"]["delivery.duplicate"]["examples"] = [
        {"id": i, "partition": p, "offset": o} for i, p, o in places
    ]
    page = write_report(data, tmp_path / "report.html")
    filter_box = f"{EXAMPLES}.previousElementSibling.previousElementSibling"
    steps = [
        SHOWN_IDS,
        _click_heading(0),
        _click_heading(0),
        _click_heading(2),  # offsets compare as numbers: 2 < 7 < 9 < 40 < 100
        f"{filter_box}.focus(), document.activeElement.className",
        f"[{SHOWN_IDS}, {EXAMPLES}.previousElementSibling.textContent]",
    ]
    values = in_page(page, *steps, typed={5: "25"})
    assert values == [
        [12, 3, 25, 7, 40],
        ["ascending", [3, 7, 12, 25, 40]],
        ["descending", [40, 25, 12, 7, 3]],
        ["ascending", [40, 3, 25, 12, 7]],
        "filter",
        [[25], " 1 of 5 rows"],
    ]


def test_a_passing_report_in_a_real_browser_shows_pass_and_no_forensics(tmp_path: Path):
    page = write_report(verdict("PASS"), tmp_path / "report.html")
    dom = rendered_dom(page)
    assert '<div class="verdict PASS">PASS</div>' in dom
    assert 'class="badge FAIL"' not in dom and 'id="forensics"' not in dom
    assert '<section id="timeline">' in dom
    assert screenshot(page, tmp_path / "report.png").stat().st_size > 10_000


def test_failed_checks_come_first_each_with_where_to_look():
    data = verdict("FAIL")
    data["checks"] = dict(reversed(list(data["checks"].items())))  # the PASS listed first
    document = render_report(data)
    checks = re.search(r"<h2>Checks</h2><table class=\"data\">.*?</table>", document).group(0)
    assert re.findall(r"<tr><td>(?:<a [^>]*>)?([\w.-]+)", checks) == [
        "delivery.duplicate",
        "delivery.lost",
    ]
    assert checks.count("Look at:") == 1
    assert f"Look at:</strong> {html.escape(CATALOGUE['delivery.duplicate'].look)}." in checks


def forensics() -> dict:
    batch = {
        "first": 83,
        "last_offset": 85,
        "count": 3,
        "producer_id": 1000,
        "producer_epoch": 0,
        "base_sequence": 36,
        "transactional": False,
        "leader_epoch": 0,
        "node": 1,
    }
    return {
        "recorded": True,
        "examples": [
            {
                "check": "delivery.duplicate",
                "example": 0,
                "id": 2,
                "places": [
                    {"topic": "output-topic", "partition": 3, "offset": 83, "batch": batch},
                    {"topic": "output-topic", "partition": 1, "offset": 5, "batch": None},
                ],
                "pattern": "the copies were appended by different producers (1000, 2001)",
            }
        ],
    }


def test_forensics_show_each_examples_batches_and_the_pattern_in_words():
    document = render_report(verdict("FAIL") | {"forensics": forensics()})
    section = re.search(r'<section id="forensics">.*?</section>', document).group(0)
    assert "What the log shows:</strong> the copies were appended by different producers" in section
    assert '<td>output-topic p3@83</td><td>83-85</td><td class="num">1000</td>' in section
    assert "<td>output-topic p1@5</td><td>not found</td>" in section


def test_a_history_without_batch_headers_says_so_in_the_forensics_section():
    document = render_report(verdict("FAIL") | {"forensics": {"recorded": False, "examples": []}})
    assert 'id="forensics"' in document and "holds no batch headers" in document


def test_a_passing_run_has_no_forensics_section():
    data = verdict("PASS") | {"forensics": {"recorded": None, "examples": []}}
    assert 'id="forensics"' not in render_report(data)


def test_an_example_with_a_lineage_drawing_links_to_it():
    document = render_report(verdict("FAIL"))
    examples = re.search(r'<details id="check-delivery.duplicate" open>.*?</details>', document)
    assert '<a href="#lineage-delivery.duplicate-0">drawing</a>' in examples.group(0)
    assert '<h4 id="lineage-delivery.duplicate-0">' in document
