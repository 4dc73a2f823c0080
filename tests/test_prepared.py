"""Prepared reads: each statement text is rewritten to PostgreSQL's $n placeholders once and run on psycopg's
raw cursor, with the values in the order the placeholders first appear."""

from __future__ import annotations

import pytest
from django.db import connections

from config.prepared import _NativeStatements, prepared_cursor


def test_it_numbers_named_placeholders_once_each_and_keeps_escaped_percents():
    text, values = _NativeStatements.native(
        "SELECT %(b)s, %(a)s, %(b)s, 'a%%b'", {"a": 1, "b": 2, "unused": 3}
    )
    assert text == "SELECT $1, $2, $1, 'a%b'"
    assert values == [2, 1]


def test_it_numbers_positional_placeholders_in_order():
    assert _NativeStatements.native("SELECT %s, %s", [5, 6]) == ("SELECT $1, $2", [5, 6])


def test_it_refuses_values_that_do_not_fit_the_statement():
    with pytest.raises(TypeError):
        _NativeStatements.native("SELECT %s, %(a)s", {"a": 1})
    with pytest.raises(TypeError):
        _NativeStatements.native("SELECT %s, %s", [1])
    with pytest.raises(TypeError):
        _NativeStatements.native("SELECT %(a)s", [1])
    with pytest.raises(KeyError):
        _NativeStatements.native("SELECT %(a)s", {"b": 1})


@pytest.mark.django_db(databases="__all__")
def test_it_runs_the_statement_prepared_with_its_values():
    statement = "SELECT %(n)s::int + %(n)s::int, %(word)s::text || '%%', array_length(%(ids)s::int[], 1)"
    for _ in range(2):  # the second run takes the rewritten text from the cache
        with prepared_cursor() as cursor:
            cursor.execute(statement, {"n": 20, "word": "100", "ids": [1, 2, 3]})
            assert cursor.fetchone() == (40, "100%", 3)
    assert statement in _NativeStatements.converted
    assert connections["app"].connection.prepare_threshold is not None
