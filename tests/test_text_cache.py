"""The source texts a codebase keeps between queries stay under their limit, the least recently used let go."""

from __future__ import annotations

from pathlib import Path

from traitlets.config import Config

from aries_kernel.codebase import Codebase
from aries_kernel.codebase.text_cache import TextCache


def test_the_least_recently_used_texts_go_first_and_the_total_stays_under_the_limit() -> None:
    cache = TextCache(10)
    cache.put("a", "aaaa")
    cache.put("b", "bbbb")
    assert cache.get("a") == "aaaa"  # now the most recently used
    cache.put("c", "cccc")
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("aaaa", None, "cccc")
    cache.put("a", "a")  # replaced, not counted twice: c (4) + a (1)
    cache.put("d", "dddddd")  # 11 > 10: c, the least recently used, goes
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == ("a", None, "dddddd")
    cache.put("huge", "x" * 11)  # larger than the whole cache: not kept, and nothing else let go for it
    assert cache.get("huge") is None and cache.get("d") == "dddddd"
    cache.pop("a")
    cache.pop("d")
    cache.pop("missing")
    assert len(cache) == 0
    cache.put("e", "e" * 10)
    assert cache.get("e") == "e" * 10


def test_a_search_over_every_file_keeps_only_the_texts_that_fit(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    return 'needle {i}'\n" + "# padding\n" * 50)
    codebase = Codebase(tmp_path, config=Config({"AriesCodebase": {"persist": False}}))
    codebase.wait_ready()
    size = len(codebase.source("m0.py"))
    codebase._texts.limit = 5 * size
    found = codebase.search("needle", limit=None)
    assert set(found["file"]) == {f"m{i}.py" for i in range(40)}
    assert 0 < len(codebase._texts) <= 5
    assert codebase.source("m3.py").startswith("def f3():")  # read again when let go
