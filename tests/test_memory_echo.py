"""The echo detector: distinctive title terms, generic words, short titles, identifiers, the user's words."""

from __future__ import annotations

import pytest

from aries_kernel.agent.echo import EchoDetector, content_terms
from aries_kernel.words import stem

# Every test here runs on SQLite and on PostgreSQL (tests/pg_support.py).
pytestmark = pytest.mark.usefixtures("backend")


def test_stemming_meets_common_inflections() -> None:
    assert stem("caching") == stem("cache")
    assert stem("commits") == stem("committed") == stem("commit")
    assert stem("resolves") == stem("resolved")
    assert stem("lazily") == stem("lazy")


def test_identifier_parts_are_terms_of_a_response() -> None:
    terms = content_terms("fragments arrive as input_json_delta events")
    assert "input_json_delta" in terms and stem("delta") in terms


def test_response_naming_the_distinctive_terms_echoes() -> None:
    detector = EchoDetector()
    title = "SQLite WAL mode lets readers proceed while one writer commits"
    response = (
        "I turned on WAL mode for the SQLite index, so readers keep going while the single writer commits."
    )
    evidence = detector.evidence(title, response)
    assert evidence.echoed, evidence.reason
    assert {"sqlit", "wal"} <= set(evidence.matched)


def test_shared_common_words_do_not_echo() -> None:
    detector = EchoDetector()
    title = "SQLite WAL mode lets readers proceed while one writer commits"
    response = "The CSV reader proceeds line by line and commits nothing until the whole file is parsed."
    evidence = detector.evidence(title, response)
    assert not evidence.echoed
    assert "distinctive" in evidence.reason


def test_missing_the_one_specific_term_does_not_echo() -> None:
    detector = EchoDetector()
    title = "Vector clocks order events across replicas"
    assert not detector.echoes(
        title, "The clock on the replica drifted by two seconds; events arrive out of order."
    )
    assert detector.echoes(
        title, "Each replica stamps events with a vector clock, so we can order concurrent writes."
    )


def test_short_title_needs_more_than_one_mention() -> None:
    detector = EchoDetector()
    assert not detector.echoes("Flaky tests", "The flaky one was test_server.")
    assert detector.echoes("Flaky tests", "These are the flaky tests again: one fails one run in ten.")
    assert detector.echoes(
        "Pgbouncer", "Pgbouncer pools connections; with pgbouncer in front, connects are cheap."
    )


def test_generic_title_echoes_only_through_a_wiki_link() -> None:
    detector = EchoDetector()
    assert not detector.echoes("Caching", "I added caching to the loader; the cache is warm now.")
    assert detector.echoes("Caching", "Following [[caching]], the parser results are memoized.")


def test_terms_of_the_users_message_count_half() -> None:
    detector = EchoDetector()
    title = "Pgbouncer pooling cuts Postgres connect latency"
    response = "Postgres connect latency is high here; pgbouncer pooling would help."
    assert detector.echoes(title, response)
    prompt = "why is the postgres connect latency so high?"
    evidence = detector.evidence(
        title, "Postgres connect latency is high because of TLS; pgbouncer is unrelated.", prompt
    )
    assert not evidence.echoed


def test_vault_titles_demote_terms_many_notes_share() -> None:
    titles = [f"Vault note {n} about topic{n}" for n in range(30)] + ["Vault queries fuse four signals"]
    plain, informed = EchoDetector(), EchoDetector(titles)
    assert informed.weight("vault", "Vault") < plain.weight("vault", "Vault")
    assert informed.weight(stem("signals"), "signals") == plain.weight(stem("signals"), "signals")


def test_split_returns_echoed_and_fizzled_in_order() -> None:
    detector = EchoDetector()
    titles = ["Louvain communities approximate module boundaries", "Gzip compression of JSON saves bandwidth"]
    echoed, fizzled = detector.split(
        titles, "Louvain found four communities that match the module boundaries."
    )
    assert echoed == titles[:1] and fizzled == titles[1:]
