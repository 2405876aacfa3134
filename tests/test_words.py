"""One stop-word list and one stemmer (aries_kernel.words) for every bag of words Aries matches."""

from __future__ import annotations

import ast
from pathlib import Path

from aries_kernel.codebase.judgment import _word_tokens
from aries_kernel.codebase.ranking import _LABEL_STOPWORDS
from aries_kernel.words import STOP_WORDS, stem

CHECKOUT = Path(__file__).resolve().parents[1]


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
    for folder in ("aries_kernel", "magics", "widgets"):
        for path in sorted((CHECKOUT / folder).rglob("*.py")):
            rel = path.relative_to(CHECKOUT).as_posix()
            if rel == "aries_kernel/words.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in {
                    "stem",
                    "stemmed",
                    "stemmer",
                }:
                    own.append(f"{rel}:{node.lineno}: def {node.name}")
                if isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name)
                    and "STOP" in target.id.upper()
                    and "WORD" in target.id.upper()
                    for target in node.targets
                ):
                    value = node.value
                    extends = isinstance(value, ast.BinOp) and ast.unparse(value.left) == "STOP_WORDS"
                    if not (extends or ast.unparse(value) == "STOP_WORDS"):
                        own.append(f"{rel}:{node.lineno}: {ast.unparse(node.targets[0])} = ...")
    assert not own, "use aries_kernel.words (STOP_WORDS, stem):\n" + "\n".join(own)
