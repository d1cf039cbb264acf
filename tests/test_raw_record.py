"""A record kept as it was: text where it is text, bytes named where not, bounded in size."""

from eoschaos.contract.history import RAW_TEXT_MAX, raw_record, raw_text


def test_utf8_stays_text_and_a_missing_part_stays_none():
    record = raw_record(b"k\xc3\xa9", None, [("h", b"<b>")])
    assert record == {"key": "ké", "value": None, "headers": [["h", "<b>"]]}


def test_bytes_that_are_not_utf8_are_shown_escaped():
    assert raw_text(b"ok\xff\x00") == "ok\\xff\x00"


def test_a_long_value_is_shortened_and_says_its_full_length():
    text = raw_text(b"x" * 5000)
    assert text == "x" * RAW_TEXT_MAX + "… (5000 bytes)"
