"""Set-at-a-time writes: many rows in one statement, on PostgreSQL and SQLite.

PostgreSQL: one statement whose rows arrive as one array parameter per column and are
unpacked by ``unnest`` (``UPDATE … FROM unnest(…)``, ``INSERT … SELECT … FROM unnest(…)``); a
column holding one value in every row is bound once, as a scalar. The statement text depends
only on the columns and on which of them are alike, so asyncpg prepares each variant once, and
the rows travel in the binary array format instead of as thousands of separate parameters.
SQLite: the same statement run by the driver's ``executemany`` (a C loop inside the process;
there is no network round trip to save). :func:`write_together` runs several such writes as
one PostgreSQL statement (data-modifying ``WITH`` queries).

Values go through each column's SQLAlchemy bind processor (the refusal of a naive instant for
:class:`~monitor.storage.tables.UTCDateTime`, SQLite's datetime text format, booleans), so the
rows are stored exactly as a Core ``insert``/``update`` would store them.
"""

from __future__ import annotations

import json
import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, Select, Table, and_, any_, bindparam, func, select, text, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import TextClause

T = TypeVar("T")

SQLITE_VARIABLES = 32766 if sqlite3.sqlite_version_info >= (3, 32) else 999
"""Bound parameters one SQLite statement may hold (``SQLITE_MAX_VARIABLE_NUMBER``'s default)."""


_Processors = tuple[Callable[[Any], Any] | None, ...]

_cache: weakref.WeakKeyDictionary[Dialect, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()
"""Per dialect, what :func:`_memo` built: the ingest writes the same few column lists in
every batch, so their bind processors and statement texts are looked up once."""


def member_of(column: ColumnElement[Any], name: str, *, postgres: bool) -> ColumnElement[bool]:
    """``column`` is one of the list bound as parameter ``name``.

    SQLite: ``column IN (…)`` with an expanding parameter. PostgreSQL: ``column = ANY(:name)``
    with the list bound as one array of the column's type: the statement text stays the same
    whatever the list's length (asyncpg prepares it once), and SQLAlchemy does not render and
    cast one placeholder per value on every execution, which cost more than the query at a few
    hundred ids (the sweep and the ingest run such lists in every batch).
    """
    if postgres:
        return column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))
    return column.in_(bindparam(name, expanding=True))


def at_or_after_own_bound(
    table: Table, key: str, column: str, name: str, *, postgres: bool, columns: Sequence[str] | None = None
) -> Select[Any]:
    """The rows of ``table`` (its ``columns``, default all) whose ``key`` is one of a list of
    (key, bound) pairs and whose ``column`` is at or after that pair's bound. Bind the pairs
    with :func:`own_bounds` (same ``name``).

    Each key gets its own lower bound in one statement: with one bound for all (the smallest),
    a batch mixing a weekly check with a check run every minute read a week of the latter's
    rows. Both forms probe the ``(key, column)`` index once per pair:

    - PostgreSQL: ``unnest`` of two arrays, each pair's rows a ``LATERAL`` subquery kept
      apart by ``OFFSET 0``: as a plain join the planner, misled by a freshly grown table's
      stale statistics, chose a hash join over a sequential scan (3-5 ms instead of 0.3 ms for
      16 pairs among 24 000 runs);
    - SQLite: ``json_each`` of one JSON text, joined (SQLite's nested loop puts it outside).
    """
    wanted = [table.c[c] for c in columns] if columns is not None else list(table.c)
    if postgres:
        pairs = (
            func.unnest(
                bindparam(f"{name}_keys", type_=postgresql.ARRAY(table.c[key].type)),
                bindparam(f"{name}_bounds", type_=postgresql.ARRAY(table.c[column].type)),
            )
            .table_valued("key", "bound")
            .render_derived(name=name)
        )
        each = (
            select(*wanted)
            .where(table.c[key] == pairs.c.key, table.c[column] >= pairs.c.bound)
            .offset(0)
            .lateral(f"{name}_{table.name}")
        )
        return select(*each.c).select_from(pairs).join(each, true())
    pairs = func.json_each(bindparam(name)).table_valued("value").alias(name)
    return select(*wanted).join_from(
        pairs,
        table,
        and_(
            table.c[key] == func.json_extract(pairs.c.value, "$[0]"),
            table.c[column] >= func.json_extract(pairs.c.value, "$[1]"),
        ),
    )


def own_bounds(
    name: str, bounds: Mapping[Any, Any], column: ColumnElement[Any], dialect: Dialect
) -> dict[str, Any]:
    """The parameters of :func:`at_or_after_own_bound`'s pairs: key → bound, each bound a
    Python value of ``column``'s type (bound as ``column`` binds it: SQLite's datetime text)."""
    if dialect.name == "postgresql":
        return {f"{name}_keys": list(bounds), f"{name}_bounds": list(bounds.values())}
    process = column.type.dialect_impl(dialect).bind_processor(dialect)
    pairs = [[key, bound if process is None else process(bound)] for key, bound in bounds.items()]
    return {name: json.dumps(pairs)}


def _memo(dialect: Dialect, key: tuple[Any, ...], build: Callable[[], T]) -> T:
    per_dialect = _cache.get(dialect)
    if per_dialect is None:
        per_dialect = _cache.setdefault(dialect, {})
    if key not in per_dialect:
        per_dialect[key] = build()
    return cast(T, per_dialect[key])


def _processors(table: Table, columns: Sequence[str], dialect: Dialect) -> _Processors:
    # the dialect's own implementation (SQLite's datetime text), as a Core statement binds it
    return _memo(
        dialect,
        ("processors", table.name, tuple(columns)),
        lambda: tuple(table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns),
    )


def _column_values(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    processors: Sequence[Callable[[Any], Any] | None],
) -> list[list[Any]]:
    out = []
    for name, process in zip(columns, processors, strict=True):
        values = [row[name] for row in rows]
        if process is not None:
            values = [None if v is None else process(v) for v in values]
        out.append(values)
    return out


def _alike(by_column: Sequence[Sequence[Any]]) -> tuple[bool, ...]:
    """Per column (after the first, which always varies), whether every row holds the same
    value: PostgreSQL then binds it once, as a scalar, instead of as an array. A sweep's rows
    share most of their values (its instant, its token, the alert kind and outcome of a plain
    miss, the state a miss leaves), and asyncpg encodes an array element by element, with an
    abstract-class check on each: with every column an array, that was a fifth of a sweep's
    Python time.

    Each mask is one statement variant (:func:`_memo`, and one prepared statement per
    connection); a workload repeats a few masks. A single row keeps every column an array, so
    its statement is the general one."""
    return tuple(
        index > 0 and len(values) > 1 and values.count(values[0]) == len(values)
        for index, values in enumerate(by_column)
    )


def _parameters(
    by_column: Sequence[Sequence[Any]], alike: Sequence[bool], prefix: str = ""
) -> dict[str, Any]:
    """The statement parameters ``p0``, ``p1``, … (each name after ``prefix``): a column's
    array, or its one value when alike."""
    return {
        f"{prefix}p{i}": values[0] if same else values
        for i, (values, same) in enumerate(zip(by_column, alike, strict=True))
    }


def _unnest(
    table: Table, columns: Sequence[str], alike: Sequence[bool], dialect: Dialect, prefix: str = ""
) -> tuple[list[str], str]:
    """PostgreSQL: each column's value expression (``v.<column>`` from the ``unnest`` of the
    varying columns' arrays, or the cast scalar parameter of an alike column), and that
    ``unnest(…) AS v(…)``; parameters named as :func:`_parameters` names them."""
    quote = dialect.identifier_preparer.quote
    types = [table.c[name].type.compile(dialect=dialect) for name in columns]
    varying = [i for i, same in enumerate(alike) if not same]
    source = (
        f"unnest({', '.join(f'CAST(:{prefix}p{i} AS {types[i]}[])' for i in varying)})"
        f" AS v({', '.join(quote(columns[i]) for i in varying)})"
    )
    values = [
        f"CAST(:{prefix}p{i} AS {types[i]})" if same else f"v.{quote(name)}"
        for i, (name, same) in enumerate(zip(columns, alike, strict=True))
    ]
    return values, source


async def update_rows(
    conn: AsyncConnection, table: Table, key: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> None:
    """Set ``columns`` of every row of ``table`` whose ``key`` column equals a row's ``key``.

    Args:
        conn: an open transaction.
        table: the Core table.
        key: the column rows are matched on (unique, e.g. ``id``); each row maps it too.
        rows: one mapping per row to change: ``key`` and every name in ``columns``
            (Python values, as a Core statement takes them).
        columns: the columns to set (not ``key``).
    """
    if not rows:
        return
    dialect = conn.dialect
    names = (key, *columns)
    if dialect.name == "postgresql":
        values = _column_values(rows, names, _processors(table, names, dialect))
        alike = _alike(values)
        statement = _memo(
            dialect,
            ("update", table.name, names, alike),
            lambda: _update_unnest(table, names, alike, dialect),
        )
        await conn.execute(statement, _parameters(values, alike))
        return
    order = (*columns, key)
    by_column = _column_values(rows, order, _processors(table, order, dialect))
    await conn.exec_driver_sql(
        _memo(dialect, ("update", table.name, order), lambda: _update_sqlite(table, order, dialect)),
        list(zip(*by_column, strict=True)),
    )


def _update_unnest(table: Table, names: Sequence[str], alike: Sequence[bool], dialect: Dialect) -> TextClause:
    """PostgreSQL's ``UPDATE … FROM unnest`` of ``names`` (the key first, then the columns;
    ``alike`` columns set from one scalar parameter)."""
    return text(_update_unnest_sql(table, names, alike, dialect))


def _update_unnest_sql(
    table: Table, names: Sequence[str], alike: Sequence[bool], dialect: Dialect, prefix: str = ""
) -> str:
    quote = dialect.identifier_preparer.quote
    values, source = _unnest(table, names, alike, dialect, prefix)
    assignments = ", ".join(f"{quote(c)} = {value}" for c, value in zip(names[1:], values[1:], strict=True))
    key = quote(names[0])
    return f"UPDATE {quote(table.name)} AS x SET {assignments} FROM {source} WHERE x.{key} = v.{key}"


def _update_sqlite(table: Table, order: Sequence[str], dialect: Dialect) -> str:
    """SQLite's ``UPDATE … SET … WHERE key = ?`` of ``order`` (the columns, then the key)."""
    quote = dialect.identifier_preparer.quote
    columns, key = order[:-1], order[-1]
    assignments = ", ".join(f"{quote(c)} = ?" for c in columns)
    return f"UPDATE {quote(table.name)} SET {assignments} WHERE {quote(key)} = ?"


async def insert_rows(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    ignore_conflicts: bool = False,
) -> None:
    """Insert ``rows`` (each mapping every name in ``columns``) into ``table`` in one statement.

    Args:
        ignore_conflicts: ``ON CONFLICT DO NOTHING``: a row that breaks a unique constraint is
            skipped, as :func:`monitor.storage.repositories.insert_ignoring_conflicts`.
    """
    if not rows:
        return
    dialect = conn.dialect
    names = tuple(columns)
    by_column = _column_values(rows, names, _processors(table, names, dialect))
    if dialect.name == "postgresql":
        alike = _alike(by_column)
        statement = _memo(
            dialect,
            ("insert", table.name, names, ignore_conflicts, alike),
            lambda: text(_insert_unnest(table, names, alike, dialect, ignore_conflicts)),
        )
        await conn.execute(statement, _parameters(by_column, alike))
        return
    sql = _memo(
        dialect,
        ("insert", table.name, names, ignore_conflicts),
        lambda: _insert_sqlite(table, names, dialect, ignore_conflicts),
    )
    await conn.exec_driver_sql(sql, list(zip(*by_column, strict=True)))


def _insert_unnest(
    table: Table,
    columns: Sequence[str],
    alike: Sequence[bool],
    dialect: Dialect,
    ignore_conflicts: bool,
    prefix: str = "",
) -> str:
    """PostgreSQL's ``INSERT … SELECT … FROM unnest`` of parameters ``p0``, ``p1``, … (arrays, or
    the scalars of ``alike`` columns; each name after ``prefix``)."""
    quote = dialect.identifier_preparer.quote
    values, source = _unnest(table, columns, alike, dialect, prefix)
    suffix = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
    target = f"{quote(table.name)} ({', '.join(quote(c) for c in columns)})"
    return f"INSERT INTO {target} SELECT {', '.join(values)} FROM {source}{suffix}"


def _insert_sqlite(table: Table, columns: Sequence[str], dialect: Dialect, ignore_conflicts: bool) -> str:
    """SQLite's ``INSERT … VALUES (?, …)`` (driver SQL, for ``executemany``)."""
    quote = dialect.identifier_preparer.quote
    target = f"{quote(table.name)} ({', '.join(quote(c) for c in columns)})"
    suffix = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
    return f"INSERT INTO {target} VALUES ({', '.join('?' for _ in columns)}){suffix}"


async def insert_returning(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    returning: Sequence[str],
    *,
    ignore_conflicts: bool = False,
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` as :func:`insert_rows` does and return ``returning`` of the rows inserted.

    PostgreSQL: one ``INSERT … SELECT FROM unnest(…) … RETURNING``. SQLite: multi-row
    ``INSERT … VALUES (…), (…) … RETURNING`` statements of at most :data:`SQLITE_VARIABLES`
    parameters each (SQLite cannot ``executemany`` a statement that returns rows).

    Returns:
        One tuple per row inserted, in no particular order (a row skipped by
        ``ignore_conflicts`` returns nothing); values as the driver gives them, so
        ``returning`` should name plain integer and text columns.
    """
    if not rows:
        return []
    dialect = conn.dialect
    names = tuple(columns)
    quote = dialect.identifier_preparer.quote
    returned = f" RETURNING {', '.join(quote(c) for c in returning)}"
    by_column = _column_values(rows, names, _processors(table, names, dialect))
    if dialect.name == "postgresql":
        alike = _alike(by_column)
        statement = _memo(
            dialect,
            ("insert_returning", table.name, names, ignore_conflicts, tuple(returning), alike),
            lambda: text(_insert_unnest(table, names, alike, dialect, ignore_conflicts) + returned),
        )
        result = await conn.execute(statement, _parameters(by_column, alike))
        return [tuple(row) for row in result.all()]
    target = f"{quote(table.name)} ({', '.join(quote(c) for c in names)})"
    suffix = (" ON CONFLICT DO NOTHING" if ignore_conflicts else "") + returned
    values = list(zip(*by_column, strict=True))
    per_statement = max(1, SQLITE_VARIABLES // len(columns))
    row_placeholder = f"({', '.join('?' for _ in columns)})"
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        sql = f"INSERT INTO {target} VALUES {', '.join([row_placeholder] * len(chunk))}{suffix}"
        result = await conn.exec_driver_sql(sql, tuple(v for row in chunk for v in row))
        out.extend(tuple(row) for row in result.all())
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class RowsWrite:
    """One set-at-a-time write of :func:`write_together`.

    Attributes:
        table: the Core table.
        rows: one mapping per row: every name in ``columns`` (and ``key``, for an update), as
            :func:`insert_rows` and :func:`update_rows` take them.
        columns: the columns inserted, or set.
        key: update the row whose ``key`` column equals each row's ``key`` (unique, e.g.
            ``id``) instead of inserting.
        ignore_conflicts: insert only: ``ON CONFLICT DO NOTHING``.
        returning: insert only, and only the last write of a call: columns to return of the
            rows inserted.
    """

    table: Table
    rows: Sequence[Mapping[str, Any]]
    columns: Sequence[str]
    key: str | None = None
    ignore_conflicts: bool = False
    returning: Sequence[str] = ()


async def write_together(conn: AsyncConnection, writes: Sequence[RowsWrite]) -> list[tuple[Any, ...]]:
    """Run ``writes`` (those with rows) in the caller's transaction, in one round trip on
    PostgreSQL.

    PostgreSQL: one statement, each write but the last a data-modifying ``WITH`` query
    (``WITH w0 AS (UPDATE … FROM unnest(…)), w1 AS (INSERT …) INSERT … RETURNING …``); the server
    runs every one of them to completion whether or not the statement reads it (PostgreSQL
    manual, "Data-Modifying Statements in WITH"). A sweep's or an ingest batch's writes were a
    round trip each, and on loopback a round trip costs more than writing a hundred rows.
    SQLite: the writes one after another (:func:`update_rows`, :func:`insert_rows`,
    :func:`insert_returning`): there is no round trip to save.

    The writes of one call must not touch the same rows, and none may depend on another's
    effect: on PostgreSQL they all see the database as it was before the statement (an update
    of a row another write inserts finds nothing). Writes to different rows of one table are
    fine.

    Returns:
        The last write's ``returning`` columns of the rows it inserted (as
        :func:`insert_returning`); empty when it returns nothing.

    Raises:
        ValueError: a write other than the last has ``returning``, or an update has
            ``returning`` or ``ignore_conflicts``.
    """
    writes = [w for w in writes if w.rows]
    for index, write in enumerate(writes):
        if write.returning and (index < len(writes) - 1 or write.key is not None):
            raise ValueError("returning: only the last write of a call, an insert, may return rows")
        if write.key is not None and write.ignore_conflicts:
            raise ValueError("ignore_conflicts: only an insert can ignore conflicts")
    if conn.dialect.name != "postgresql" or len(writes) <= 1:
        return await _one_by_one(conn, writes)
    dialect = conn.dialect
    parameters: dict[str, Any] = {}
    shapes: list[tuple[Any, ...]] = []
    for index, write in enumerate(writes):
        names = tuple(write.columns) if write.key is None else (write.key, *write.columns)
        values = _column_values(write.rows, names, _processors(write.table, names, dialect))
        alike = _alike(values)
        parameters.update(_parameters(values, alike, prefix=f"w{index}_"))
        shapes.append(
            (write.table, names, write.key is not None, write.ignore_conflicts, tuple(write.returning), alike)
        )
    statement = _memo(
        dialect,
        ("together", *((table.name, *rest) for table, *rest in shapes)),
        lambda: text(_together_sql(shapes, dialect)),
    )
    result = await conn.execute(statement, parameters)
    return [tuple(row) for row in result.all()] if writes[-1].returning else []


async def _one_by_one(conn: AsyncConnection, writes: Sequence[RowsWrite]) -> list[tuple[Any, ...]]:
    returned: list[tuple[Any, ...]] = []
    for write in writes:
        if write.key is not None:
            await update_rows(conn, write.table, write.key, write.rows, write.columns)
        elif write.returning:
            returned = await insert_returning(
                conn,
                write.table,
                write.rows,
                write.columns,
                write.returning,
                ignore_conflicts=write.ignore_conflicts,
            )
        else:
            await insert_rows(
                conn, write.table, write.rows, write.columns, ignore_conflicts=write.ignore_conflicts
            )
    return returned


def _together_sql(shapes: Sequence[tuple[Any, ...]], dialect: Dialect) -> str:
    """:func:`write_together`'s PostgreSQL statement for the writes' shapes: (table, column
    names with an update's key first, is an update, ignores conflicts, returning, alike mask)."""
    quote = dialect.identifier_preparer.quote
    parts = []
    for index, (table, names, is_update, ignore_conflicts, returning, alike) in enumerate(shapes):
        prefix = f"w{index}_"
        if is_update:
            sql = _update_unnest_sql(table, names, alike, dialect, prefix)
        else:
            sql = _insert_unnest(table, names, alike, dialect, ignore_conflicts, prefix)
        if returning:
            sql += f" RETURNING {', '.join(quote(c) for c in returning)}"
        parts.append(sql)
    queries = ", ".join(f"w{index} AS ({sql})" for index, sql in enumerate(parts[:-1]))
    return f"WITH {queries} {parts[-1]}"
