"""The deterministic numeric check: what counts as a quantity, canonical values, units, ranges,
identifiers, and when a claim quantity is present in a passage."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest.normalize import normalize_text
from citegate_assets.lib.support.numbers import Quantity, extract_quantities, missing_quantities


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
        # a sign is part of the quantity; "+" is the positive value
        ("-5 degrees", [("-5", None)]),
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
    # the texts arrive normalized: an en dash is "-" by then; a leading minus sign is still a minus
    assert vu(normalize_text("3\u20135 business days")) == [("3", None), ("5", None)]
    assert vu(normalize_text("\u221210 \u2014 20")) == [("-10", None), ("20", None)]


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


# ------------------------------------------------------------- ranges join only like quantities


@pytest.mark.parametrize(
    "text,expected",
    [
        # a growth rate and an amount are two quantities, not a range: the scale stays on the amount
        ("Revenue grew 12% to $4.5 million", [("12", "%"), ("4500000", "USD")]),
        ("Revenue grew 12 percent to 4.5 million dollars", [("12", "%"), ("4500000", "USD")]),
        ("$4.5 million - 12%", [("4500000", "USD"), ("12", "%")]),
        ("$4.5bn-12%", [("4500000000", "USD"), ("12", "%")]),  # the hyphen after an amount is not an identifier's
        ("between 12% and \u20ac4.5 million", [("12", "%"), ("4500000", "EUR")]),
        ("12% to 4.5 million users", [("12", "%"), ("4500000", None)]),
        ("3 million to 12%", [("3000000", None), ("12", "%")]),  # a percentage takes no multiplier
        ("$10 to \u20ac20", [("10", "USD"), ("20", "EUR")]),  # other currencies: not a range
        # like quantities still make a range that shares the unit or multiplier written once
        ("$3 to 5 million", [("3000000", "USD"), ("5000000", "USD")]),
        ("3-5 million", [("3000000", None), ("5000000", None)]),
        ("3 to 4.5 million dollars", [("3000000", "USD"), ("4500000", "USD")]),
        ("$4.5 million-$5 million", [("4500000", "USD"), ("5000000", "USD")]),
        ("12 to 15%", [("12", "%"), ("15", "%")]),
        ("12% - 15%", [("12", "%"), ("15", "%")]),
    ],
)
def test_ranges_join_only_like_quantities(text, expected):
    assert vu(text) == expected


def test_growth_rate_and_amount_regression():
    # a regression: "12% to $4.5 million" was one range, the scale applied to both ends (12000000 %)
    claim = "Revenue grew 12% to $4.5 million"
    for passage in (
        "In fiscal 2025 revenue grew 12% to $4.5 million, the annual report says.",
        "Revenue grew 12%, to $4.5 million.",
        "Revenue reached $4.5 million after it grew 12%.",
        "Margins went from 9% to 12% to $4.5 million",  # the passage pairs 9%-12%, the claim's 12% is still there
    ):
        assert missing_quantities(claim, passage) == [], passage
    assert [(q.value, q.unit) for q in missing_quantities(claim, "Revenue grew 12% to $4.6 million.")] == [
        ("4500000", "USD")
    ]
    assert [(q.value, q.unit) for q in missing_quantities(claim, "Revenue grew 15% to $4.5 million.")] == [("12", "%")]


# Property tests over phrasings of "a percentage and a currency amount with a scale word".
FAST = settings(max_examples=200, deadline=None, database=None)  # no .hypothesis folder written into the tree

_SCALES = [
    (" thousand", 3),
    (" million", 6),
    (" Million", 6),
    (" billion", 9),
    ("k", 3),
    ("K", 3),
    (" mn", 6),
    ("mn", 6),
    (" bn", 9),
    ("bn", 9),
]
_PREFIXES = [
    ("$", "USD"),
    ("US$", "USD"),
    ("USD ", "USD"),
    ("\u20ac", "EUR"),
    ("EUR ", "EUR"),
    ("\u00a3", "GBP"),
    ("GBP", "GBP"),
]
_SUFFIXES = [
    (" dollars", "USD"),
    (" US dollars", "USD"),
    (" USD", "USD"),
    (" euros", "EUR"),
    (" EUR", "EUR"),
    (" pounds sterling", "GBP"),
    (" GBP", "GBP"),
]
_PERCENTS = ["%", " %", " percent", " per cent", " Percent"]
_SEPARATORS = [" to ", "-", " - ", "\u2013", " \u2013 ", " \u2014 ", " through ", " and ", " TO "]
_LEADS = ["Revenue grew ", "Growth was ", "", "Up ", "between ", "The figures were "]
_TRAILS = ["", ".", " last year.", ", the report says.", " in the year.", " (unaudited)."]
# surrounding text for a verbatim quote: may hold other numbers and ranges right next to the claim
_BEFORE = [
    "",
    "In 2025, ",
    "Q3 update: ",
    "Margins went from 9% to ",
    "Costs rose from $3 million to ",
    "It reported 3 - ",
    "See kb-0042#c3. ",
    "Staff grew 10-20 seats; ",
    "between ",
]
_AFTER = [
    "",
    " Staff grew 10-20 seats.",
    ", up from $4 million in 2024.",
    " to $5 million by 2026.",
    "-15%",
    " - 3 to 5 million users.",
    "; margins were 8-9%.",
]


def _canon(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@st.composite
def _number(draw, max_whole: int) -> tuple[str, Decimal]:
    whole = draw(st.integers(1, max_whole))
    decimals = draw(st.sampled_from([0, 0, 1, 2]))
    frac = draw(st.integers(0, 10**decimals - 1)) if decimals else 0
    text = f"{whole}.{frac:0{decimals}d}" if decimals else str(whole)
    return text, Decimal(text)


@st.composite
def _percent(draw) -> tuple[str, tuple[str, str]]:
    text, value = draw(_number(99))
    return text + draw(st.sampled_from(_PERCENTS)), (_canon(value), "%")


@st.composite
def _amount(draw) -> tuple[str, tuple[str, str]]:
    number, value = draw(_number(999))
    scale, exponent = draw(st.sampled_from(_SCALES))
    if draw(st.booleans()):
        prefix, unit = draw(st.sampled_from(_PREFIXES + [("$", "USD")]))
        if draw(st.booleans()):
            scale, exponent = "M", 6  # "$5M": M only on money
        text = prefix + number + scale
    else:
        suffix, unit = draw(st.sampled_from(_SUFFIXES))
        text = number + scale + suffix
    return text, (_canon(value * 10**exponent), unit)


@st.composite
def _claim(draw, percent=_percent(), amount=_amount()) -> tuple[str, list, str, str]:
    """(claim, its quantities in order, the percentage as written, the amount as written)"""
    pct, pct_q = draw(percent)
    amt, amt_q = draw(amount)
    first, second = (pct, amt) if draw(st.booleans()) else (amt, pct)
    lead, trail = draw(st.sampled_from(_LEADS)), draw(st.sampled_from(_TRAILS))
    claim = lead + first + draw(st.sampled_from(_SEPARATORS)) + second + trail
    expected = [pct_q, amt_q] if first is pct else [amt_q, pct_q]
    return claim, expected, pct, amt


@FAST
@given(_claim(), st.sampled_from(_BEFORE), st.sampled_from(_AFTER))
@example(
    ("Revenue grew 12% to $4.5 million", [("12", "%"), ("4500000", "USD")], "12%", "$4.5 million"),
    "In fiscal 2025 revenue grew ",
    " in the year.",
)
@example(
    ("12% to $4.5 million", [("12", "%"), ("4500000", "USD")], "12%", "$4.5 million"), "Margins went from 9% to ", ""
)
def test_percentage_and_amount_quoted_verbatim_never_mismatch(case, before, after):
    claim, expected, _, _ = case
    claim_n = normalize_text(claim)
    passage = normalize_text(before + claim + after)
    assert vu(claim_n) == expected  # two quantities, each with its own unit and scale
    assert missing_quantities(claim_n, passage) == []


# a different amount: another number, another scale word, or another currency
_OTHER_AMOUNT = st.one_of(
    _amount(),
    st.builds(
        lambda n, s: (f"${n[0]}{s[0]}", (_canon(n[1] * 10 ** s[1]), "USD")), _number(999), st.sampled_from(_SCALES)
    ),
)


@FAST
@given(
    _claim(),
    _OTHER_AMOUNT,
    st.sampled_from(["", "In 2025, ", "Staff grew 10-20 seats; "]),
    st.sampled_from(["", " last year.", " Staff grew 10-20 seats."]),
)
@example(
    ("Revenue grew 12% to $4.5 million", [("12", "%"), ("4500000", "USD")], "12%", "$4.5 million"),
    ("$4.6 million", ("4600000", "USD")),
    "",
    "",
)
@example(
    ("Revenue grew 12% to $4.5 million", [("12", "%"), ("4500000", "USD")], "12%", "$4.5 million"),
    ("$4.5 billion", ("4500000000", "USD")),
    "",
    "",
)
@example(
    ("Revenue grew 12% to $4.5 million", [("12", "%"), ("4500000", "USD")], "12%", "$4.5 million"),
    ("\u20ac4.5 million", ("4500000", "EUR")),
    "",
    "",
)
def test_percentage_and_amount_with_another_amount_is_a_mismatch(case, other, before, after):
    claim, expected, pct, amt = case
    other_text, other_q = other
    amt_q = next(q for q in expected if q[1] != "%")
    assume(other_q != amt_q)
    passage = normalize_text(before + claim.replace(amt, other_text, 1) + after)
    got = [(q.value, q.unit) for q in missing_quantities(normalize_text(claim), passage)]
    assert got == [amt_q]


@FAST
@given(_claim(), _percent())
def test_percentage_and_amount_with_another_percentage_is_a_mismatch(case, other):
    claim, expected, pct, amt = case
    other_text, other_q = other
    pct_q = next(q for q in expected if q[1] == "%")
    assume(other_q != pct_q)
    passage = normalize_text("In 2025, " + claim.replace(pct, other_text, 1))
    got = [(q.value, q.unit) for q in missing_quantities(normalize_text(claim), passage)]
    assert got == [pct_q]


# ------------------------------------------------------------------------------------------------- signs

MINUSES = ["-", "\u2212", "\u2013"]  # hyphen-minus, minus sign, en dash used as a minus


@pytest.mark.parametrize(
    "text,expected",
    [
        ("\u221220 \u00b0C", [("-20", None)]),
        ("-20 \u00b0C", [("-20", None)]),
        ("\u201320 \u00b0C", [("-20", None)]),
        ("-500 USD", [("-500", "USD")]),
        ("-$500", [("-500", "USD")]),
        ("$-500", [("-500", "USD")]),
        ("USD -1,200.50", [("-1200.5", "USD")]),
        ("returned -5.6% over the year", [("-5.6", "%")]),
        ("a -.5 change", [("-0.5", None)]),
        ("x=-5, y=(-3), [-2]", [("-5", None), ("-3", None), ("-2", None)]),
        ("-0", [("0", None)]),  # minus zero is zero
        ("from -10 to -5", [("-10", None), ("-5", None)]),  # a range keeps each end's sign
        ("between -5 and 5", [("-5", None), ("5", None)]),
        ("from -3.5% to 2%", [("-3.5", "%"), ("2", "%")]),
        ("Q3 -20%", [("-20", "%")]),  # after an identifier (no amount), a dash before a number is its minus
    ],
)
def test_signs_are_part_of_the_quantity(text, expected):
    assert vu(text) == expected
    assert vu(normalize_text(text)) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        # ranges, with any dash and spacing
        ("10-20", [("10", None), ("20", None)]),
        ("10\u201320", [("10", None), ("20", None)]),
        ("10 \u2013 20", [("10", None), ("20", None)]),
        ("10 - 20", [("10", None), ("20", None)]),
        ("10 -20", [("10", None), ("20", None)]),  # a dash after an amount joins a range
        ("5%-10%", [("5", "%"), ("10", "%")]),
        ("$10-$20", [("10", "USD"), ("20", "USD")]),
        ("pages 3--5", [("3", None), ("5", None)]),
        # dates, phone numbers, identifiers
        ("2024-01-05", [("2024", None), ("1", None), ("5", None)]),
        ("on 2024\u201301\u201305", [("2024", None), ("1", None), ("5", None)]),
        ("call 555-1234", [("555", None), ("1234", None)]),
        ("+1-555-123-4567", [("1", None), ("555", None), ("123", None), ("4567", None)]),
        ("revenue desk: (555) 123-4567", [("555", None), ("123", None), ("4567", None)]),
        ("ISO-9001", []),
        ("COVID-19", []),
        ("ISO\u20139001 and COVID\u221219", []),
        ("NW-200", []),
        ("kb-0042#c3", []),
        ("v-2", []),
        # a tolerance is not a negative
        ("+/-5%", [("5", "%")]),
        # a dash after a closing bracket joins, and the em dash is punctuation
        ("(2019)-2020", [("2019", None), ("2020", None)]),
        ("the total \u2014 20 units", [("20", None)]),
    ],
)
def test_what_is_not_a_negative(text, expected):
    assert vu(normalize_text(text)) == expected
    assert not [value for value, _ in vu(text) if value.startswith("-")]  # nor before normalization


@pytest.mark.parametrize(
    "text,expected",
    [
        # an amount with a currency in parentheses: negative wherever it is
        ("($500)", [("-500", "USD")]),
        ("(USD 1,200)", [("-1200", "USD")]),
        ("(\u20ac45.50)", [("-45.5", "EUR")]),
        ("$(500)", [("-500", "USD")]),  # the currency outside, as accounts write it
        ("\u00a3 (1,200)", [("-1200", "GBP")]),
        # a bare amount in parentheses: negative in a financial text (a currency amount, or an accounting word)
        ("Net loss was (500).", [("-500", None)]),
        ("Operating income 1,200 (300) 900", [("1200", None), ("-300", None), ("900", None)]),
        ("Cash $2,000, change (1,250.50)", [("2000", "USD"), ("-1250.5", None)]),
        # ... and not elsewhere, nor a note or list marker, a year, a percentage or a phone area code
        ("The room holds (500) people.", [("500", None)]),
        ("see note (2) of the income statement", [("2", None)]),
        ("Smith (2019) on income", [("2019", None)]),
        ("revenue grew (5%)", [("5", "%")]),
        ("revenue desk (555) 123-4567", [("555", None), ("123", None), ("4567", None)]),
    ],
)
def test_parentheses_are_negative_amounts_in_financial_text(text, expected):
    assert vu(text) == expected


@pytest.mark.parametrize(
    "claim,passage",
    [
        ("It was 20 \u00b0C.", "It was \u221220 \u00b0C."),
        ("It was 20 \u00b0C.", "It was -20 \u00b0C."),
        ("It was 20 \u00b0C.", "It was \u201320 \u00b0C."),
        ("It was -20 \u00b0C.", "It was 20 \u00b0C."),
        ("It lost 500 USD.", "It lost -500 USD."),
        ("It made $500.", "Net result ($500)."),
        ("Net loss was (500).", "Net loss was 500, revenue $2,000."),
        ("The change was -3%.", "The change was 3%."),
    ],
)
def test_a_sign_difference_is_a_mismatch(claim, passage):
    assert missing_quantities(claim, passage) != []
    assert missing_quantities(normalize_text(claim), normalize_text(passage)) != []


@pytest.mark.parametrize(
    "claim,passage",
    [
        ("It was -20 \u00b0C.", "It was \u221220 \u00b0C."),
        ("It was \u221220 \u00b0C.", "It was \u201320 \u00b0C."),
        ("Net loss of -$500.", "Net loss ($500)."),
        ("Net loss of -500.", "Net loss was (500) on revenue of $2,000."),
        ("Refunds take 3-5 days.", "Refunds take 3\u20135 days."),
        ("Signed on 2024-01-05.", "Signed on 2024\u201301\u201305."),
        ("ISO-9001 since 2019.", "Certified ISO 9001 in 2019."),
    ],
)
def test_the_same_sign_matches(claim, passage):
    assert missing_quantities(claim, passage) == []
    assert missing_quantities(normalize_text(claim), normalize_text(passage)) == []


_NUMBERS = st.one_of(
    st.integers(min_value=1, max_value=10**9).map(str),
    st.builds(lambda w, f: f"{w}.{f}", st.integers(0, 10**6), st.integers(1, 99)),
    st.integers(min_value=1000, max_value=10**9).map(lambda n: f"{n:,}"),
)
_UNITS_AROUND = st.sampled_from([("", ""), ("$", ""), ("", "%"), ("", " USD"), ("", " \u00b0C"), ("EUR ", "")])
_CONTEXT = st.sampled_from([("", ""), ("It was ", "."), ("In 2024 the value was ", ", down from 7."), ("(", ")")])


@FAST
@given(_NUMBERS, _UNITS_AROUND, _CONTEXT, st.sampled_from(MINUSES), st.sampled_from(MINUSES), st.booleans())
def test_a_number_and_its_negative_never_match_and_minuses_agree(number, unit, context, minus, other, norm):
    assume(float(number.replace(",", "")) != 0)
    (pre, suf), (lead, trail) = unit, context
    assume(lead != "(" or not (pre or suf.strip() == "USD"))  # "($5)" is already negative: accounts' parentheses
    plain = f"{lead}{pre}{number}{suf}{trail}"
    negative = f"{lead}{minus}{pre}{number}{suf}{trail}"
    other_negative = f"{lead}{other}{pre}{number}{suf}{trail}"
    if norm:
        plain, negative, other_negative = map(normalize_text, (plain, negative, other_negative))
    assert missing_quantities(plain, negative) != []  # x against -x
    assert missing_quantities(negative, plain) != []  # -x against x
    assert missing_quantities(negative, other_negative) == []  # -x against \u2212x or \u2013x
    [q] = [q for q in extract_quantities(negative) if q.value.lstrip("-") != "2024" and q.value != "7"]
    assert q.value.startswith("-")
