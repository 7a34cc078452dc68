"""The deterministic numeric check: what counts as a quantity, canonical values, units, ranges,
identifiers, and when a claim quantity is present in a passage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citegate_assets.lib.normalize import normalize_text
from citegate_assets.lib.numbers import Quantity, extract_quantities, missing_quantities


def vu(text: str) -> list[tuple[str, str | None]]:
    return [(q.value, q.unit) for q in extract_quantities(text)]


@pytest.mark.parametrize(
    "text,expected",
    [
        # percentages, all spellings the same
        ("12%", [("12", "%")]),
        ("12 %", [("12", "%")]),
        ("12 percent", [("12", "%")]),
        ("12 per cent", [("12", "%")]),
        ("12 Percent off", [("12", "%")]),
        ("99.95% uptime", [("99.95", "%")]),
        # decimals and canonical values
        ("12.5", [("12.5", None)]),
        ("12.50", [("12.5", None)]),
        ("3.0 hours", [("3", None)]),
        ("0.50", [("0.5", None)]),
        (".5", [("0.5", None)]),
        ("0042", [("42", None)]),
        ("0", [("0", None)]),
        # thousands separators
        ("1,200 seats", [("1200", None)]),
        ("1,200.50", [("1200.5", None)]),
        ("1,000,000", [("1000000", None)]),
        # currency prefixes and suffixes
        ("$1,200", [("1200", "USD")]),
        ("US$5", [("5", "USD")]),
        ("US$ 5", [("5", "USD")]),
        ("$ 5", [("5", "USD")]),
        ("€450", [("450", "EUR")]),
        ("£3", [("3", "GBP")]),
        ("USD 1,200", [("1200", "USD")]),
        ("1200 USD", [("1200", "USD")]),
        ("1,200 dollars", [("1200", "USD")]),
        ("1,200 US dollars", [("1200", "USD")]),
        ("450 euros", [("450", "EUR")]),
        ("3 pounds sterling", [("3", "GBP")]),
        ("3 pounds", [("3", None)]),  # maybe a weight
        ("$1,200.00", [("1200", "USD")]),
        # multipliers
        ("$1.2 million", [("1200000", "USD")]),
        ("5k", [("5000", None)]),
        ("$5M", [("5000000", "USD")]),
        ("2 billion", [("2000000000", None)]),
        # ranges give both ends, sharing a unit or multiplier written once
        ("3-5", [("3", None), ("5", None)]),
        ("3 - 5", [("3", None), ("5", None)]),
        ("3 to 5 business days", [("3", None), ("5", None)]),
        ("between 3 and 5", [("3", None), ("5", None)]),
        ("10-20 seats", [("10", None), ("20", None)]),
        ("10-20%", [("10", "%"), ("20", "%")]),
        ("$10-$20", [("10", "USD"), ("20", "USD")]),
        ("$10-20", [("10", "USD"), ("20", "USD")]),
        ("1-2 million", [("1000000", None), ("2000000", None)]),
        # signs are ignored
        ("-5 degrees", [("5", None)]),
        ("+10 seats", [("10", None)]),
        # years and plain integers count
        ("in 2026.", [("2026", None)]),
        ("24/7", [("24", None), ("7", None)]),
        ("11:07", [("11", None), ("7", None)]),
        # ISO dates are three numbers, not a range
        ("2026-03-15", [("2026", None), ("3", None), ("15", None)]),
        ("March 15, 2026", [("15", None), ("2026", None)]),
        # version strings keep their dots
        ("version 4.2.1", [("4.2.1", None)]),
        # number words are out of scope
        ("three seats, twice a year", []),
        ("", []),
    ],
)
def test_extract(text, expected):
    assert vu(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "kb-0042#c3",  # a chunk id
        "NW-200 Gateway",  # a product code
        "AES-256",
        "Q3 results",
        "ISO27001",
        "2FA and 3c",
        "SPRING25",
        "c3",
        "#3",
        "v1.2",
        "12_b",
        "5M users",  # "M" is a multiplier only on money
    ],
)
def test_identifiers_are_not_quantities(text):
    assert extract_quantities(text) == []


@pytest.mark.parametrize(
    "text,expected",
    [
        ("the 1st and 3rd", [("1", None), ("3", None)]),  # ordinals keep their number
        ("10TB", [("10", None)]),
        ("24h", [("24", None)]),
        ("500ms", [("500", None)]),
        ("5x faster", [("5", None)]),
        ("the 1990s", [("1990", None)]),
        ("9am", [("9", None)]),
        ("cite kb-0042#c3 for 30 days", [("30", None)]),  # the id is skipped, the sentence's number is not
        ("NW-200 ships in 3-5 days", [("3", None), ("5", None)]),
    ],
)
def test_glued_units_and_identifiers_next_to_numbers(text, expected):
    assert vu(text) == expected


def test_text_is_as_written_and_a_range_keeps_its_whole_text():
    [a] = extract_quantities("costs $1,200.50 a year")
    assert a == Quantity("1200.5", "USD", "$1,200.50")
    lo, hi = extract_quantities("takes 3 to 5 days")
    assert (lo.text, hi.text) == ("3 to 5", "3 to 5")
    [pct] = extract_quantities("a 12 per cent fee")
    assert pct.text == "12 per cent"


def test_normalized_dashes_make_ranges():
    # the texts arrive normalized: an en dash is "-" by then
    assert vu(normalize_text("3\u20135 business days")) == [("3", None), ("5", None)]
    assert vu(normalize_text("\u221210 \u2014 20")) == [("10", None), ("20", None)]


# ------------------------------------------------------------------------------- missing_quantities


@pytest.mark.parametrize(
    "claim,passage",
    [
        ("The discount is 12%.", "A 12 percent discount applies."),
        ("The discount is 12 per cent.", "A 12% discount applies."),
        ("It costs $1,200.", "It costs 1200 USD."),
        ("It costs 1,200 dollars.", "It costs $1,200.00."),
        ("Fees are €450.", "Fees are 450 euros."),
        ("Refunds take 3 to 5 days.", "Refunds take 3-5 days."),
        ("Refunds take 3-5 days.", "Refunds take between 3 and 5 days."),
        ("The rate is 12.50.", "The rate is 12.5."),
        ("We have 1200 seats.", "We have 1,200 seats."),
        ("The plan costs 49.", "The plan costs $49."),  # a unitless claim number matches any unit
        ("SLA is 99.9", "SLA is 99.9%"),
        ("Signed in 2025.", "Signed on 2025-06-01."),
        ("No numbers here.", "Nor here."),
        ("Ten seats.", "Eleven seats."),  # number words are out of scope: nothing to compare
        ("Cite kb-0042#c3.", "Cite kb-0043#c3."),  # identifiers are not quantities (the judge compares them as words)
    ],
)
def test_present(claim, passage):
    assert missing_quantities(claim, passage) == []


@pytest.mark.parametrize(
    "claim,passage,missing",
    [
        ("The discount is 15%.", "The discount is 12%.", [("15", "%")]),
        ("It costs $1,250.", "It costs $1,200.", [("1250", "USD")]),
        ("It costs €1,200.", "It costs $1,200.", [("1200", "EUR")]),  # same value, other currency
        ("It costs $49.", "It costs 49 per seat.", [("49", "USD")]),  # a claim unit needs the same unit
        ("A 12% fee.", "A fee of 12 seats.", [("12", "%")]),
        ("Refunds take 3-7 days.", "Refunds take 3-5 days.", [("7", None)]),
        ("Revenue grew 12% and margins 3%.", "Revenue grew 12%.", [("3", "%")]),
        ("Valid until 2026-03-15.", "Valid until March 15, 2026.", [("3", None)]),  # documented: conservative
        ("The 12.5% rate.", "The 12.05% rate.", [("12.5", "%")]),
    ],
)
def test_missing(claim, passage, missing):
    assert [(q.value, q.unit) for q in missing_quantities(claim, passage)] == missing


def test_missing_reports_each_value_once_and_keeps_the_written_text():
    got = missing_quantities("It is 15% now and 15% later, or $7.", "It is 12%.")
    assert [(q.value, q.unit, q.text) for q in got] == [("15", "%", "15%"), ("7", "USD", "$7")]


@given(st.integers(min_value=0, max_value=10**12))
def test_thousands_separators_roundtrip(n):
    assert vu(f"{n:,}") == [(str(n), None)]
    assert vu(f"${n:,}") == [(str(n), "USD")]
    assert missing_quantities(f"costs {n:,} dollars", f"costs ${n}") == []


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=99))
def test_decimals_are_canonical(whole, cents):
    value = vu(f"{whole}.{cents:02d}")[0][0]
    assert not value.endswith("0") or "." not in value
    assert float(value) == pytest.approx(whole + cents / 100)
    assert missing_quantities(f"{whole}.{cents:02d}0", f"{whole}.{cents:02d}") == []


@given(st.integers(min_value=1, max_value=999), st.integers(min_value=1, max_value=999))
def test_ranges_give_both_ends(a, b):
    for sep in ("-", " - ", " to "):
        assert vu(f"{a}{sep}{b} seats") == [(str(a), None), (str(b), None)]
