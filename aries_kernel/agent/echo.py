"""The echo detector: did a model's response make use of a note it was offered?

A note *echoes* when the distinctive terms of its title turn up in the response; otherwise it *fizzles*. An
echo warms the note now and rewards it at the end of the session, so a false echo corrupts what the vault
learns while a missed one only costs a little recall: every rule here leans towards precision.

How a title is read: its words are lower-cased and lightly stemmed ("caching" and "cache" meet at "cach"),
stop words go, and each remaining term gets a weight. Generic words (common English and everyday programming
words, numbers) weigh little; identifiers (``rlm_batch``, ``float32``) weigh more; a term that many of the
vault's titles share is demoted like an inverse document frequency. A term is *distinctive* when its weight
stays high.

What counts as evidence, strongest first:
- a wiki-link to the note (``[[Title]]``) in the response;
- enough of the title's distinctive terms (all of them when there are up to three, all but one otherwise) and
  at least 60% of its total weight;
- a title with a single distinctive term needs more: that term twice, or next to another title term as in
  the title.
A title made only of generic words echoes through a wiki-link alone. Terms the user's own message already
held count at half weight, since repeating the question is not using the note.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from aries_kernel.words import STOP_WORDS, stem

__all__ = ["GENERIC_WORDS", "EchoDetector", "EchoEvidence", "content_terms"]

# Words too common in English or in any programming talk to show that a response used a particular note.
GENERIC_WORDS = frozenset(
    """able across actually add added adds again ago allow allows already always another answer anything api
    app apply around ask asks auto available away back bad base based basic become becomes begin best
    better big bit block body bound break breaks bring build built bug bugs call called calls can cannot
    case cases catch cause causes change changed changes check checks class clean clear close code come
    comes common config configure context copy correct cost could count create created current cut data
    day days default define detail details different directly do doc docs does done down each early easy
    edit else end enough error errors even event events ever every example expect fail fails false fast
    faster few field fields file files find finds first fix fixed fixes follow following form format found
    free full function functions get gets give given go goes going good got great group groups half handle
    handled handles happen hard has help helps high hold holds however idea important include includes
    input instead issue issues item items keep keeps key keys kind know large last later least leave left
    less let lets level like line lines list little live load local long look looks loop lot low main make
    makes many matter may mean means method might miss missing mode model more most move much must name
    names need needed needs never new next nice none note notes number numbers object often old one ones
    open order other output over page part pass passed path place point possible problem problems process
    program project put quick quite rather read real really reason request requests result results return
    returns right row rows run runs safe same save saves say says second see seem seems set sets several
    short should show shows side simple since single size slow small so some something sometimes start
    state step still stop string such sure system table take takes task tell test tested testing tests
    text than thing things think three time times too tool tools top true try turn two type types under up
    update updates use used useful user users uses using usually value values version want way ways well
    what whole why work works would write wrong yes zero api argument arguments avoid avoids cache cached
    caching client command commit commits connect connection database directory empty execute http import
    imports index install json kernel library log logs match memory message module output package per
    prevent prevents print prompt query queries repository response responses retry retries root script
    server session sessions speed stream streams target thread threads word words""".split()
)

_TOKEN = re.compile(r"[^\W_]+(?:_[^\W_]+)*")
_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _TOKEN.findall(text)]


def content_terms(text: str) -> list[str]:
    """The stems of ``text`` in order, stop words and one-letter words left out (repeats kept).

    An identifier also yields its parts, so ``input_json_delta`` in a response meets "delta" in a title.
    """
    terms: list[str] = []
    for word in _words(text):
        parts = [word, *word.split("_")] if "_" in word else [word]
        terms.extend(stem(w) for w in parts if len(w) > 1 and w not in STOP_WORDS)
    return terms


_GENERIC_STEMS = frozenset(stem(w) for w in GENERIC_WORDS)


def _is_identifier(word: str) -> bool:
    """snake_case, letters with digits (``float32``) or inner capitals (``useEffect``)."""
    return (
        "_" in word
        or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word))
        or bool(re.search(r"[a-z][A-Z]", word))
    )


@dataclass
class EchoEvidence:
    """Why a title did or did not echo: its weighted terms, those the response held, and the verdict."""

    title: str
    echoed: bool
    reason: str
    terms: dict[str, float] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)
    coverage: float = 0.0


class EchoDetector:
    """Decides, title by title, whether a response referred to a note.

    ``titles`` is the vocabulary the weights are measured against (the vault's titles); with fewer than ten,
    only the general word lists decide what is generic.
    """

    min_coverage = 0.6
    distinctive_weight = 0.6

    def __init__(self, titles: Iterable[str] = ()) -> None:
        self._df: Counter[str] = Counter()
        self._n = 0
        for title in titles:
            self._df.update(set(content_terms(title)))
            self._n += 1

    def weight(self, term: str, original: str = "") -> float:
        """How much finding ``term`` says about a reference: low for generic words, high for identifiers."""
        if term.isdigit() or term in _GENERIC_STEMS or original.casefold() in GENERIC_WORDS:
            base = 0.25
        elif _is_identifier(original or term):
            base = 1.5
        else:
            base = 1.0
        df = self._df.get(term, 0)
        if self._n >= 10 and df > 1:
            # A term in more than a tenth of the titles tells notes apart less well: demote it smoothly.
            base *= max(0.2, min(1.0, math.log((self._n + 1) / df) / math.log(10)))
        return base

    def title_terms(self, title: str) -> dict[str, float]:
        """The title's distinct content terms with their weights, in title order."""
        terms: dict[str, float] = {}
        for original in _TOKEN.findall(title):
            word = original.casefold()
            if len(word) < 2 or word in STOP_WORDS:
                continue
            term = stem(word)
            terms[term] = max(terms.get(term, 0.0), self.weight(term, original))
        return terms

    def evidence(self, title: str, response: str, prompt: str = "") -> EchoEvidence:
        """Judge one title against one response; ``prompt`` is the user's message, whose terms count half."""
        if any(_same_title(link, title) for link in _WIKILINK.findall(response)):
            return EchoEvidence(title, True, "wiki-link to the note")
        terms = self.title_terms(title)
        if not terms:
            return EchoEvidence(title, False, "the title has no content words")
        said = content_terms(response)
        counts = Counter(said)
        asked = set(content_terms(prompt))
        matched = [t for t in terms if counts[t]]
        total = sum(terms.values())
        got = sum(terms[t] * (0.5 if t in asked else 1.0) for t in matched)
        coverage = got / total
        distinctive = [t for t, w in terms.items() if w >= self.distinctive_weight]
        hits = [t for t in distinctive if counts[t]]
        found = EchoEvidence(title, False, "", terms, matched, round(coverage, 3))
        if not distinctive:
            found.reason = "only generic words in the title; a wiki-link is needed"
            return found
        needed = len(distinctive) if len(distinctive) <= 3 else len(distinctive) - 1
        if len(hits) < needed:
            found.reason = f"{len(hits)} of {len(distinctive)} distinctive terms (need {needed})"
            return found
        if coverage < self.min_coverage:
            found.reason = f"coverage {coverage:.2f} below {self.min_coverage}"
            return found
        if len(distinctive) == 1 and len(terms) >= 1:
            key = distinctive[0]
            if counts[key] < 2 and not _adjacent(list(terms), said, key):
                found.reason = f"a single distinctive term {key!r}, named once and not in a title phrase"
                return found
        found.echoed = True
        found.reason = f"{len(hits)} of {len(distinctive)} distinctive terms, coverage {coverage:.2f}"
        return found

    def echoes(self, title: str, response: str, prompt: str = "") -> bool:
        """True when ``response`` refers to the note titled ``title``."""
        return self.evidence(title, response, prompt).echoed

    def split(self, titles: Iterable[str], response: str, prompt: str = "") -> tuple[list[str], list[str]]:
        """(echoed, fizzled) titles for one response."""
        echoed: list[str] = []
        fizzled: list[str] = []
        for title in titles:
            (echoed if self.echoes(title, response, prompt) else fizzled).append(title)
        return echoed, fizzled


def _same_title(link: str, title: str) -> bool:
    return " ".join(link.casefold().split()) == " ".join(title.casefold().split())


def _adjacent(title_terms: list[str], said: list[str], key: str) -> bool:
    """Whether ``key`` sits next to a neighbouring title term in the response, as it does in the title."""
    at = title_terms.index(key)
    neighbours = {title_terms[i] for i in (at - 1, at + 1) if 0 <= i < len(title_terms)}
    pairs = set(itertools.pairwise(said))
    return any((key, n) in pairs or (n, key) in pairs for n in neighbours)
