"""Titles are limited in UTF-8 bytes of their file name, not in characters: long CJK, emoji and combining titles
are written, read back by their full title, archived twice under the same name, and every file name fits the
file system's 255 bytes, cut where a character ends."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from aries_kernel.vault import HashEmbedder, open_vault
from aries_kernel.vault.notes import MAX_FILE_NAME_BYTES, MAX_TITLE_BYTES, _extends, sanitize_title

TITLES = {
    "cjk": "长期记忆系统在每次会话结束时更新笔记的价值并记录哪些笔记被一起使用"
    * 3,  # 96 characters, 288 bytes
    "emoji": "🧠📚" * 40,  # 4 bytes each
    "family emoji": "👨\u200d👩\u200d👧\u200d👦" * 12,  # joined by zero-width joiners: 25 bytes a family
    "skin tones": "👋🏽" * 40,
    "flags": "🇫🇷🇯🇵" * 20,  # a flag is two regional indicators
    "combining": "q\u0307\u0323" * 70,  # no precomposed form: NFC keeps the marks, 5 bytes a character
    "devanagari": "क्षत्रिय " * 30,  # virama and vowel signs are combining marks
    "ascii": "a long English title about retry budgets " * 8,  # over the old 160-character limit
}


def fits(title: str) -> None:
    assert len(f"{title}.md".encode()) <= MAX_FILE_NAME_BYTES


@pytest.mark.usefixtures("backend")  # the note on disk, its row in SQLite or in PostgreSQL
@pytest.mark.parametrize("name", list(TITLES))
def test_a_long_title_is_written_and_read_back_by_its_full_title(name: str, tmp_path: Path) -> None:
    full = TITLES[name]
    assert len(full.encode()) > MAX_TITLE_BYTES
    vault = open_vault(None, path=tmp_path / "vault", embedder=HashEmbedder())
    try:
        result = vault.add(full, f"The body of the {name} note.")
        stored = result.title
        fits(stored)
        assert (tmp_path / "vault" / result.path).is_file()
        assert Path(result.path).name.encode() == f"{stored}.md".encode()
        # Cut where a character ends: a prefix of the (normalized) title, the rest not starting with a mark,
        # joiner, selector or modifier of the last character kept.
        normalized = unicodedata.normalize("NFC", full)
        assert normalized.startswith(stored)
        rest = normalized[len(stored) :]
        assert not _extends(rest[0]) and not stored.endswith("\u200d")
        assert len(stored.encode()) > MAX_TITLE_BYTES - 30  # the budget is used, not a character count
        assert f"The body of the {name} note." in vault.read(full)
        assert vault.read(full).name == stored

        # Archived twice under one name: the second copy's " (1)" still fits.
        archived = [vault.forget(full)]
        vault.add(full, f"The body of the {name} note, again.")
        archived.append(vault.forget(full))
        assert archived[1] != archived[0]
        for rel in archived:
            assert (tmp_path / "vault" / rel).is_file()
            assert len(Path(rel).name.encode()) <= MAX_FILE_NAME_BYTES
    finally:
        for store in vault.stores:
            store.index.close()


def test_a_flag_is_never_cut_in_half() -> None:
    # One byte short of the last flag: the cut must drop both of its regional indicators, not one.
    flags = "🇫🇷" * 40
    cut = sanitize_title("x" * (MAX_TITLE_BYTES - 8 * 3 - 7) + flags)
    tail = cut.lstrip("x")
    assert len(tail) % 2 == 0 and tail == "🇫🇷" * (len(tail) // 2)
