"""One stop-word list and one stemmer (aries_kernel.words) for every bag of words Aries matches."""

from __future__ import annotations

import ast

from aries_kernel.codebase.judgment import _word_tokens
from aries_kernel.codebase.ranking import _LABEL_STOPWORDS
from aries_kernel.words import STOP_WORDS, stem
from tests.package_sources import package_trees


def test_the_stemmer_folds_a_word_family_and_the_code_search_uses_it() -> None:
    assert stem("caching") == stem("cache") == stem("cached") == stem("caches")
    assert stem("queries") == stem("query")
    assert _word_tokens("CachingLayer") == (stem("caching"), stem("layer"))
    assert _word_tokens("the_cache_of_something") == (stem("cache"),)  # English and code filler dropped


def test_every_list_starts_from_the_english_stop_words() -> None:
    assert {"the", "and", "which", "whom"} <= STOP_WORDS
    assert STOP_WORDS <= _LABEL_STOPWORDS and {"utils", "helper"} <= _LABEL_STOPWORDS


def test_no_module_keeps_a_stemmer_or_stop_words_of_its_own() -> None:
    """A stop-word set elsewhere is STOP_WORDS plus its domain's words; a stemmer is words.stem alone."""
    own = []
    for rel, tree in package_trees(skip=("aries_kernel/words.py",)):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in {"stem", "stemmed", "stemmer"}:
                own.append(f"{rel}:{node.lineno}: def {node.name}")
            if not isinstance(node, ast.Assign):
                continue
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            if any("STOP" in name.upper() and "WORD" in name.upper() for name in names):
                extends = isinstance(node.value, ast.BinOp) and ast.unparse(node.value.left) == "STOP_WORDS"
                if not (extends or ast.unparse(node.value) == "STOP_WORDS"):
                    own.append(f"{rel}:{node.lineno}: {names[0]} = ...")
    assert not own, "use aries_kernel.words (STOP_WORDS, stem):\n" + "\n".join(own)
