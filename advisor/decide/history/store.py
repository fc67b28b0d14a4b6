"""The run history kept across processes: an SQLite database (the standard library's `sqlite3`,
no server) in the home cache, `~/.cache/loader-advisor/history/runs.sqlite`, listed and removed
with the rest of it (`python -m advisor cache --remove history`).

One row per run: its number (shared by every kind, never reused), kind, time, data set and the
record as JSON (`records.record_to_dict`; no credential is in a record, and what looks like one,
a signed URL's signature say, is redacted before it is written). A `schema_version` table says
how the rows are written; a database of another version is refused with what to do, not read.

Two kernels may write at once: the database is in WAL mode where the file system allows it, and
a writer waits up to `BUSY_TIMEOUT_S` for another's write to end. Writing is best effort
(`keep`, `amend`): a database that cannot be written (corrupt, locked beyond the timeout, of
another version, on a full disk) is a `HistoryWarning`, and the trial or recommendation stands.
Reading (`RunStore.load`) raises `HistoryError`, whose message names the file and the remedy.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from advisor.core.errors import redact
from advisor.core.homecache import history_root
from advisor.decide.history.records import (
    ComparisonRecord,
    History,
    LoopRecord,
    Run,
    TrialRecord,
    kind_of,
    record_from_dict,
    record_to_dict,
)

__all__ = ["BUSY_TIMEOUT_S", "SCHEMA_VERSION", "HistoryError", "HistoryWarning", "RunStore",
           "amend", "keep"]  # fmt: skip

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0  # a writer waits this long for another process's write to end
FILE = "runs.sqlite"
REMOVE = "python -m advisor cache --remove history"
SCHEMA = (
    "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER)",
    "CREATE TABLE runs (number INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
    "at REAL NOT NULL, dataset TEXT NOT NULL, record TEXT NOT NULL)",
    "CREATE INDEX runs_by_dataset ON runs (dataset)",
)
R = TypeVar("R", TrialRecord, ComparisonRecord, LoopRecord)


class HistoryError(RuntimeError):
    """The run history could not be read or written; the message names the file and what to
    do about it."""


class HistoryWarning(UserWarning):
    """A run was not kept in the history (why, in the message); the run itself stands."""


def history_file() -> Path:
    return history_root() / FILE


@dataclass(frozen=True)
class RunStore:
    """The history's database at `path` (default: the home cache's); each call opens it, does
    its work in one transaction and closes it, so that any thread or process may call."""

    path: Path = field(default_factory=history_file)
    busy_timeout_s: float = BUSY_TIMEOUT_S

    def add(self, record: R) -> R:
        """Store `record` as a new run; the record numbered as the history numbers it."""
        with self._writing() as db:
            row = (kind_of(record), record.at, redact(record.dataset), _json(record))
            cursor = db.execute("INSERT INTO runs (kind, at, dataset, record) VALUES (?, ?, ?, ?)",
                                row)  # fmt: skip
            assert cursor.lastrowid is not None
            return replace(record, number=cursor.lastrowid)

    def update(self, record: Run) -> None:
        """Store `record` over the run of its number (a trial once its answer is made)."""
        with self._writing() as db:
            db.execute("UPDATE runs SET dataset = ?, record = ? WHERE number = ? AND kind = ?",
                       (redact(record.dataset), _json(record), record.number,
                        kind_of(record)))  # fmt: skip

    def load(self, dataset: str | None = None, last: int | None = None) -> History:
        """The runs, oldest first: of `dataset` only where one is given, the `last` ones only
        where a count is. Nothing stored yet (no file): an empty history, no file made."""
        if not self.path.exists():
            return History()
        query, params = "SELECT number, kind, record FROM runs", []
        if dataset is not None:
            query, params = query + " WHERE dataset = ?", [dataset]
        query += " ORDER BY number DESC" + (f" LIMIT {int(last)}" if last is not None else "")
        with self._connected() as db:
            if _version(db) is None:
                return History()
            rows = db.execute(query, params).fetchall()
        runs = [self._record(number, kind, text) for number, kind, text in reversed(rows)]
        return History(  # each kind in its tuple, oldest first
            tuple(r for r in runs if isinstance(r, TrialRecord)),
            tuple(r for r in runs if isinstance(r, ComparisonRecord)),
            tuple(r for r in runs if isinstance(r, LoopRecord)),
        )

    def _record(self, number: int, kind: str, text: str) -> Run:
        try:
            return replace(record_from_dict(kind, json.loads(text)), number=number)
        except (KeyError, TypeError, ValueError) as exc:
            raise HistoryError(
                f"run #{number} of the run history {self.path} cannot be read ({exc!r}): "
                f"remove the history with `{REMOVE}`"
            ) from exc

    @contextlib.contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit (transactions begun explicitly); sqlite3's errors as a
        HistoryError that names the file and the remedy."""
        db = None
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            yield db
        except sqlite3.Error as exc:
            raise HistoryError(self._why(exc)) from exc
        finally:
            if db is not None:
                db.close()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, begun at once (`BEGIN IMMEDIATE` waits out another writer), on
        a database made at its first write and checked for its schema's version."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"the run history cannot be kept in {self.path.parent}: {exc}"
            ) from exc
        with self._connected() as db:
            # WAL lets readers go on while one writes; a file system without shared memory
            # (some network mounts) refuses it, and the rollback journal with the timeout stays
            with contextlib.suppress(sqlite3.OperationalError):
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            try:
                if _version(db) is None:
                    for statement in SCHEMA:
                        db.execute(statement)
                    db.execute("INSERT INTO schema_version VALUES (1, ?)", (SCHEMA_VERSION,))
                yield db
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # the error that got here is the news
                    db.execute("ROLLBACK")
                raise

    def _why(self, exc: sqlite3.Error) -> str:
        if "locked" in str(exc) or "busy" in str(exc):
            return (
                f"the run history {self.path} stayed locked by another process for more than "
                f"{self.busy_timeout_s:g} s ({exc}); try again once it ends"
            )
        return (
            f"the run history {self.path} cannot be read or written ({exc}): remove it with "
            f"`{REMOVE}` and a new one starts with the next run"
        )


def _version(db: sqlite3.Connection) -> int | None:
    """The schema version of `db`; None for a new (empty) database. Raises HistoryError for a
    version other than this advisor's, or tables without one (not the advisor's)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    row = None
    if "schema_version" in tables:
        row = db.execute("SELECT version FROM schema_version").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        found = f"schema version {row[0]}" if row is not None else "no schema version"
        path = db.execute("PRAGMA database_list").fetchone()[2]
        raise HistoryError(
            f"the run history {path} has {found}; this advisor reads version {SCHEMA_VERSION}: "
            f"remove it with `{REMOVE}` (an advisor of its version still reads it)"
        )
    return int(row[0])


def _json(record: Run) -> str:
    return json.dumps(_redacted(record_to_dict(record)), default=str)


def _redacted(value: Any) -> Any:
    """Every string in `value` (dicts, lists, nested) with what looks like a secret redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item) for item in value]
    return value


def keep(record: R, store: RunStore | None = None) -> R | None:
    """`record` stored as a new run and numbered; None where it could not be kept (a
    HistoryWarning says why): the history is best effort, never the run's failure."""
    try:
        return (store or RunStore()).add(record)
    except HistoryError as exc:
        warnings.warn(f"{exc} (this run is not in the history)", HistoryWarning, stacklevel=2)
        return None


def amend(record: Run, store: RunStore | None = None) -> None:
    """`record` stored over its run (best effort, as `keep`)."""
    try:
        (store or RunStore()).update(record)
    except HistoryError as exc:
        warnings.warn(f"{exc} (run #{record.number} keeps its earlier record)", HistoryWarning,
                      stacklevel=2)  # fmt: skip
