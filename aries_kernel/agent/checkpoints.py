"""Checkpoints of the agent's turns and rewinding to them: files, kernel names and the conversation together.

A checkpoint is opened before the first call of a turn that may change state (Edit, Write, NotebookEdit, Bash,
Repl) and closed when the turn's tools are done. It records:

- **files**: for each file under the root that the turn created, changed or deleted, whichever tool did it, the
  content hash before and after (``None``: absent). Changes are found the way re-indexing finds them: the agent's
  :class:`~aries_kernel.codebase.changes.ChangeWatch` (inotify) names the paths, and content hashes
  (:func:`~aries_kernel.codebase.extract.content_hash`) decide. A Bash command or Repl code gives no warning
  before it writes, so the prior content must already be kept: the store holds a *manifest* of every file the
  project walk tracks (path -> mtime, size, hash) with each content kept once as a zlib-compressed,
  content-addressed blob under ``.aries/checkpoints/blobs/``. The first checkpoint of a root stores the tree
  (once, across kernel restarts: the manifest is on disk and only files whose mtime or size moved are read
  again); every later one reads and stores only the files the watch says changed. Edit, Write and NotebookEdit
  also capture their target before they write, so a file the walk does not track (a .gitignored one) is kept
  too; Bash and Repl changes to untracked files (ignored, in skipped folders, larger than ``max_file_bytes``)
  are not restorable, and a rewind says so.
- **names**: for each Repl step, the names of the user namespace it bound, rebound or deleted, with a
  reference to the prior object (the kernel is in-process: nothing is pickled) and the object it left. Objects
  changed in place are detected where cheap: lists, dicts, sets and bytearrays up to ``copy_items`` items are
  shallow-copied before each step (so their contents can be put back), DataFrames and Series up to
  ``hash_cells`` cells are hashed (``pandas.util.hash_pandas_object``) before and after (a change is reported,
  not restored: no copy is kept). Names starting with ``_`` and IPython's own are not followed.
- **the transcript position**: the conversation as it was before the turn (before the prompt, for a run's
  first turn).

:meth:`Checkpoints.rewind` puts back the state before a turn: files, names and conversation in one step. It
never clobbers the user: along the chain of checkpoints being undone, each file and name must be exactly what
the agent left (no one changed it in between, and it is so now); otherwise it stops, changes nothing and lists
the conflicts, and ``keep=True`` rewinds the rest and keeps the user's versions, ``force=True`` overwrites them.
A rewind writes a checkpoint of its own first, so it is undone by rewinding it (the checkpoints it undid become
active again).

File checkpoints are JSON records under ``.aries/checkpoints/records/`` and survive a kernel restart; the names
and the in-memory transcript live as long as the kernel (after a restart the conversation is cut by its
recorded length in a resumed session). Storage is pruned after every checkpoint by age (``max_age_days``),
count (``max_checkpoints``) and size (``max_bytes``, blobs of the current tree included: the oldest checkpoints
go first, and the tree's own blobs are never dropped). Every write goes through :mod:`aries_kernel.rootfs`.

A rewind writes what the store says, and anyone who can write the repository can write ``.aries/``, so every
stored file (record, manifest, blob) is *sealed*: a header line with the MAC of the user's index key
(:mod:`aries_kernel.codebase.index_key`, the key of ``index.db``) over what it is, its size and its bytes, checked
before anything in it is parsed. A blob's header records its file's size: it is inflated to at most that many
bytes and its content checked against its digest. A file that fails (no MAC, as an earlier aries-kernel wrote
them; a MAC that does not verify; a malformed body) is moved to ``set-aside/<time>/`` and named in a notice
(:attr:`Checkpoints.notices`, shown by rewind, ``%aries checkpoints`` and ``%aries status``); the other
checkpoints stay usable, and a bad manifest only means the tree is read again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from traitlets import Bool, Float, Int
from traitlets.config import Configurable

from aries_kernel import rootfs
from aries_kernel.codebase.extract import content_hash
from aries_kernel.codebase.index_key import index_key
from aries_kernel.redact import redact

__all__ = ["AriesCheckpoints", "Checkpoint", "Checkpoints", "RewindReport", "STATE_EFFECTS"]

# Tool effects that may change state: a checkpoint is opened before the first such call of a turn.
STATE_EFFECTS = frozenset({"edit", "command", "repl"})
_FILE_ARGUMENTS = ("file_path", "notebook_path")
_FOLDER = ".aries/checkpoints"
_UNSTORED = "-"  # the hash of a file over max_file_bytes: its content is not kept
_ABSENT = object()  # a name that is not bound
_FORMAT = "aries-checkpoint 1"  # the first words of every sealed file, and the MAC's domain
_HEADER_MAX = 128  # bytes of a header line at most
_HEADER = re.compile(re.escape(_FORMAT.encode()) + rb" (record|manifest|blob) ([0-9]{1,15}) ([0-9a-f]{64})")
_DIGEST = re.compile(r"[0-9a-f]{32}")  # content_hash's form
_RECORD = re.compile(r"([0-9]{6})\.ckpt")
_MANIFEST = "manifest.ckpt"
_LEGACY_MANIFEST = "manifest.json"  # an earlier aries-kernel's, unsealed
_LEGACY_RECORD = re.compile(r"([0-9]+)\.json")
_RECORD_BYTES = 1 << 26  # a record (the files and names of one turn) is read up to this size
_MANIFEST_BYTES = 1 << 30  # the manifest (the tracked tree) up to this one


class AriesCheckpoints(Configurable):
    """Settings of the agent's checkpoints (``c.AriesCheckpoints.<name> = ...``)."""

    enabled = Bool(True, help="Checkpoint each agent turn that may change state, so it can be rewound.").tag(
        config=True
    )
    max_age_days = Float(14.0, help="Checkpoints older than this many days are pruned.").tag(config=True)
    max_checkpoints = Int(200, help="At most this many checkpoints are kept (the oldest go first).").tag(
        config=True
    )
    max_bytes = Int(
        512 << 20,
        help="Bytes of .aries/checkpoints/ past which the oldest checkpoints are pruned (the current tree's own "
        "blobs are never pruned, so the store may exceed this by them alone).",
    ).tag(config=True)
    max_file_bytes = Int(
        16 << 20, help="Files larger than this are not kept: a turn's change to one is not restorable."
    ).tag(config=True)
    copy_items = Int(
        10_000,
        help="Lists, dicts and sets up to this many items are shallow-copied before each Repl step, so an "
        "in-place change can be put back.",
    ).tag(config=True)
    hash_cells = Int(
        5_000_000,
        help="DataFrames and Series up to this many cells are hashed before and after each Repl step, so an "
        "in-place change is reported.",
    ).tag(config=True)


@dataclass
class NameChange:
    """What one checkpoint did to a name: the object before (``prior``) and after, and any in-place change of
    the object that stayed bound (``inplace``: "container" with shallow copies, or "frame")."""

    prior: Any
    after: Any
    inplace: str = ""
    mutated: Any = None  # the object changed in place
    copy_before: Any = None
    copy_after: Any = None


@dataclass
class Checkpoint:
    """One turn (or one rewind) and what it changed."""

    number: int
    session: str
    turn: int | None
    kind: str  # "turn" or "rewind"
    time: float
    prompt: str
    messages: int  # length of the transcript before it
    files: dict[str, list[str | None]] = field(default_factory=dict)  # path -> [hash before, hash after]
    names: list[str] = field(default_factory=list)
    inplace: list[str] = field(default_factory=list)
    bytes: int = 0  # blob bytes stored for it
    undone_by: int | None = None
    undid: list[int] = field(default_factory=list)
    # In memory only (gone after a kernel restart).
    name_changes: dict[str, NameChange] | None = None
    transcript: list[Any] | None = None

    def record(self) -> dict[str, Any]:
        """The JSON record (what survives a restart)."""
        keys = (
            "number",
            "session",
            "turn",
            "kind",
            "time",
            "prompt",
            "messages",
            "files",
            "names",
            "inplace",
        )
        return {key: getattr(self, key) for key in keys} | {
            "bytes": self.bytes,
            "undone_by": self.undone_by,
            "undid": self.undid,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Checkpoint:
        """The checkpoint of :meth:`record`."""
        return cls(**data)


@dataclass
class RewindReport:
    """What a rewind did, or why it did nothing (``conflicts``)."""

    done: bool
    target: str
    checkpoint: int | None = None  # the rewind's own checkpoint (rewind it to undo)
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rebound: list[str] = field(default_factory=list)
    unbound: list[str] = field(default_factory=list)
    restored_inplace: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    messages: str = ""
    notices: list[str] = field(default_factory=list)  # stored files set aside since the last report

    def text(self) -> str:
        """The report in plain words."""
        if not self.done:
            lines = [
                *self.notices,
                f"Nothing was rewound to {self.target}: these changed after the agent's turn(s):",
            ]
            lines += [f"  {conflict}" for conflict in self.conflicts]
            lines.append(
                "Rewind with --keep to keep your versions of these and rewind the rest, or --force to "
                "overwrite them."
            )
            return "\n".join(lines)
        lines = [
            *self.notices,
            f"Rewound to {self.target}" + (f" (checkpoint {self.checkpoint})." if self.checkpoint else "."),
        ]
        parts = [
            ("Files restored", self.restored),
            ("Files removed", self.removed),
            ("Names rebound", self.rebound),
            ("Names unbound", self.unbound),
            ("Restored in place", self.restored_inplace),
            ("Kept (yours)", self.kept),
        ]
        lines += [f"{title}: {', '.join(items)}" for title, items in parts if items]
        lines += [f"Not restored: {item}" for item in self.not_restored]
        if self.messages:
            lines.append(self.messages)
        if self.checkpoint:
            lines.append("Undo this rewind with %aries rewind (it is the last checkpoint).")
        return "\n".join(lines)


class Checkpoints:
    """The checkpoints of one agent (one root).

    ``look()`` returns the paths (relative to the root) changed since its last call, and ``tracked()`` the
    files the project walk tracks (the agent's ChangeWatch, shared with re-indexing); ``namespace()`` is the
    user namespace (None without a kernel shell).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        look: Callable[[], Iterable[str]],
        tracked: Callable[[], Iterable[str]],
        namespace: Callable[[], dict[str, Any] | None] = lambda: None,
        *,
        config: Any = None,
        hidden: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self.root = Path(root).resolve()
        self.settings = AriesCheckpoints(config=config)
        self._look, self._tracked, self._namespace, self._hidden = look, tracked, namespace, hidden
        self.problem = ""  # why checkpoints are off, if they are
        self.notices: list[str] = []  # the stored files this kernel set aside, and why
        self._reported = 0  # notices already shown by a rewind or a listing
        self._aside = ""  # this kernel's folder under set-aside/
        self._manifest: dict[str, tuple[int, int, str]] = {}  # path -> (mtime_ns, size, hash)
        self._blobs: dict[str, int] = {}  # hash -> bytes on disk (sealed blobs a verified file refers to)
        self._strays: dict[str, int] = {}  # sealed-looking blobs nothing verified refers to (pruned)
        self._records: list[Checkpoint] = []
        self._loaded = False
        self._synced = False
        self._dirty = False
        self._stored = 0  # blob bytes written since the counter was last read
        self._open: Checkpoint | None = None
        self._touched: set[str] = set()
        self._run: tuple[str, str, list[Any]] | None = None  # (prompt, session id, transcript before it)
        self._turn: tuple[int, list[Any]] | None = None  # (turn, transcript before it)
        self._session: Any = None

    # ------------------------------------------------------------------------------------------ the loop

    def start_run(self, prompt: str, session: Any) -> None:
        """A run begins (before its prompt joins the transcript)."""
        self._session = session
        self._run = (prompt, session.id, list(session.messages))
        self._turn = None

    def start_turn(self, turn: int) -> None:
        """A turn begins: its transcript position is now (before the prompt, for the run's first turn)."""
        first = self._turn is None and self._run is not None
        messages = self._run[2] if first and self._run else list(self._session.messages)
        self._turn = (turn, messages)

    def end_run(self) -> None:
        """The run ended (or stopped): close its last checkpoint, so nothing done after it is counted in."""
        try:
            self._close()
        except OSError as exc:  # a store that cannot be written turns checkpoints off, never the run's end
            self.problem = f"{_FOLDER} cannot be written: {exc}"
        self._run = self._turn = None

    @contextmanager
    def around(self, name: str, effect: str, arguments: dict[str, Any]) -> Iterator[None]:
        """Wrap one tool call: open the turn's checkpoint before a call that may change state, capture a file
        tool's target before it writes, and follow the names a Repl step changes."""
        if effect not in STATE_EFFECTS or not self.settings.enabled or self._turn is None or self.problem:
            yield
            return
        checkpoint = self._open_checkpoint()
        if checkpoint is None:
            yield
            return
        if effect == "edit":
            for key in _FILE_ARGUMENTS:
                self._capture_target(arguments.get(key))
        namespace = self._namespace() if effect == "repl" else None
        before = self._ns_snapshot(namespace) if namespace is not None else None
        try:
            yield
        finally:
            if namespace is not None and before is not None:
                self._ns_diff(checkpoint, namespace, before)

    def end_turn(self) -> Checkpoint | None:
        """Close the turn's checkpoint, if it opened one; returns it when it recorded a change."""
        checkpoint = self._close()
        self._turn = None if self._run is None else self._turn
        return checkpoint

    # ----------------------------------------------------------------------------------------- listing

    def records(self) -> list[Checkpoint]:
        """Every checkpoint kept, oldest first."""
        self._load()
        if self._run is None:
            self._close()
        return list(self._records)

    def frame(self) -> Any:
        """The checkpoints as a DataFrame: checkpoint, turn (an integer; missing for a rewind), time, prompt,
        files changed, names changed, size, kind, state."""
        import pandas as pd

        rows = [
            {
                "checkpoint": cp.number,
                "turn": cp.turn,
                "time": datetime.fromtimestamp(cp.time).replace(microsecond=0),
                "prompt": cp.prompt if len(cp.prompt) <= 60 else cp.prompt[:59] + "…",
                "files changed": len(cp.files),
                "names changed": len(cp.names) + len(cp.inplace),
                "size": cp.bytes,
                "kind": cp.kind,
                "state": "active" if cp.undone_by is None else f"undone by {cp.undone_by}",
                "session": cp.session,
            }
            for cp in self.records()
        ]
        columns = ["checkpoint", "turn", "time", "prompt", "files changed", "names changed", "size", "kind"]
        frame = pd.DataFrame(rows, columns=[*columns, "state", "session"])
        frame["turn"] = frame["turn"].astype("Int64")  # not float: a rewind's missing turn made 1.0 and NaN
        return frame

    def store_bytes(self) -> int:
        """Bytes of blobs kept under ``.aries/checkpoints/``."""
        self._load()
        return sum(self._blobs.values()) + sum(self._strays.values())

    def new_notices(self) -> list[str]:
        """The notices (stored files set aside, and why) not shown yet by a rewind or a listing."""
        self._load()
        fresh, self._reported = self.notices[self._reported :], len(self.notices)
        return fresh

    def status(self) -> str:
        """The ``%aries status`` line, and below it the stored files this kernel set aside."""
        if self.problem:
            return f"Checkpoints: off ({self.problem})"
        if not self.settings.enabled:
            return "Checkpoints: off (c.AriesCheckpoints.enabled = False)"
        self._load()
        active = sum(cp.undone_by is None for cp in self._records)
        line = (
            f"Checkpoints: {len(self._records)} kept ({active} active), {self.store_bytes():,} bytes under "
            f"{_FOLDER}; %aries checkpoints lists them, %aries rewind [N] goes back"
        )
        return "\n".join([line, *(f"  {notice}" for notice in self.notices)])

    # --------------------------------------------------------------------------------------- rewinding

    def rewind(
        self, turn: int | None = None, *, session: Any = None, force: bool = False, keep: bool = False
    ) -> RewindReport:
        """Put back the state before ``turn`` of ``session`` (default: undo the last checkpoint): files,
        names and the conversation. Stops on a conflict unless ``force`` or ``keep`` (see the module)."""
        self._load()
        self._close()
        self._session = session if session is not None else self._session
        try:
            chain, target = self._chain(turn, session)
        except LookupError as exc:
            raise LookupError("\n".join([*self.new_notices(), str(exc)])) from None
        report = RewindReport(done=False, target=target)
        namespace = self._namespace()
        file_plan, file_conflicts, unrestorable = self._plan_files(chain)
        report.notices = self.new_notices()  # the plan sets aside blobs that fail
        name_plan, name_conflicts, name_notes = self._plan_names(chain, namespace)
        report.conflicts = file_conflicts + name_conflicts
        report.not_restored = unrestorable + name_notes
        if report.conflicts and not (force or keep):
            return report
        conflicted = {item.split(":", 1)[0] for item in report.conflicts}
        if keep:
            report.kept = sorted(conflicted)
            file_plan = {rel: want for rel, want in file_plan.items() if rel not in conflicted}
            name_plan = {name: plan for name, plan in name_plan.items() if f"name {name}" not in conflicted}
        current = session.messages if session is not None else None
        own = self._new(
            session.id if session is not None else chain[0].session,
            None,
            "rewind",
            f"rewind to {target}",
            list(current) if current is not None else [],
        )
        self._sync()
        self._stored = 0
        self._apply_files(own, file_plan, report)
        if namespace is not None:
            self._apply_names(own, namespace, name_plan, report)
        report.messages = self._apply_transcript(chain[0], session)
        for cp in chain:  # what a rewind in the chain had undone is in force again
            for number in cp.undid:
                for other in self._records:
                    if other.number == number and other.undone_by == cp.number:
                        other.undone_by = None
                        self._save_record(other)
        for cp in chain:
            cp.undone_by = own.number
            self._save_record(cp)
        own.undid = [cp.number for cp in chain]
        own.bytes = self._take_stored()
        self._keep(own)
        report.done, report.checkpoint = True, own.number
        return report

    def _chain(self, turn: int | None, session: Any) -> tuple[list[Checkpoint], str]:
        session_id = session.id if session is not None else None
        active = [cp for cp in self._records if cp.undone_by is None]
        if session_id is None and active:
            session_id = active[-1].session
        active = [cp for cp in active if cp.session == session_id]
        if turn is None:
            if not active:
                raise LookupError("There is no checkpoint to rewind (no agent turn changed anything yet).")
            last = active[-1]
            what = f"before turn {last.turn}" if last.kind == "turn" else f"before checkpoint {last.number}"
            return [last], what
        first = next((cp for cp in active if cp.kind == "turn" and (cp.turn or 0) >= turn), None)
        if first is None:
            turns = sorted({cp.turn for cp in active if cp.turn is not None})
            listed = ", ".join(map(str, turns)) or "none"
            raise LookupError(
                f"No active checkpoint at or after turn {turn} in this session (turns with one: {listed})."
            )
        return [cp for cp in active if cp.number >= first.number], f"before turn {turn}"

    def _plan_files(
        self, chain: list[Checkpoint]
    ) -> tuple[dict[str, tuple[str | None, bytes]], list[str], list[str]]:
        """The content each file goes back to (its hash and its verified bytes; None: removed), the
        conflicts, and what cannot be restored."""
        history: dict[str, list[list[str | None]]] = {}
        for cp in chain:
            for rel, pair in cp.files.items():
                history.setdefault(rel, []).append(pair)
        plan: dict[str, tuple[str | None, bytes]] = {}
        conflicts, unrestorable = [], []
        for rel, pairs in sorted(history.items()):
            want = pairs[0][0]
            if want == _UNSTORED or (want is not None and want not in self._blobs):
                unrestorable.append(f"{rel}: its content before was not kept (over max_file_bytes or pruned)")
                continue
            content = b""
            if want is not None:
                try:
                    content = self._blob(want)
                except _Unusable as exc:
                    unrestorable.append(f"{rel}: its content before cannot be used: the stored blob {exc}")
                    continue
            between = any(pairs[i][1] != pairs[i + 1][0] for i in range(len(pairs) - 1))
            now = self._hash_now(rel)
            if between or now != pairs[-1][1]:
                conflicts.append(f"{rel}: changed since the agent's turn")
            plan[rel] = (want, content)
        return plan, conflicts, unrestorable

    def _plan_names(
        self, chain: list[Checkpoint], namespace: dict[str, Any] | None
    ) -> tuple[dict[str, tuple[Any, NameChange | None]], list[str], list[str]]:
        """For each name: the object to bind (or _ABSENT) and the in-place record to restore it from; the
        conflicts; and what cannot be restored."""
        history: dict[str, list[NameChange]] = {}
        notes: list[str] = []
        for cp in chain:
            if cp.name_changes is None:
                if cp.names or cp.inplace:
                    notes.append(
                        f"names {', '.join(cp.names + cp.inplace)} of checkpoint {cp.number}: the kernel was "
                        "restarted since (names live as long as the kernel)"
                    )
                continue
            for name, change in cp.name_changes.items():
                history.setdefault(name, []).append(change)
        if namespace is None:
            if history:
                notes.append(f"names {', '.join(sorted(history))}: there is no kernel namespace here")
            return {}, [], notes
        plan: dict[str, tuple[Any, NameChange | None]] = {}
        conflicts = []
        for name, changes in sorted(history.items()):
            target = changes[0].prior
            between = any(changes[i].after is not changes[i + 1].prior for i in range(len(changes) - 1))
            now = namespace.get(name, _ABSENT)
            last = changes[-1]
            drifted = now is not last.after or (
                last.inplace == "container"
                and last.mutated is now
                and not _same_contents(now, last.copy_after)
            )
            if between or drifted:
                conflicts.append(f"name {name}: rebound or changed since the agent's turn")
            inplace = next((c for c in changes if c.inplace and c.mutated is target), None)
            if inplace is not None and inplace.inplace == "frame":
                notes.append(
                    f"{name}: the {type(target).__name__} was changed in place; its contents before were not "
                    "kept (only a hash), so it keeps its current contents"
                )
            plan[name] = (target, inplace)
        return plan, conflicts, notes

    def _apply_files(
        self, own: Checkpoint, plan: dict[str, tuple[str | None, bytes]], report: RewindReport
    ) -> None:
        for rel, (want, content) in plan.items():
            now = self._refresh(rel)  # its current content kept first: undoing this rewind puts it back
            if now == want:
                continue
            if want is None:
                rootfs.remove(self.root, rel, walked=True)
                report.removed.append(rel)
            else:
                rootfs.write_bytes(self.root, rel, content)
                report.restored.append(rel)
            own.files[rel] = [now, want]
            self._refresh(rel)
        self._dirty = True
        self._save_manifest()

    def _apply_names(
        self,
        own: Checkpoint,
        namespace: dict[str, Any],
        plan: dict[str, tuple[Any, NameChange | None]],
        report: RewindReport,
    ) -> None:
        changes = own.name_changes = {}
        for name, (target, inplace) in plan.items():
            now = namespace.get(name, _ABSENT)
            if now is not target:
                if target is _ABSENT:
                    namespace.pop(name, None)
                    report.unbound.append(name)
                else:
                    namespace[name] = target
                    report.rebound.append(name)
                changes[name] = NameChange(prior=now, after=target)
            if inplace is not None and inplace.inplace == "container":
                before = _shallow_copy(target, sys.maxsize)
                _put_contents(target, inplace.copy_before)
                change = changes.setdefault(name, NameChange(prior=target, after=target))
                change.inplace, change.mutated, change.copy_before = "container", target, before
                change.copy_after = _shallow_copy(target, sys.maxsize)
                report.restored_inplace.append(name)
        own.names = sorted(n for n, c in changes.items() if c.prior is not c.after)
        own.inplace = sorted(n for n, c in changes.items() if c.inplace)

    def _apply_transcript(self, first: Checkpoint, session: Any) -> str:
        if session is None:
            return "The conversation was not changed (no agent session is open; %aries resume opens one)."
        if session.id != first.session:
            return f"The conversation was not changed (the checkpoint belongs to session {first.session})."
        messages = first.transcript
        if messages is None:  # after a restart: the resumed session cut at the recorded length
            if first.messages > len(session.messages):
                return "The conversation was not changed (it was compacted since; its length no longer fits)."
            messages = session.messages[: first.messages]
        session.replace_messages(list(messages), "rewind")
        return f"The conversation now ends before it: {len(messages)} message(s)."

    # --------------------------------------------------------------------------------------- checkpoints

    def _open_checkpoint(self) -> Checkpoint | None:
        assert self._turn is not None
        turn, messages = self._turn
        if self._open is not None and self._open.turn == turn and self._open.kind == "turn":
            return self._open
        self._close()
        try:
            self._load()
            self._sync()
        except OSError as exc:  # a read-only or symlinked .aries: the agent works on without checkpoints
            self.problem = f"{_FOLDER} cannot be written: {exc}"
            return None
        prompt, session_id = (self._run[0], self._run[1]) if self._run else ("", "")
        self._stored = 0
        self._open = self._new(session_id, turn, "turn", prompt, messages)
        self._open.name_changes = {}
        self._touched = set()
        return self._open

    def _new(self, session: str, turn: int | None, kind: str, prompt: str, messages: list[Any]) -> Checkpoint:
        number = max((cp.number for cp in self._records), default=0) + 1
        if self._open is not None:
            number = max(number, self._open.number + 1)
        return Checkpoint(
            number,
            session,
            turn,
            kind,
            time.time(),
            redact(prompt),  # as the session log holds it
            len(messages),
            transcript=messages,
            name_changes={},
        )

    def _close(self) -> Checkpoint | None:
        checkpoint, self._open = self._open, None
        if checkpoint is None:
            return None
        for rel in sorted(set(self._look()) | self._touched):
            before = self._manifest.get(rel)
            after = self._refresh(rel)
            before_hash = before[2] if before else None
            if before_hash != after:
                checkpoint.files[rel] = [before_hash, after]
        self._touched = set()
        changes = checkpoint.name_changes or {}
        checkpoint.names = sorted(n for n, c in changes.items() if c.prior is not c.after)
        checkpoint.inplace = sorted(n for n, c in changes.items() if c.inplace)
        checkpoint.bytes = self._take_stored()
        self._save_manifest()
        if not (checkpoint.files or checkpoint.names or checkpoint.inplace):
            return None
        self._keep(checkpoint)
        return checkpoint

    def _keep(self, checkpoint: Checkpoint) -> None:
        self._records.append(checkpoint)
        self._save_record(checkpoint)
        self.prune()

    def _take_stored(self) -> int:
        stored, self._stored = self._stored, 0
        return stored

    # ----------------------------------------------------------------------------------------- pruning

    def prune(self) -> None:
        """Drop checkpoints past ``max_age_days``, then the oldest past ``max_checkpoints`` and ``max_bytes``,
        and the blobs nothing refers to any more (the current tree's never)."""
        settings = self.settings
        oldest = time.time() - settings.max_age_days * 86400
        keep = [cp for cp in self._records if cp.time >= oldest]
        keep = keep[max(len(keep) - max(settings.max_checkpoints, 0), 0) :]
        tree = {entry[2] for entry in self._manifest.values()}
        while True:
            wanted = tree | _hashes(keep)
            if not keep or sum(self._blobs.get(h, 0) for h in wanted) <= settings.max_bytes:
                break
            keep.pop(0)
        for cp in self._records:
            if cp not in keep:
                rootfs.remove(self.root, _record_path(cp.number))
        self._records = keep
        wanted = tree | _hashes(keep)
        for digest in [h for h in self._blobs if h not in wanted]:
            rootfs.remove(self.root, _blob_path(digest))
            del self._blobs[digest]
        for digest in self._strays:
            rootfs.remove(self.root, _blob_path(digest))
        self._strays.clear()

    # ---------------------------------------------------------------------------------------- the store

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for part in ("records", "blobs"):
            rootfs.require_real_folders(self.root, f"{_FOLDER}/{part}")
        base = self.root / _FOLDER
        self._manifest = self._read_manifest()
        records = []
        for entry in _listed(base / "records"):
            checkpoint = self._read_record(entry.name)
            if checkpoint is not None:
                records.append(checkpoint)
        self._records = sorted(records, key=lambda cp: cp.number)
        referred = {entry[2] for entry in self._manifest.values()} | _hashes(self._records)
        legacy = []
        for folder in _listed(base / "blobs"):
            if folder.is_symlink():  # blobs written into it would land where it points
                where = self._set_aside(f"blobs/{folder.name}")
                self.notices.append(f"{_FOLDER}/blobs/{folder.name} is a symlink, not a folder: {where}")
                continue
            for entry in _listed(Path(folder.path)):
                digest, _, suffix = entry.name.partition(".")
                if not (_DIGEST.fullmatch(digest) and digest[:2] == folder.name):
                    continue
                if not suffix:
                    legacy.append(f"blobs/{folder.name}/{entry.name}")
                elif suffix == "blob":
                    size = entry.stat(follow_symlinks=False).st_size
                    (self._blobs if digest in referred else self._strays)[digest] = size
        if legacy:
            aside = [self._set_aside(rel) for rel in legacy]
            self.notices.append(
                f"{len(legacy):,} blob(s) without a MAC (an earlier aries-kernel's, or planted) are not used: "
                f"{aside[0]}" + (f" (and {len(aside) - 1:,} more beside it)" if len(aside) > 1 else "")
            )

    def _read_manifest(self) -> dict[str, tuple[int, int, str]]:
        """The verified manifest (empty when there is none or it fails: the tree is then read again)."""
        if rootfs.exists(self.root, f"{_FOLDER}/{_LEGACY_MANIFEST}", follow_links=False):
            where = self._set_aside(_LEGACY_MANIFEST)
            self.notices.append(f"{_FOLDER}/{_LEGACY_MANIFEST} carries no MAC: not used, {where}")
        try:
            data, _ = rootfs.read_regular(self.root, f"{_FOLDER}/{_MANIFEST}", _MANIFEST_BYTES)
            if len(data) > _MANIFEST_BYTES:
                raise _Unusable(f"is over {_MANIFEST_BYTES:,} bytes")
            _, body = _opened(data, "manifest", "manifest")
            return _checked_manifest(_parsed(body))
        except rootfs.MissingPathError:
            return {}
        except (_Unusable, OSError) as exc:
            why = exc if isinstance(exc, _Unusable) else f"cannot be read ({exc})"
            where = self._set_aside(_MANIFEST)
            self.notices.append(
                f"{_FOLDER}/{_MANIFEST} is not used: it {why}; {where} (the tracked tree is read again)"
            )
            return {}

    def _read_record(self, name: str) -> Checkpoint | None:
        """The checkpoint of ``records/<name>`` once its MAC verifies and its fields are well formed; else the
        file is set aside with a notice, and None."""
        sealed, legacy = _RECORD.fullmatch(name), _LEGACY_RECORD.fullmatch(name)
        named = sealed or legacy
        shown = f"checkpoint {int(named.group(1))}" if named else "a file"
        try:
            if sealed is None:
                raise _Unusable(_NO_MAC if legacy else "is not named as a checkpoint record (NNNNNN.ckpt)")
            data, _ = rootfs.read_regular(self.root, f"{_FOLDER}/records/{name}", _RECORD_BYTES)
            if len(data) > _RECORD_BYTES:
                raise _Unusable(f"is over {_RECORD_BYTES:,} bytes")
            _, body = _opened(data, "record", sealed.group(1))
            return _checked_record(_parsed(body), int(sealed.group(1)))
        except rootfs.MissingPathError:
            return None  # pruned by another kernel since the listing
        except (_Unusable, OSError) as exc:
            why = exc if isinstance(exc, _Unusable) else f"cannot be read ({exc})"
            where = self._set_aside(f"records/{name}")
            self.notices.append(f"{shown} ({_FOLDER}/records/{name}) is not used: it {why}; {where}")
            return None

    def _set_aside(self, rel: str) -> str:
        """Move ``rel`` (under the store) to this kernel's folder under ``set-aside/``; says where it went."""
        if not self._aside:
            self._aside = f"{_FOLDER}/set-aside/{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        target = f"{self._aside}/{rel}"
        try:
            rootfs.move(self.root, f"{_FOLDER}/{rel}", target, follow_links=False)
        except OSError as exc:
            return f"left in place (it could not be moved: {exc})"
        return f"set aside to {target}"

    def _sync(self) -> None:
        """Bring the manifest up to date: everything changed since the last look, and on the first sync of
        this kernel the whole tracked tree (read again only where mtime or size moved)."""
        changed = set(self._look())
        if not self._synced:
            self._synced = True
            tracked = set(self._tracked())
            for rel in [rel for rel in self._manifest if rel not in tracked]:
                if not os.path.lexists(self.root / rel):
                    del self._manifest[rel]
                    self._dirty = True
            changed |= tracked
        for rel in sorted(changed):
            self._refresh(rel)
        self._save_manifest()

    def _refresh(self, rel: str) -> str | None:
        """The hash of ``rel`` now (None: absent, not a regular file), its blob stored and manifest updated."""
        entry = self._manifest.get(rel)
        try:
            info = os.lstat(self.root / rel)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            if entry is not None:
                del self._manifest[rel]
                self._dirty = True
            return None
        if (
            entry is not None
            and entry[:2] == (info.st_mtime_ns, info.st_size)
            and (entry[2] == _UNSTORED or entry[2] in self._blobs)
        ):
            return entry[2]
        limit = self.settings.max_file_bytes
        try:
            with rootfs.located(self.root, rel, walked=True) as place:
                assert place.name is not None
                data, info = rootfs.read_stat_at(place.dir_fd, place.name, limit, rel)
        except OSError:  # gone, or a symlinked folder on the way, since it was looked at
            self._manifest.pop(rel, None)
            self._dirty = True
            return None
        digest = _UNSTORED if len(data) > limit else content_hash(data)
        if digest != _UNSTORED and digest not in self._blobs:
            sealed = _sealed("blob", digest, len(data), zlib.compress(data, 1))
            rootfs.write_bytes(self.root, _blob_path(digest), sealed)
            self._strays.pop(digest, None)
            self._blobs[digest] = len(sealed)
            self._stored += len(sealed)
        self._manifest[rel] = (info.st_mtime_ns, info.st_size, digest)
        self._dirty = True
        return digest

    def _capture_target(self, path: object) -> None:
        """Keep the current content of a file tool's target before it writes (a file the walk does not track
        included); the turn's close compares it."""
        if not isinstance(path, str):
            return
        try:
            rel = rootfs.resolve(self.root, path)
        except OSError:
            return  # the tool refuses this path itself, with its own message
        if rel and not rel.startswith(".aries/"):
            self._refresh(rel)
            self._touched.add(rel)

    def _hash_now(self, rel: str) -> str | None:
        try:
            data, _ = rootfs.read_regular(self.root, rel, self.settings.max_file_bytes, walked=True)
        except rootfs.MissingPathError:
            return None
        except OSError:
            return _UNSTORED
        return _UNSTORED if len(data) > self.settings.max_file_bytes else content_hash(data)

    def _blob(self, digest: str) -> bytes:
        """The content of the blob ``digest`` once its MAC verifies, inflated to at most its recorded size and
        checked against the digest; :class:`_Unusable` says why not. A blob that fails is set aside (a file of
        the tree with this content stores it again); one only over ``max_file_bytes`` stays."""
        limit = self.settings.max_file_bytes
        bound = _HEADER_MAX + _packed_bound(limit)
        try:
            data, _ = rootfs.read_regular(self.root, _blob_path(digest), bound)
        except OSError as exc:
            raise _Unusable(f"cannot be read ({exc})") from None
        if len(data) > bound:
            raise _Unusable(f"is larger than a file of max_file_bytes ({limit:,} bytes) packs into")
        try:
            size, packed = _opened(data, "blob", digest)
            if size <= limit:
                return _inflated(packed, size, digest)
        except _Unusable as exc:
            where = self._set_aside(_blob_path(digest).removeprefix(f"{_FOLDER}/"))
            self._blobs.pop(digest, None)
            self.notices.append(f"blob {digest} is not used: it {exc}; {where}")
            raise
        raise _Unusable(f"holds {size:,} bytes, over max_file_bytes ({limit:,})")

    def _save_manifest(self) -> None:
        if not self._dirty:
            return
        body = json.dumps(self._manifest, separators=(",", ":")).encode()
        rootfs.write_bytes(
            self.root, f"{_FOLDER}/{_MANIFEST}", _sealed("manifest", "manifest", len(body), body)
        )
        self._dirty = False

    def _save_record(self, checkpoint: Checkpoint) -> None:
        body = json.dumps(checkpoint.record(), indent=1).encode()
        name = f"{checkpoint.number:06d}"
        rootfs.write_bytes(
            self.root, _record_path(checkpoint.number), _sealed("record", name, len(body), body)
        )

    # ------------------------------------------------------------------------------------- the namespace

    def _followed(self, namespace: dict[str, Any]) -> Iterator[str]:
        hidden = set(self._hidden())
        for name in namespace:
            if not name.startswith("_") and name not in hidden and name not in ("In", "Out"):
                yield name

    def _ns_snapshot(self, namespace: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Each followed name's object and its in-place fingerprint (a shallow copy, a hash, or None)."""
        return {
            name: (namespace[name], self._fingerprint(namespace[name])) for name in self._followed(namespace)
        }

    def _fingerprint(self, value: Any) -> Any:
        copied = _shallow_copy(value, self.settings.copy_items)
        if copied is not None:
            return ("container", copied)
        digest = _frame_hash(value, self.settings.hash_cells)
        return ("frame", digest) if digest is not None else None

    def _ns_diff(
        self, checkpoint: Checkpoint, namespace: dict[str, Any], before: dict[str, tuple[Any, Any]]
    ) -> None:
        changes = checkpoint.name_changes if checkpoint.name_changes is not None else {}
        for name in set(before) | set(self._followed(namespace)):
            prior, fingerprint = before.get(name, (_ABSENT, None))
            now = namespace.get(name, _ABSENT)
            if name in changes:
                change = changes[name]
                change.after = now
                _note_inplace(change, prior, now, fingerprint, self.settings.hash_cells)
                continue
            if now is not prior:
                changes[name] = NameChange(prior=prior, after=now)
                continue
            change = NameChange(prior=prior, after=now)
            if _note_inplace(change, prior, now, fingerprint, self.settings.hash_cells):
                changes[name] = change
        checkpoint.name_changes = changes


def _note_inplace(change: NameChange, prior: Any, now: Any, fingerprint: Any, cells: int) -> bool:
    """Record on ``change`` that the object bound through a step (``prior`` is ``now``) was changed in place;
    returns whether it was."""
    if fingerprint is None or now is not prior:
        return False
    if change.inplace:
        if change.mutated is now and change.inplace == "container":  # changed again by a later step
            change.copy_after = _shallow_copy(now, sys.maxsize)
        return change.mutated is now
    kind, value = fingerprint
    if kind == "container":
        if _same_contents(now, value):
            return False
        change.copy_before, change.copy_after = value, _shallow_copy(now, sys.maxsize)
    elif _frame_hash(now, cells) == value:
        return False
    change.inplace, change.mutated = kind, now
    return True


def _shallow_copy(value: Any, limit: int) -> Any:
    """A shallow copy of a list, dict, set or bytearray of at most ``limit`` items (else None)."""
    if type(value) in (list, dict, set, bytearray) and len(value) <= limit:
        return type(value)(value)
    return None


def _same_contents(value: Any, copy: Any) -> bool:
    """Whether ``value`` holds what the shallow ``copy`` holds (the same objects, for lists and dicts)."""
    if type(value) is not type(copy) or len(value) != len(copy):
        return False
    if isinstance(value, list):
        return all(a is b for a, b in zip(value, copy, strict=True))
    if isinstance(value, dict):
        return value.keys() == copy.keys() and all(value[k] is copy[k] for k in value)
    return bool(value == copy)


def _put_contents(value: Any, copy: Any) -> None:
    """Set a container's contents back to its shallow ``copy``, in place (every reference sees it)."""
    if isinstance(value, (list, bytearray)):
        value[:] = copy
    else:
        value.clear()
        value.update(copy)


def _frame_hash(value: Any, cells: int) -> str | None:
    """A hash of a DataFrame or Series of at most ``cells`` cells (None: not one, too big, or unhashable)."""
    pandas = sys.modules.get("pandas")  # never imported here: a namespace without pandas has no frames
    if pandas is None or not isinstance(value, (pandas.DataFrame, pandas.Series)) or value.size > cells:
        return None
    try:
        rows = pandas.util.hash_pandas_object(value, index=True).to_numpy()
    except (TypeError, ValueError):  # unhashable cells (lists, dicts)
        return None
    labels: tuple[Any, ...]
    if isinstance(value, pandas.DataFrame):
        labels = (list(value.columns), [str(dtype) for dtype in value.dtypes])
    else:
        labels = (value.name, str(value.dtype))
    shape = repr((value.shape, labels)).encode()
    return hashlib.blake2b(rows.tobytes() + shape, digest_size=16).hexdigest()


def _hashes(checkpoints: Iterable[Checkpoint]) -> set[str]:
    return {h for cp in checkpoints for pair in cp.files.values() for h in pair if h and h != _UNSTORED}


def _blob_path(digest: str) -> str:
    return f"{_FOLDER}/blobs/{digest[:2]}/{digest}.blob"


def _record_path(number: int) -> str:
    return f"{_FOLDER}/records/{number:06d}.ckpt"


# ------------------------------------------------------------------------------------------ sealed files


class _Unusable(ValueError):
    """A stored file that is not used; the message says why, as a phrase after "it" ("carries no MAC")."""


_NO_MAC = (
    "carries no MAC (an aries-kernel that did not seal checkpoints wrote it, or it was planted), so it is not "
    "trusted"
)


def _sealed(kind: str, name: str, size: int, body: bytes) -> bytes:
    """A stored file: the header line (format, kind, size, and the MAC of the user's index key over the kind,
    the name, the size and ``body``), then ``body``. ``size`` is a blob's content size, else ``len(body)``."""
    tag = index_key().tag((f"{kind} {name}", size, 0, _FORMAT), body)
    return f"{_FORMAT} {kind} {size} {tag.hex()}\n".encode() + body


def _opened(data: bytes, kind: str, name: str) -> tuple[int, bytes]:
    """The recorded size and the body of a file :func:`_sealed` wrote as ``kind`` ``name``, once its MAC
    verifies (nothing in it is parsed before); raises :class:`_Unusable`."""
    if not data.startswith(f"{_FORMAT} ".encode()):
        raise _Unusable(_NO_MAC)
    end = data.find(b"\n", 0, _HEADER_MAX)
    header = _HEADER.fullmatch(data[:end]) if end > 0 else None
    if header is None or header[1] != kind.encode():
        raise _Unusable(f"has a malformed header (not a sealed {kind})")
    size, body = int(header[2]), data[end + 1 :]
    key = index_key()
    if not key.verifies((f"{kind} {name}", size, 0, _FORMAT), body, bytes.fromhex(header[3].decode())):
        raise _Unusable(
            "does not verify under this user's index key (it changed since it was written, or another key "
            "wrote it)"
            + ("" if key.persistent else "; this kernel has no per-user key (see ARIES_INDEX_KEY)")
        )
    return size, body


def _inflated(packed: bytes, size: int, digest: str) -> bytes:
    """The ``size`` bytes ``packed`` inflates to, never more (a small blob may inflate to GiBs), checked against
    ``digest``; raises :class:`_Unusable`."""
    inflater = zlib.decompressobj()
    try:
        content = inflater.decompress(packed, size + 1)
    except zlib.error as exc:
        raise _Unusable(f"does not inflate ({exc})") from None
    if len(content) != size or not inflater.eof or inflater.unused_data:
        raise _Unusable(f"does not inflate to its recorded {size:,} bytes")
    if content_hash(content) != digest:
        raise _Unusable("does not hold the content its digest names")
    return content


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise _Unusable("nests too deep") from None
    except ValueError as exc:
        raise _Unusable(f"is not JSON ({exc})") from None


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_hash(value: Any) -> bool:
    return value == _UNSTORED or (isinstance(value, str) and _DIGEST.fullmatch(value) is not None)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_files(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(pair, list) and len(pair) == 2 and all(h is None or _is_hash(h) for h in pair)
        for pair in value.values()
    )


_RECORD_FIELDS: dict[str, Callable[[Any], bool]] = {
    "number": _is_count,
    "session": lambda value: isinstance(value, str),
    "turn": lambda value: value is None or _is_count(value),
    "kind": lambda value: value in ("turn", "rewind"),
    "time": lambda value: type(value) in (int, float) and math.isfinite(value),
    "prompt": lambda value: isinstance(value, str),
    "messages": _is_count,
    "files": _is_files,
    "names": _is_names,
    "inplace": _is_names,
    "bytes": _is_count,
    "undone_by": lambda value: value is None or _is_count(value),
    "undid": lambda value: isinstance(value, list) and all(map(_is_count, value)),
}


def _checked_record(data: Any, number: int) -> Checkpoint:
    """The checkpoint of a verified record, each field of its type; raises :class:`_Unusable` naming the
    first that is not."""
    if not isinstance(data, dict) or set(data) != set(_RECORD_FIELDS):
        raise _Unusable("is not a checkpoint record (its fields are not a checkpoint's)")
    wrong = next((name for name, valid in _RECORD_FIELDS.items() if not valid(data[name])), None)
    if wrong is not None:
        raise _Unusable(f"is malformed (field {wrong!r})")
    if data["number"] != number:
        raise _Unusable(f"holds checkpoint {data['number']}, not the {number} of its name")
    return Checkpoint.from_record(data)


def _checked_manifest(data: Any) -> dict[str, tuple[int, int, str]]:
    """The manifest of a verified body: path -> (mtime_ns, size, hash); raises :class:`_Unusable`."""
    if not isinstance(data, dict):
        raise _Unusable(f"is a JSON {type(data).__name__}, not a map of paths")
    for rel, entry in data.items():
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and type(entry[0]) is int
            and _is_count(entry[1])
            and _is_hash(entry[2])
        ):
            raise _Unusable(f"is malformed (the entry of {rel!r})")
    return {rel: (entry[0], entry[1], entry[2]) for rel, entry in data.items()}


def _packed_bound(size: int) -> int:
    """The most bytes zlib packs ``size`` bytes into (zlib's compressBound)."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + 13


def _listed(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return [entry for entry in entries if not entry.name.startswith(".")]
    except OSError:
        return []
