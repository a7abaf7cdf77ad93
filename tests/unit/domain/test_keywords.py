"""Keyword filters (monitor.domain.keywords): Healthchecks' rules, exhaustively and by property."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.domain.checks import PingKind
from monitor.domain.keywords import (
    KeywordFilter,
    classify_email,
    classify_http,
    classify_text,
    matches,
    split_keywords,
)


@pytest.mark.parametrize(
    ("text", "items"),
    [
        pytest.param("", (), id="empty"),
        pytest.param("FAIL", ("FAIL",), id="one"),
        pytest.param(" FAIL , ERROR ", ("FAIL", "ERROR"), id="stripped"),
        pytest.param("a,,b, ,", ("a", "b"), id="empty-items-dropped"),
        pytest.param("two words,x", ("two words", "x"), id="inner-space-kept"),
    ],
)
def test_keyword_lists_are_comma_separated_and_stripped(text: str, items: tuple[str, ...]) -> None:
    assert split_keywords(text) == items


@pytest.mark.parametrize(
    ("text", "keywords", "expected"),
    [
        pytest.param("backup FAILED", "FAIL", True, id="substring"),
        pytest.param("backup failed", "FAIL", False, id="case-sensitive"),
        pytest.param("all good", "FAIL,ERROR", False, id="none"),
        pytest.param("an ERROR", "FAIL, ERROR", True, id="second-item"),
        pytest.param("anything", "", False, id="empty-list-matches-nothing"),
        pytest.param("anything", " , ", False, id="blank-items-match-nothing"),
        pytest.param("", "x", False, id="empty-text"),
    ],
)
def test_a_list_matches_when_any_keyword_is_a_substring(text: str, keywords: str, expected: bool) -> None:
    assert matches(text, keywords) is expected


# Every combination of which lists match, with and without filter_default_fail: the first of
# failure, success, start that matches decides; none → fail (default_fail) or ign.
CASES = list(itertools.product([False, True], repeat=4))


@pytest.mark.parametrize(("fail_hit", "success_hit", "start_hit", "default_fail"), CASES)
def test_failure_then_success_then_start_then_default(
    fail_hit: bool, success_hit: bool, start_hit: bool, default_fail: bool
) -> None:
    words = []
    if fail_hit:
        words.append("F")
    if success_hit:
        words.append("S")
    if start_hit:
        words.append("B")
    rules = KeywordFilter(failure_kw="F", success_kw="S", start_kw="B", filter_default_fail=default_fail)
    got = classify_text(" ".join(words), rules)
    if fail_hit:
        assert got is PingKind.FAIL
    elif success_hit:
        assert got is PingKind.SUCCESS
    elif start_hit:
        assert got is PingKind.START
    else:
        assert got is (PingKind.FAIL if default_fail else PingKind.IGN)


HTTP_ON = KeywordFilter(filter_http_body=True, success_kw="OK", failure_kw="FAIL", start_kw="BEGIN")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b"job OK", PingKind.SUCCESS, id="success-keyword"),
        pytest.param(b"job OK but FAIL", PingKind.FAIL, id="failure-wins"),
        pytest.param(b"BEGIN", PingKind.START, id="start-keyword"),
        pytest.param(b"nothing", PingKind.IGN, id="no-match-ignored"),
        pytest.param(None, PingKind.IGN, id="no-body-ignored"),
        pytest.param(b"\xff\xfeFAIL", PingKind.FAIL, id="undecodable-bytes-replaced"),
    ],
)
def test_http_body_classifies_bare_success_pings(body: bytes | None, expected: PingKind) -> None:
    assert classify_http(HTTP_ON, PingKind.SUCCESS, None, body) is expected


@pytest.mark.parametrize("kind", [PingKind.START, PingKind.FAIL, PingKind.LOG, PingKind.SKIP])
def test_http_body_never_overrides_an_explicit_action(kind: PingKind) -> None:
    assert classify_http(HTTP_ON, kind, None, b"job OK") is kind


@pytest.mark.parametrize("status", [0, 1, 255])
def test_http_body_never_overrides_an_exit_status(status: int) -> None:
    kind = PingKind.SUCCESS if status == 0 else PingKind.FAIL
    assert classify_http(HTTP_ON, kind, status, b"FAIL") is kind


def test_http_body_filter_off_leaves_the_kind() -> None:
    rules = KeywordFilter(failure_kw="FAIL", filter_subject=True, filter_body=True)
    assert classify_http(rules, PingKind.SUCCESS, None, b"FAIL") is PingKind.SUCCESS


@pytest.mark.parametrize(
    ("subject_on", "body_on", "subject", "body", "expected"),
    [
        pytest.param(False, False, "FAIL", "FAIL", PingKind.SUCCESS, id="no-filter-success"),
        pytest.param(True, False, "Backup FAIL", "", PingKind.FAIL, id="subject"),
        pytest.param(True, False, "Backup", "FAIL", PingKind.IGN, id="body-not-read"),
        pytest.param(False, True, "FAIL", "all OK", PingKind.SUCCESS, id="subject-not-read"),
        pytest.param(True, True, "OK", "FAIL", PingKind.FAIL, id="both-failure-wins"),
        pytest.param(True, True, "BEGIN", "", PingKind.START, id="start"),
        pytest.param(True, True, "", "", PingKind.IGN, id="nothing"),
    ],
)
def test_email_subject_and_body_filters(
    subject_on: bool, body_on: bool, subject: str, body: str, expected: PingKind
) -> None:
    rules = KeywordFilter(
        filter_subject=subject_on, filter_body=body_on, success_kw="OK", failure_kw="FAIL", start_kw="BEGIN"
    )
    assert classify_email(rules, subject, body) is expected


def test_a_keyword_split_across_subject_and_body_does_not_match() -> None:
    rules = KeywordFilter(filter_subject=True, filter_body=True, failure_kw="FAIL")
    assert classify_email(rules, "FA", "IL") is PingKind.IGN


def test_email_without_keywords_matches_nothing_and_default_fail_applies() -> None:
    rules = KeywordFilter(filter_subject=True, filter_default_fail=True)
    assert classify_email(rules, "Backup done", "") is PingKind.FAIL


keyword = st.text(alphabet=st.characters(blacklist_characters=",", blacklist_categories=("Cs",)), min_size=1)
text = st.text()


@given(text, st.lists(keyword, max_size=4))
def test_matches_is_any_stripped_item_in_text(haystack: str, items: list[str]) -> None:
    expected = any(item.strip() and item.strip() in haystack for item in items)
    assert matches(haystack, ",".join(items)) is expected


@given(text, st.lists(keyword, max_size=3), st.lists(keyword, max_size=3), st.booleans())
def test_a_text_containing_a_failure_keyword_is_always_a_failure(
    haystack: str, failures: list[str], successes: list[str], default_fail: bool
) -> None:
    rules = KeywordFilter(
        failure_kw=",".join(failures), success_kw=",".join(successes), filter_default_fail=default_fail
    )
    got = classify_text(haystack, rules)
    if matches(haystack, rules.failure_kw):
        assert got is PingKind.FAIL
    else:
        assert got in (PingKind.SUCCESS, PingKind.FAIL if default_fail else PingKind.IGN)
        assert (got is PingKind.SUCCESS) is matches(haystack, rules.success_kw)


@given(st.binary(max_size=200), st.sampled_from(list(PingKind)), st.none() | st.integers(0, 255))
def test_http_classification_only_ever_yields_ping_kinds_and_keeps_explicit_ones(
    body: bytes, kind: PingKind, status: int | None
) -> None:
    got = classify_http(HTTP_ON, kind, status, body)
    if kind is PingKind.SUCCESS and status is None:
        assert got in (PingKind.SUCCESS, PingKind.FAIL, PingKind.START, PingKind.IGN)
    else:
        assert got is kind
