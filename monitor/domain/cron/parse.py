"""Parsing cron expressions: dialects, fields, names, ranges, steps and their errors (DESIGN §4).

Three dialects: ``unix`` (5 fields), ``seconds`` (6 fields, seconds first) and ``quartz`` (6 or 7
fields, seconds first, optional year, DOW 1-7 with SUN=1, exactly one of DOM/DOW ``?``); the
fourth, ``oncalendar``, has its own parser (:mod:`monitor.domain.cron.calendar_events`). Every
error is a :class:`~monitor.domain.errors.ScheduleError` that names the field and its 1-based
position (``field 5 (day of week): 8 is out of range 0-7``). Names, ``a-a``, wrap-around ranges
(``FRI-MON``, ``22-2/2``), steps and quartz numbering are all resolved here into explicit value
sets (:class:`ParsedField`); day of week is 0=Sunday..6=Saturday in every dialect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from monitor.domain.errors import ScheduleError

__all__ = ["Dialect", "ParsedField", "parse_fields"]


class Dialect(StrEnum):
    """The cron dialects of DESIGN §4; looked up case-insensitively (``Dialect("QUARTZ")``)."""

    UNIX = "unix"
    SECONDS = "seconds"
    QUARTZ = "quartz"
    ONCALENDAR = "oncalendar"  # systemd calendar events: monitor.domain.cron.calendar_events

    @classmethod
    def _missing_(cls, value: object) -> Dialect | None:
        if isinstance(value, str):
            folded = value.strip().lower()
            for member in cls:
                if member.value == folded:
                    return member
        return None


_MONTH_NAMES = {
    name: i + 1
    for i, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
    )
}
_DOW_NAMES = {name: i for i, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class _FieldKind:
    name: str
    lo: int
    hi: int


_SECOND = _FieldKind("second", 0, 59)
_MINUTE = _FieldKind("minute", 0, 59)
_HOUR = _FieldKind("hour", 0, 23)
_DOM = _FieldKind("day of month", 1, 31)
_MONTH = _FieldKind("month", 1, 12)
_DOW_UNIX = _FieldKind("day of week", 0, 7)
_DOW_QUARTZ = _FieldKind("day of week", 1, 7)
_YEAR = _FieldKind("year", 1970, 2099)

_LAYOUTS: dict[Dialect, tuple[_FieldKind, ...]] = {
    Dialect.UNIX: (_MINUTE, _HOUR, _DOM, _MONTH, _DOW_UNIX),
    Dialect.SECONDS: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_UNIX),
    Dialect.QUARTZ: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_QUARTZ, _YEAR),
}


# --------------------------------------------------------------------------- parsed fields


@dataclass(frozen=True, slots=True)
class ParsedField:
    """One decoded field (read by :mod:`monitor.domain.cron.explain`).

    Attributes:
        kind: the field's name (``"minute"``, ``"day of week"``...).
        position: 1-based position in the expression as written.
        text: the field's text as written (after macro expansion).
        values: plain values; day of week uses 0=Sunday..6=Saturday in every dialect.
        star: the text starts with ``*`` or is ``?`` (DESIGN §4 DOM/DOW rule).
        last: DOM ``L``. last_weekday: DOM ``LW``. last_offsets: DOM ``L-n`` (n days before
        the last). nearest: DOM ``nW``. nth: DOW ``n#k`` as (weekday, k). last_dow: DOW ``nL``.
        wraps: some range wrapped around (``FRI-MON``, ``22-2``).
    """

    kind: str
    position: int
    text: str
    values: frozenset[int]
    star: bool
    last: bool = False
    last_weekday: bool = False
    last_offsets: frozenset[int] = frozenset()
    nearest: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()
    last_dow: frozenset[int] = frozenset()
    wraps: bool = False

    @property
    def extended(self) -> bool:
        """Whether the field uses syntax Debian's cron does not support."""
        return bool(
            self.last
            or self.last_weekday
            or self.last_offsets
            or self.nearest
            or self.nth
            or self.last_dow
            or self.wraps
        )


def _err(kind: _FieldKind, position: int, problem: str) -> ScheduleError:
    return ScheduleError(f"field {position} ({kind.name}): {problem}", field=kind.name, position=position)


def _number(token: str, kind: _FieldKind, position: int, dialect: Dialect) -> int:
    """A number or a name in ``kind``, range-checked; quartz DOW stays 1-7 here."""
    if token.isdigit() and token.isascii():
        value = int(token)
    else:
        upper = token.upper()
        if kind is _MONTH and upper in _MONTH_NAMES:
            return _MONTH_NAMES[upper]
        if kind.name == "day of week" and upper in _DOW_NAMES:
            return _DOW_NAMES[upper] + (1 if dialect is Dialect.QUARTZ else 0)
        if token == "":
            raise _err(kind, position, "a number is missing")
        what = {
            "month": "a number or a month name (JAN-DEC)",
            "day of week": "a number or a day name (SUN-SAT)",
        }
        raise _err(kind, position, f"{token!r} is not {what.get(kind.name, 'a number')}")
    if not kind.lo <= value <= kind.hi:
        raise _err(kind, position, f"{value} is out of range {kind.lo}-{kind.hi}")
    return value


def _to_cron_dow(value: int, dialect: Dialect) -> int:
    """Day of week as 0=Sunday..6=Saturday."""
    return (value - 1) % 7 if dialect is Dialect.QUARTZ else value % 7


def _expand(item: str, kind: _FieldKind, position: int, dialect: Dialect) -> tuple[list[int], bool]:
    """Expand ``*``, ``a``, ``a-b``, with an optional ``/step``; returns (values, wrapped)."""
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        span = kind.hi - kind.lo + 1 if kind.name != "day of week" else 7
        if not step_text.isdigit() or not step_text.isascii():
            raise _err(kind, position, f"step {step_text!r} is not a number")
        step = int(step_text)
        if not 1 <= step <= span:
            raise _err(kind, position, f"step {step} is out of range 1-{span}")
    if base in ("*", "?"):
        if base == "?" and kind.name not in ("day of month", "day of week"):
            raise _err(kind, position, "'?' is only allowed in day of month or day of week")
        lo, hi = kind.lo, kind.hi
        if kind is _DOW_UNIX:
            hi = 6  # 7 is Sunday again: '*' and '*/s' cover 0-6
        return list(range(lo, hi + 1, step)), False
    if "-" in base:
        a_text, _, b_text = base.partition("-")
        if "-" in b_text:
            raise _err(kind, position, f"{base!r} is not a range a-b")
        a = _number(a_text, kind, position, dialect)
        b = _number(b_text, kind, position, dialect)
    else:
        a = _number(base, kind, position, dialect)
        b = kind.hi if slash else a
        if slash and kind is _DOW_UNIX:
            b = 7  # DESIGN §4: in DOW the max is 7, so 1/2 = Mon, Wed, Fri, Sun
    if a <= b:
        return list(range(a, b + 1))[::step], False
    if kind is _YEAR:  # Quartz: years do not wrap around
        raise _err(kind, position, f"{base!r}: the start year must not be greater than the end year")
    # wrap-around range (FRI-MON, 22-2/2): DOW wraps modulo 7, others at the field's max
    if kind.name == "day of week":
        first = 1 if dialect is Dialect.QUARTZ else 0
        a_c, b_c = _to_cron_dow(a, dialect), _to_cron_dow(b, dialect)
        seq = [(a_c + i) % 7 for i in range((b_c - a_c) % 7 + 1)]
        return [v + first for v in seq][::step], True
    seq = list(range(a, kind.hi + 1)) + list(range(kind.lo, b + 1))
    return seq[::step], True


_MONTH_NAME_RE = re.compile("|".join(_MONTH_NAMES))
_NTH_RE = re.compile(r"^([A-Za-z0-9]+)#([0-9]+)$")


@dataclass(slots=True)
class _Items:
    """What the items of one field add up to, while it is being read."""

    values: set[int] = field(default_factory=set)
    last: bool = False
    last_weekday: bool = False
    wraps: bool = False
    last_offsets: set[int] = field(default_factory=set)
    nearest: set[int] = field(default_factory=set)
    nth: set[tuple[int, int]] = field(default_factory=set)
    last_dow: set[int] = field(default_factory=set)


def _dom_token(item: str, acc: _Items, kind: _FieldKind, position: int, dialect: Dialect) -> None:
    """A day-of-month item holding ``L`` or ``W``: ``L``, ``LW``, ``L-n`` or ``nW``."""
    upper = item.upper()
    if upper == "L":
        acc.last = True
    elif upper == "LW":
        acc.last_weekday = True
    elif upper.startswith("L-"):
        if not upper[2:].isdigit() or not upper[2:].isascii():
            raise _err(kind, position, f"{item!r}: L-n needs a number of days n")
        n = int(upper[2:])
        if not 0 <= n <= 30:
            raise _err(kind, position, f"{item!r}: {n} is out of range 0-30")
        acc.last_offsets.add(n)
    elif upper.endswith("W") and upper[:-1].isdigit() and upper[:-1].isascii():
        acc.nearest.add(_number(upper[:-1], kind, position, dialect))
    else:
        raise _err(kind, position, f"{item!r} is not L, LW, L-n or nW (nearest weekday, as in 15W)")


def _dow_nth(item: str, acc: _Items, kind: _FieldKind, position: int, dialect: Dialect) -> None:
    """A day-of-week item ``n#k``: the k-th weekday n of the month."""
    match = _NTH_RE.match(item)
    if match is None:
        raise _err(kind, position, f"{item!r} is not n#k (k-th weekday n of the month, as in 5#3)")
    n = _number(match.group(1), kind, position, dialect)
    k = int(match.group(2))
    if not 1 <= k <= 5:
        raise _err(kind, position, f"{item!r}: occurrence {k} is out of range 1-5")
    acc.nth.add((_to_cron_dow(n, dialect), k))


def _dow_last(item: str, acc: _Items, kind: _FieldKind, position: int, dialect: Dialect) -> None:
    """A day-of-week item ending in ``L``: ``nL`` (the last weekday n), or quartz ``L`` (Saturday)."""
    if item.upper() == "L":
        if dialect is not Dialect.QUARTZ:
            raise _err(
                kind,
                position,
                "'L' alone is not a day here; write 5L for the last Friday, or 6 for Saturday",
            )
        acc.values.add(6)  # Quartz: 'L' alone in day of week is 7 = SAT
        return
    n = _number(item[:-1], kind, position, dialect)
    acc.last_dow.add(_to_cron_dow(n, dialect))


def _parse_item(item: str, acc: _Items, kind: _FieldKind, position: int, dialect: Dialect) -> None:
    """One comma-separated item of a field, added to ``acc``."""
    upper = item.upper()
    is_dom = kind is _DOM
    is_dow = kind.name == "day of week"
    if is_dom and ("L" in upper or "W" in upper):
        _dom_token(item, acc, kind, position, dialect)
    elif is_dow and "#" in item:
        _dow_nth(item, acc, kind, position, dialect)
    elif is_dow and upper.endswith("L"):
        _dow_last(item, acc, kind, position, dialect)
    else:
        if not (is_dom or is_dow) and re.search(r"[LW#]", _MONTH_NAME_RE.sub("", upper)):
            raise _err(kind, position, f"{item!r}: L, W and # are only allowed in the day fields")
        expanded, wrapped = _expand(item, kind, position, dialect)
        acc.wraps = acc.wraps or wrapped
        if is_dow:
            acc.values.update(_to_cron_dow(v, dialect) for v in expanded)
        else:
            acc.values.update(expanded)


def _parse_field(text: str, kind: _FieldKind, position: int, dialect: Dialect) -> ParsedField:
    if text == "":
        raise _err(kind, position, "is empty")
    acc = _Items()
    for item in text.split(","):
        if item == "":
            raise _err(kind, position, f"empty item in list {text!r}")
        _parse_item(item, acc, kind, position, dialect)
    return ParsedField(
        kind=kind.name,
        position=position,
        text=text,
        values=frozenset(acc.values),
        star=text.startswith("*") or text == "?",
        last=acc.last,
        last_weekday=acc.last_weekday,
        last_offsets=frozenset(acc.last_offsets),
        nearest=frozenset(acc.nearest),
        nth=frozenset(acc.nth),
        last_dow=frozenset(acc.last_dow),
        wraps=acc.wraps,
    )


def _split_fields(expression: str, dialect: Dialect) -> list[str]:
    text = expression.strip()
    if text == "":
        raise ScheduleError("the expression is empty")
    if text.startswith("@"):
        macro = text.lower()
        if macro == "@reboot":
            raise ScheduleError(
                "@reboot is not supported: it runs once at boot, which has no predictable time; "
                "monitor such a job with a simple (period) check instead"
            )
        if macro not in _MACROS:
            raise ScheduleError(f"unknown macro {text!r}; known: {', '.join(sorted(_MACROS))}")
        body = _MACROS[macro]
        if dialect is Dialect.SECONDS:
            body = "0 " + body
        elif dialect is Dialect.QUARTZ:
            minute, hour, dom, month, dow = body.split()
            weekly = dow == "0"
            body = f"0 {minute} {hour} ? {month} 1" if weekly else f"0 {minute} {hour} {dom} {month} ?"
        return body.split()
    parts = text.split()
    layout = _LAYOUTS[dialect]
    allowed = (6, 7) if dialect is Dialect.QUARTZ else (len(layout),)
    if len(parts) not in allowed:
        names = " ".join(k.name.replace(" ", "-") for k in layout)
        expected = "6 or 7" if dialect is Dialect.QUARTZ else str(len(layout))
        hint = {
            5: "dialect 'unix' reads 5 fields (minute first)",
            6: "dialect 'seconds' reads 6 fields with seconds first; dialect 'quartz' reads 6 or 7 "
            "(seconds first, DOW 1-7 with SUN=1, optional year)",
            7: "dialect 'quartz' reads 7 fields (seconds first, year last)",
        }.get(len(parts))
        message = f"dialect {dialect.value!r} expects {expected} fields ({names}), got {len(parts)}"
        if hint:
            message += f"; {hint}"
        raise ScheduleError(message)
    return parts


def _check_quartz_days(fields: tuple[ParsedField, ...]) -> None:
    """Quartz: exactly one of day of month and day of week is ``?``."""
    by = {f.kind: f for f in fields}
    dom, dow = by["day of month"], by["day of week"]
    if (dom.text == "?") == (dow.text == "?"):
        which = dom if dom.text == "?" else dow
        problem = (
            "exactly one of day of month and day of week must be '?' in quartz, not both"
            if dom.text == "?"
            else "exactly one of day of month and day of week must be '?' in quartz "
            "(e.g. '0 0 12 ? * MON' or '0 0 12 1 * ?')"
        )
        raise ScheduleError(
            f"field {which.position} ({which.kind}): {problem}", field=which.kind, position=which.position
        )


def parse_fields(expression: str, dialect: Dialect) -> tuple[ParsedField, ...]:
    """Split and decode the fields of a cron expression, macros expanded.

    Args:
        expression: the expression as written (a macro such as ``@daily`` included).
        dialect: ``unix``, ``seconds`` or ``quartz`` (not ``oncalendar``).

    Returns:
        The fields in expression order; 5 for ``unix``, 6 for ``seconds``, 6 or 7 for ``quartz``.

    Raises:
        ScheduleError: an empty expression, ``@reboot`` or an unknown macro, a wrong field count
            (naming the dialects that would accept it), a malformed field (naming it and its
            1-based position), or quartz without exactly one ``?`` day field.
    """
    parts = _split_fields(expression, dialect)
    layout = _LAYOUTS[dialect]
    fields = tuple(
        _parse_field(text, kind, i + 1, dialect)
        for i, (text, kind) in enumerate(zip(parts, layout[: len(parts)], strict=True))
    )
    if dialect is Dialect.QUARTZ:
        _check_quartz_days(fields)
    return fields
