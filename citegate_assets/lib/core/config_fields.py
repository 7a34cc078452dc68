"""The checks of citegate.toml's keys: each config field carries its default, the check its value must pass (type and
range, booleans never numbers, integers never floats) and its meaning in one line, and a table is built from them, an
unknown key refused; every error names the dotted key. scripts/config_reference.py generates
docs/configuration-reference.md from the fields' checks (what each accepts) and meanings."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import field, fields
from typing import TypeGuard

from citegate_assets.lib.core.reasons import QUEUE_REASONS


class ConfigError(ValueError):
    pass


class BadValue(Exception):
    """A problem found while parsing; parse_config prefixes the file name and raises ConfigError."""


Check = Callable[[str, object], object]


def expects(expected: str):
    """Records on a check what it accepts, in words: docs/configuration-reference.md shows it as the key's type."""

    def mark(check: Check) -> Check:
        check.expected = expected  # type: ignore[attr-defined]
        return check

    return mark


def bad_value(key: str, value: object, expected: str) -> BadValue:
    return BadValue(f"{key} = {value!r}: expected {expected}")


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def check_integer(minimum: int) -> Check:
    @expects(f"an integer >= {minimum}")
    def check(key: str, value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise bad_value(key, value, f"an integer >= {minimum}")
        return value

    return check


def check_number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False) -> Check:
    """A finite int or float in the range; kept as a float."""
    if high is None:
        expected = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        expected = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def in_range(value: int | float) -> bool:
        above = value > low if low_open else value >= low
        below = high is None or (value < high if high_open else value <= high)
        return above and below

    @expects(expected)
    def check(key: str, value: object) -> float:
        if not _is_number(value) or not in_range(value):
            raise bad_value(key, value, expected)
        return float(value)

    return check


def check_string(*, non_empty: bool = False) -> Check:
    @expects("a non-empty string" if non_empty else "a string")
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or (non_empty and not value.strip()):
            raise bad_value(key, value, "a non-empty string" if non_empty else "a string")
        return value

    return check


def check_choice(options: tuple[str, ...]) -> Check:
    @expects(f"one of {', '.join(options)}")
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or value not in options:
            raise bad_value(key, value, f"one of {', '.join(options)}")
        return value

    return check


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@expects("the name of an environment variable")
def check_env_name(key: str, value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise bad_value(
            key, value, "the name of an environment variable (letters, digits, _; not starting with a digit)"
        )
    return value


@expects('"" or a URL starting with http:// or https://')
def check_base_url(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise bad_value(key, value, 'a string: "" or a URL starting with http:// or https://')
    if value and not value.startswith(("http://", "https://")):
        # the value itself is not echoed: a URL may carry credentials
        raise BadValue(f'{key}: expected "" (the offline judge) or a URL starting with http:// or https://')
    return value


@expects("a table per model: input, output (numbers >= 0)")
def check_prices(key: str, value: object) -> dict:
    """model -> {input, output}: USD per million tokens, non-negative numbers."""
    table = as_table(key, value)
    out = {}
    for model, price in table.items():
        at = f"{key}.{key_part(model)}"
        price = as_table(at, price)
        reject_unknown(price, {"input", "output"}, at)
        for side in ("input", "output"):
            if side not in price:
                raise BadValue(f"[{at}] is missing required key '{side}' (USD per 1M tokens)")
        out[model] = {side: check_number(0)(f"{at}.{side}", price[side]) for side in ("input", "output")}
    return out


@expects("a table: reason = owner (non-empty strings)")
def check_owners(key: str, value: object) -> dict:
    """reason -> owner, for the reasons in QUEUE_REASONS."""
    table = as_table(key, value)
    for reason, owner in table.items():
        if reason not in QUEUE_REASONS:
            raise BadValue(f"{key}.{key_part(reason)}: unknown reason (expected one of {', '.join(QUEUE_REASONS)})")
        check_string(non_empty=True)(f"{key}.{reason}", owner)
    return dict(table)


@expects('"" or a regular expression with a named group ref')
def check_marker_pattern(key: str, value: object) -> str:
    """A regex that compiles, has a named group `ref`, and matches no empty text (it would cite everywhere)."""
    if not isinstance(value, str):
        raise bad_value(key, value, "a string: a regular expression with a named group 'ref'")
    if value == "":
        return value
    try:
        pattern = re.compile(value)
    except re.error as exc:
        raise BadValue(f"{key} = {value!r}: not a regular expression: {exc}") from None
    if "ref" not in pattern.groupindex:
        raise BadValue(f"{key} = {value!r}: the pattern has no named group 'ref' (write (?P<ref>...) around the id)")
    if pattern.fullmatch(""):
        raise BadValue(f"{key} = {value!r}: the pattern matches empty text")
    return value


@expects('the name of an environment variable, or ""')
def check_env_name_or_empty(key: str, value: object) -> str:
    return check_env_name(key, value) if value != "" else ""


def checked_field(default, check: Check, doc: str, **kwargs):
    """A config field: its default, the check its value from the file must pass, and what it means in one line
    (docs/configuration-reference.md is generated from these: scripts/config_reference.py)."""
    return field(default=default, metadata={"check": check, "doc": doc}, **kwargs)


def build_section(cls, table: dict, key: str, **fixed):
    """An instance of the config dataclass cls from its table, each value passed through its field's check."""
    checks = {f.name: f.metadata["check"] for f in fields(cls) if "check" in f.metadata}
    reject_unknown(table, set(checks), key)
    values = {name: checks[name](f"{key}.{name}", value) for name, value in table.items()}
    return cls(**fixed, **values)


def as_table(key: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise BadValue(f"[{key}] must be a table, got {value!r}")
    return value


def sub_tables(section: object, key: str):
    for name, table in as_table(key, section).items():
        yield name, as_table(f"{key}.{key_part(name)}", table)


def key_part(name: str) -> str:
    """One part of a dotted key as TOML spells it: bare when it can be, quoted otherwise."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def reject_unknown(table: dict, allowed: set[str], key: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        prefix = f"{key}." if key else ""
        raise BadValue(
            f"unknown key '{prefix}{key_part(unknown[0])}' "
            f"(allowed in [{key or 'top level'}]: {', '.join(sorted(allowed))})"
        )
