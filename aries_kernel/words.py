"""The one stop-word list and the one stemmer, for every bag of words Aries matches: the echo detector's titles
and responses, the vault's BM25 queries, the codebase's location search and its community labels.

Each user adds the words of its own domain to :data:`STOP_WORDS` (code words for code, filler for labels); the
English function words are these.
"""

from __future__ import annotations

__all__ = ["STOP_WORDS", "stem"]

# English function words: they match most texts and say little about any one of them.
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each either every few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most my no nor
    not now of off on once only or other our ours out over own same she should so some such than that the
    their theirs them then there these they this those through to too under until up us very via was we
    were what when where which while who whom unless why will with would yet you your yours""".split()
)


def stem(word: str) -> str:
    """A light suffix stripper: plurals, -ing, -ed, -ly, doubled consonants, final e and y ("caching" ->
    "cach")."""
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and len(w) > 3 and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif (w.endswith("ed") and len(w) > 4) or (w.endswith("ly") and len(w) > 5):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w.endswith("y"):
        w = w[:-1] + "i"
    return w
