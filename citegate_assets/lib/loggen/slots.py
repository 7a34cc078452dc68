"""Slot values ({plan}, {money}, {date}, ...) and the filling of sentence and question templates."""

from __future__ import annotations

import string
from random import Random

# the {qual} slot: a condition that narrows what a sentence states
QUALIFIERS = (
    "only for orders over {units} units",
    "except in the EU region",
    "unless the contract term is shorter than {months} months",
    "provided the invoice is paid within {n} days",
    "for annual plans with at least {seats}",
    "except for Starter accounts created before {date}",
)

PLANS = ("Starter", "Team", "Business", "Enterprise", "Enterprise Plus", "Growth", "Scale")
REGIONS = ("EU", "US-East", "US-West", "APAC", "UK", "Canada", "LATAM", "DACH")
DATA_CENTERS = (
    "Frankfurt",
    "Z\u00fcrich",
    "Montr\u00e9al",
    "Dublin",
    "S\u00e3o Paulo",
    "Singapore",
    "Ohio",
    "M\u00fcnchen",
)
PRODUCTS = (
    "Northwind Edge Appliance",
    "NW-200 Gateway",
    "Vault Backup Node",
    "Insight Analytics Box",
    "Relay Connector",
    "Nimbus Cache",
    "Caf\u00e9 POS Bridge",
    "Atlas Sync Hub",
)
RANGE_SEPARATORS = ("\u2013", "-", " to ")  # en dash, hyphen, words: models rewrite the first as the second
CURRENCIES = ("$", "$", "\u20ac")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _slots(*templates: str) -> list[str]:
    names: list[str] = []
    for t in templates:
        for _, name, _, _ in string.Formatter().parse(t):
            if name and name not in names:
                names.append(name)
    return names


def _range(rng: Random, lo: int, hi: int, unit: str) -> str:
    a = rng.randint(lo, hi)
    b = a + rng.randint(1, 6) * (1 if unit.endswith("days") else 5)
    return f"{a}{rng.choice(RANGE_SEPARATORS)}{b} {unit}"


def _slot_value(rng: Random, name: str) -> str:
    if name == "plan":
        return rng.choice(PLANS)
    if name == "region":
        return rng.choice(REGIONS)
    if name == "dc":
        return rng.choice(DATA_CENTERS)
    if name == "product":
        return rng.choice(PRODUCTS)
    if name == "pct":
        n = rng.randint(2, 40)
        return rng.choice((f"{n}%", f"{n}.5%", f"{n} percent", f"{n}.5 percent"))
    if name == "uptime":
        return rng.choice(("99.5%", "99.9%", "99.95%", "99.99%", "99.0%", "99.8%"))
    if name == "money":
        value = rng.randint(2, 900) * rng.choice((1, 5, 10))
        cents = ".00" if rng.random() < 0.15 else ""
        return f"{rng.choice(CURRENCIES)}{value:,}{cents}"
    if name == "days":
        return _range(rng, 1, 7, "business days")
    if name == "seats":
        return _range(rng, 2, 60, "seats")
    if name == "units":
        return str(rng.randint(2, 120) * 25)
    if name == "months":
        return str(rng.randint(3, 36))
    if name == "hours":
        return str(rng.randint(2, 72))
    if name == "years":
        return str(rng.randint(2, 7))
    if name == "n":
        return str(rng.randint(2, 90))
    if name == "digit":
        return str(rng.randint(0, 9))
    if name == "code":
        return f"{rng.choice(('NW', 'SPRING', 'PARTNER', 'EDU'))}{rng.randint(10, 60)}"
    if name == "date":
        y, m, d = rng.choice((2026, 2027)), rng.randint(1, 12), rng.randint(1, 28)
        return rng.choice((f"{MONTHS[m - 1]} {d}, {y}", f"{y}-{m:02d}-{d:02d}", f"{d} {MONTHS[m - 1]} {y}"))
    if name == "qual":
        qual = rng.choice(QUALIFIERS)
        return qual.format(**{s: _slot_value(rng, s) for s in _slots(qual)})
    raise KeyError(name)


def fill(rng: Random, *templates: str) -> list[str]:
    # One value per slot, shared by all templates, so a paraphrase states the same facts.
    values = {name: _slot_value(rng, name) for name in _slots(*templates)}
    return [t.format(**values) for t in templates]
