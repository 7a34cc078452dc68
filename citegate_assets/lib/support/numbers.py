"""The deterministic numeric check of the support gate: every quantity a claim states must appear in
the cited passage, with the same value and (when the claim gives one) the same unit.

The texts are normalized (`normalize_text`: dashes and the minus sign folded to "-", whitespace collapsed):
ranges and identifiers are read on "-". A minus is read on "-", the minus sign and the en dash alike, normalized
or not.

What counts as a quantity
- Integers, years and decimals: "7", "2026", "12.5", ".5". Values are canonical decimal strings:
  no thousands separators, no leading zeros, no trailing zeros after the point ("12.50" -> "12.5",
  "0042" -> "42", "3.0" -> "3").
- Thousands separators: "1,200" and "1,200.50" (comma groups of exactly three digits).
- Percentages: "12%", "12 %", "12 percent", "12 per cent" all have unit "%".
- Currency: prefixes "$", "US$", "USD", "€", "EUR", "£", "GBP" (with or without a space) and
  suffixes "USD", "EUR", "GBP", "dollar(s)", "US dollar(s)", "euro(s)", "pound(s) sterling" give
  the units "USD", "EUR", "GBP". A bare "pounds" gets no unit (it may be a weight).
- Multipliers: "thousand", "million", "billion", "k", "mn", "bn" (and "M" glued to a currency
  amount, "$5M") scale the value: "$1.2 million" -> "1200000" USD, "5k" -> "5000".
- Ranges: "3-5", "3 - 5", "3 to 5", "between 3 and 5", "$10-$20", "10-20 seats" give both ends as
  separate quantities. A unit or multiplier written on one end only is shared by both ("10-20%" ->
  10 % and 20 %; "$10-20" -> 10 USD and 20 USD; "1-2 million" -> 1000000 and 2000000). Each end's
  `text` is the whole range as written.
- A range joins only like quantities: both ends with the same unit ("12-15%", "$10-$20"), both
  plain numbers ("3-5 million"), or a plain end that takes the unit written once on the outside of
  the range: a prefix on the first end ("$3 to 5 million") or a suffix on the last ("10-20%"). A
  percentage never joins an end with a multiplier. Anything else is two separate quantities that keep
  their own units and multipliers: "grew 12% to $4.5 million" -> 12 % and 4500000 USD (not a range).
- ISO dates "2026-03-15" give three plain numbers (2026, 3, 15), not a range. Month names are words,
  so "March 15, 2026" gives only 15 and 2026: a claim dated "2026-03-15" checked against a passage
  saying "March 15, 2026" reports "3" missing. Deliberately conservative: never a false pass.
- Version strings with two or more dots ("4.2.1") are one quantity whose value keeps its dots.
- Times "11:07" give 11 and 7.
- Signs are part of a quantity: "-20", "−20" (minus sign) and "–20" (an en dash used as a minus) are
  all -20, and "-20" never matches "20" (nor "20" "-20"); "+20" is 20, and -0 is 0. A dash is a minus only
  when it stands right before the number (or its currency: "-$5", "$-5", "USD -5") and does not join it to
  what comes before: after a letter, digit, '#', '_', '.', '+', '/', a closing bracket or another dash it is
  an identifier's or a range's ("COVID-19", "ISO-9001", "10-20", "10–20", "2024-01-05", "555-1234",
  "+/-5"), and after another amount, even past spaces, it is a range's ("10 -20", "5%-10%").
- Accounting negatives: an amount in parentheses, "($500)", "(USD 1,200)", "$(500)", is negative when it
  carries a currency; a bare "(500)" or "(1,200.50)" is negative in a financial text only (one that holds
  a currency amount, or an accounting word such as revenue, income, loss, profit, expenses, earnings,
  EBITDA, deficit, liabilities, dividend, cash flow, fiscal, balance sheet), and never when it reads as a
  note or list marker (a plain integer below 10), a year (1900-2099 as four plain digits), a phone number's
  area code ("(555) 123-4567"), or a percentage ("(5%)").

What does not count
- Number words ("three", "a dozen") are out of scope: neither extracted nor matched.
- Digits that belong to an identifier are ignored: digits preceded by a letter, a digit, '#', '_',
  or by a hyphen that follows a letter ("kb-0042#c3", "NW-200", "AES-256", "Q3", "ISO27001"), and
  digits followed directly by '#', '_' or letters ("2FA", "3c", "0042#c3"), except ordinal suffixes
  ("1st", "3rd"), the multipliers above and short unit abbreviations ("10TB", "24h", "500ms", "5x",
  "1990s", "9am"), which keep the number. Such identifiers are still compared as words by the
  heuristic judge's lexical check.

A claim quantity is present in the passage when the passage has a quantity with the same value and
the same unit; a claim quantity without a unit is present when the passage has that value with any
unit (or none). A claim quantity with a unit is NOT matched by a bare number in the passage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Quantity", "extract_quantities", "missing_quantities"]


@dataclass(frozen=True)
class Quantity:
    value: str  # canonical decimal string with its sign: "1200", "12.5", "0.5", "-20"
    unit: str | None  # "%", "USD", "EUR", "GBP", or None
    text: str  # as written (for a range end: the whole range)


# a minus: hyphen-minus, minus sign, en dash, small and fullwidth hyphen-minus (not the em dash: punctuation)
SIGNS = "-\u2212\u2013\ufe63\uff0d"
# after one of these a dash joins what comes before to the number (an identifier, a range, "+/-"): not a minus
_NOT_BEFORE_SIGN = "#_.+/)]}" + SIGNS + "\u2010\u2011\u2012\u2014\u2015"
# One amount: optional currency prefix (and a minus after it: "$-5"), a number, an optional multiplier, an optional
# unit suffix.
_AMOUNT = re.compile(
    r"(?P<pre>(?:US\$|\$|€|£|USD|EUR|GBP) ?)?"
    rf"(?(pre)(?P<inner>(?<=[$€£ ])[{SIGNS}])?)"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)+|\d+|\.\d+)"
    r"(?P<mult> ?(?i:thousand|million|billion|mn|bn)(?![A-Za-z0-9])|[kK](?![A-Za-z0-9])|M(?![A-Za-z0-9]))?"
    r"(?P<suf> ?%| ?(?i:percent|per ?cent)(?![A-Za-z])| ?(?:USD|EUR|GBP)(?![A-Za-z])"
    r"| (?i:(?:us )?dollars?|euros?|pounds? sterling)(?![A-Za-z]))?"
)
# Where an amount can start (a currency prefix or a number, as _AMOUNT begins): searching for these first and
# matching _AMOUNT only there finds the same leftmost amounts several times faster (_AMOUNT begins with an
# optional group, which re cannot skip by); a sentence's full stop or capital letter is never tried.
_AMOUNT_START = re.compile(r"[0-9]|\.\d|[$€£]|US\$|USD|EUR|GBP")  # [0-9]: an amount starts at an ASCII digit
_ISO_DATE = re.compile(r"(?<![A-Za-z0-9#_.\-])(\d{4})-(\d{2})-(\d{2})(?![A-Za-z0-9#_\-]|\.\d)")
_ANY_DIGIT = re.compile(r"\d")
_RANGE_SEP = re.compile(r" ?- ?| to | and ", re.IGNORECASE)
# an accounting word: a bare amount in parentheses in such a text is negative
_FINANCIAL = re.compile(
    r"(?<![A-Za-z])(?i:revenues?|income|loss(?:es)?|profits?|expenses?|earnings|ebitda|deficits?|liabilit(?:y|ies)"
    r"|dividends?|cash flows?|fiscal|balance sheets?)(?![A-Za-z])"
)
_CURRENCIES = ("USD", "EUR", "GBP")
_SYMBOL_BEFORE_PAREN = re.compile(r"(?:US\$|\$|€|£) ?\($")
_PHONE_REST = re.compile(rf" ?\d{{3}}[{SIGNS}. ]\d{{4}}(?!\d)")  # what follows an area code: "(555) 123-4567"
# Letters allowed right after the digits without making the token an identifier.
_GLUED_OK = re.compile(r"(?i:st|nd|rd|th|tb|gb|mb|kb|pb|ms|s|h|hr|hrs|min|mins|x|d|y|yr|yrs|am|pm)(?![A-Za-z0-9])")
_EXPONENTS = {"thousand": 3, "k": 3, "million": 6, "m": 6, "mn": 6, "billion": 9, "bn": 9}
_UNITS = {
    "%": "%",
    "percent": "%",
    "per cent": "%",
    "$": "USD",
    "us$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "us dollar": "USD",
    "us dollars": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "pound sterling": "GBP",
    "pounds sterling": "GBP",
}


@dataclass
class _Amount:
    start: int
    end: int
    number: str
    exponent: int | None  # None: no multiplier written
    unit: str | None
    prefixed: bool = False  # the unit was written before the number ("$10"), not after ("10%")
    negative: bool = False
    bracketed: bool = False  # written in parentheses, "(500)": negative in a financial text (see _accounting)


def _canonical(number: str, exponent: int = 0, negative: bool = False) -> str:
    """'1,200.50' -> '1200.5'; '0042' -> '42'; '.5' -> '0.5'; scaled by 10**exponent; '-' before a negative value
    other than 0."""
    digits = number.replace(",", "")
    if digits.count(".") > 1:  # a version string: keep its dots, strip leading zeros per part
        return ".".join(part.lstrip("0") or "0" for part in digits.split("."))
    whole, _, frac = digits.partition(".")
    if exponent:
        frac = frac.ljust(exponent, "0")
        whole, frac = whole + frac[:exponent], frac[exponent:]
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    value = f"{whole}.{frac}" if frac else whole
    return "-" + value if negative and value != "0" else value


def _glued_before(text: str, start: int) -> bool:
    """The token starting at `start` continues an identifier: 'c3', '#3', 'NW-200', 'v1.2'."""
    if start == 0:
        return False
    before = text[start - 1]
    if before.isalnum() or before in "#_":
        return True
    if before in ".-" and start >= 2 and (text[start - 2].isalnum() or text[start - 2] in "#_"):
        # 'NW-200', 'kb-0042', 'v1.2' (a digit before a hyphen is a range, handled by the caller
        # because ranges are matched from their first end)
        return before == "." or not text[start - 2].isdigit()
    return False


def _glued_after(text: str, end: int) -> bool:
    """The token ending at `end` continues into an identifier: '2FA', '3c', '0042#c3', '12_b'."""
    if end >= len(text):
        return False
    after = text[end]
    if after in "#_" or after.isdigit():
        return True
    if after.isalpha():
        return _GLUED_OK.match(text, end) is None
    return False


def _skip_token(text: str, pos: int) -> int:
    while pos < len(text) and (text[pos].isalnum() or text[pos] in "#_-."):
        if text[pos] == "." and not (pos + 1 < len(text) and text[pos + 1].isalnum()):
            break
        pos += 1
    return pos


def _search_amount(text: str, pos: int) -> re.Match | None:
    """_AMOUNT.search(text, pos), by trying only where an amount can start."""
    while (c := _AMOUNT_START.search(text, pos)) is not None:
        m = _AMOUNT.match(text, c.start())
        if m is not None:
            return m
        pos = c.start() + 1
    return None


def _amounts(text: str) -> list[_Amount]:
    found: list[_Amount] = []
    pos = 0
    while (m := _search_amount(text, pos)) is not None:
        start = m.start()
        # a hyphen right after an amount is a range separator ("$4.5 million-$5 million", "5k-12%"),
        # not an identifier's hyphen ("NW-200")
        after_amount = bool(found) and found[-1].end == start - 1 and text[start - 1] == "-"
        if not after_amount and _glued_before(text, start):
            pos = _skip_token(text, m.end("num"))
            continue
        pre, mult, suf = m.group("pre"), m.group("mult"), m.group("suf")
        if mult and mult == "M" and not pre:
            mult, suf = None, None  # "5M" without money: not a multiplier we trust
        end = m.end("suf") if suf else (m.end("mult") if mult else m.end("num"))
        if not mult and not suf and _glued_after(text, end):
            pos = _skip_token(text, end)
            continue
        unit, prefixed = None, False
        for part, before in ((pre, True), (suf, False)):
            if part and unit is None:
                unit = _UNITS.get(" ".join(part.lower().split()))
                prefixed = unit is not None and before
        exponent = _EXPONENTS[mult.strip().lower()] if mult else None
        amount = _Amount(start, end, m.group("num"), exponent, unit, prefixed, negative=m.group("inner") is not None)
        if not amount.negative and _minus_before(text, start, found):
            amount.start, amount.negative = start - 1, True
        elif not amount.negative:
            _bracket(text, amount)
        found.append(amount)
        pos = max(end, start + 1)
    _accounting(text, found)
    return found


def _minus_before(text: str, start: int, found: list[_Amount]) -> bool:
    """The dash right before the amount at `start` is its minus sign: "-20", "(-3)", "x=-5", "−20". Not when
    it joins the amount to what comes before (an identifier, a range, a date, "+/-") or follows another amount,
    even past spaces ("10 -20" is a range)."""
    i = start - 1
    if i < 0 or text[i] not in SIGNS:
        return False
    if i == 0:
        return True
    before = text[i - 1]
    if before.isalnum() or before in _NOT_BEFORE_SIGN:
        return False
    j = i
    while j > 0 and text[j - 1].isspace():
        j -= 1
    return not (found and found[-1].end == j)


def _bracket(text: str, amount: _Amount) -> None:
    """An amount written in parentheses: "($500)", "(500)", and "$(500)" (the currency outside, as accounts
    write it), which takes the currency. Not a phone number's area code ("(555) 123-4567")."""
    if amount.end >= len(text) or text[amount.end] != ")" or amount.start == 0 or text[amount.start - 1] != "(":
        return
    if _PHONE_REST.match(text, amount.end + 1):
        return
    symbol = _SYMBOL_BEFORE_PAREN.search(text, max(0, amount.start - 5), amount.start)
    if symbol is not None and amount.unit is None:
        amount.unit = _UNITS.get(symbol.group(0).rstrip(" (").lower())
        amount.prefixed = True
        amount.start = symbol.start()
    else:
        amount.start -= 1
    amount.end += 1
    amount.bracketed = True


def _accounting(text: str, found: list[_Amount]) -> None:
    """Accounting negatives: a bracketed amount with a currency is negative; a bare one only in a financial text,
    and never a note marker (below 10), a year (1900-2099) or a percentage."""
    bracketed = [a for a in found if a.bracketed]
    if not bracketed:
        return
    financial = any(a.unit in _CURRENCIES for a in found) or _FINANCIAL.search(text) is not None
    for a in bracketed:
        if a.unit in _CURRENCIES:
            a.negative = True
        elif a.unit is None and financial and a.exponent is None and not _marker_or_year(a.number):
            a.negative = True


def _marker_or_year(number: str) -> bool:
    return number.isdigit() and (int(number) < 10 or (len(number) == 4 and 1900 <= int(number) <= 2099))


def _like(a: _Amount, b: _Amount) -> bool:
    """Whether `a` and `b` can be the two ends of one range: the same unit (or both none), or a unit
    written once on the outside ("$10-20", "10-20%") that the plain end shares. A percentage never
    takes a multiplier, so "12% to $4.5 million" or "3 million to 12%" are two quantities."""
    if a.unit == b.unit:
        like = True
    elif b.unit is None:
        like = a.prefixed
    elif a.unit is None:
        like = not b.prefixed
    else:
        like = False
    if like and (a.unit or b.unit) == "%" and (a.exponent is not None or b.exponent is not None):
        like = False
    return like


def extract_quantities(text: str) -> list[Quantity]:
    """Every quantity in `text`, in order of appearance (a range gives two)."""
    if _ANY_DIGIT.search(text) is None:
        return []
    dates = list(_ISO_DATE.finditer(text))
    masked = text
    for d in dates:  # blank the dates out (same length) so their parts are not read as a range
        masked = masked[: d.start()] + " " * (d.end() - d.start()) + masked[d.end() :]
    items: list[tuple[int, list[Quantity]]] = [
        (d.start(), [Quantity(_canonical(g), None, d.group(0)) for g in d.groups()]) for d in dates
    ]
    amounts = _amounts(masked)
    i = 0
    while i < len(amounts):
        a = amounts[i]
        b = amounts[i + 1] if i + 1 < len(amounts) else None
        sep = _RANGE_SEP.fullmatch(masked, a.end, b.start) if b is not None else None
        if sep is not None and sep.group(0).strip().lower() == "and":
            if not masked[: a.start].rstrip().lower().endswith("between"):
                sep = None
        if b is not None and sep is not None and _like(a, b):
            unit_a = a.unit or b.unit
            unit_b = b.unit or a.unit
            exp_a = a.exponent if a.exponent is not None else (b.exponent or 0)
            exp_b = b.exponent if b.exponent is not None else (a.exponent or 0)
            written = text[a.start : b.end]
            items.append(
                (
                    a.start,
                    [
                        Quantity(_canonical(a.number, exp_a, a.negative), unit_a, written),
                        Quantity(_canonical(b.number, exp_b, b.negative), unit_b, written),
                    ],
                )
            )
            i += 2
            continue
        value = _canonical(a.number, a.exponent or 0, a.negative)
        items.append((a.start, [Quantity(value, a.unit, text[a.start : a.end])]))
        i += 1
    items.sort(key=lambda item: item[0])
    return [q for _, qs in items for q in qs]


def _present(q: Quantity, passage: Sequence[Quantity]) -> bool:
    if q.unit is None:
        return any(p.value == q.value for p in passage)
    return any(p.value == q.value and p.unit == q.unit for p in passage)


def missing_quantities(claim: str, passage: str) -> list[Quantity]:
    """The claim's quantities that do not appear in the passage (same value, same unit; a claim
    quantity without a unit matches that value with any unit). Each (value, unit) is reported once."""
    claimed = extract_quantities(claim)
    if not claimed:
        return []  # most claims state no number: the passage need not be read
    return _missing(claimed, extract_quantities(passage))


def _missing(claimed: list[Quantity], have: Sequence[Quantity]) -> list[Quantity]:
    missing: list[Quantity] = []
    seen: set[tuple[str, str | None]] = set()
    for q in claimed:
        if (q.value, q.unit) in seen:
            continue
        seen.add((q.value, q.unit))
        if not _present(q, have):
            missing.append(q)
    return missing


def canonical(q: Quantity) -> str:
    """A quantity as stored: "1200 USD", "12 %", "3"."""
    return f"{q.value} {q.unit}" if q.unit else q.value


def numeric_piece(pairs: Sequence[tuple[str, str]]) -> list[tuple[list[str], list[str]]]:
    """Per (claim, passage): the claim's quantities and those the passage does not hold, canonical (a module-level
    function, so a step can split its pairs across processes: lib/core/processes.py)."""
    checked: list[tuple[list[str], list[str]]] = []
    for claim, passage in pairs:
        claimed = extract_quantities(claim)
        if not claimed:  # most claims state no number: the passage need not be read
            checked.append(([], []))
            continue
        have = _passage_quantities(passage)
        checked.append(([canonical(q) for q in claimed], [canonical(q) for q in _missing(claimed, have)]))
    return checked


@lru_cache(maxsize=4096)  # per process: a chunk cited again (by another claim or request) is read once
def _passage_quantities(passage: str) -> tuple[Quantity, ...]:
    return tuple(extract_quantities(passage))
