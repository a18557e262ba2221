"""The bench database: ``OUT/bench.sqlite``, one row per episode and one per round.

Columns mirror :class:`EpisodeRow` and :class:`RoundRow`. An episode's rounds are rewritten in the same
transaction as its row, so a kill at any moment leaves either the old or the new state, never a mix, and
never a duplicate (the keys are the episode id and ``(episode id, round)``).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
import types
import typing
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .records import EpisodeRow, RoundRow
from .study import BenchConfigError

SCHEMA_VERSION = 1
DB_NAME = "bench.sqlite"
#: round columns a report does not need (large texts); ``rounds(light=True)`` leaves them out
HEAVY_ROUND_COLUMNS = ("code", "reply", "feedback", "report_json")


def _sql_type(annotation: Any) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = (
        args[0] if (typing.get_origin(annotation) in (typing.Union, types.UnionType) and args) else annotation
    )
    if base is bool or base is int:
        return "INTEGER"
    if base is float:
        return "REAL"
    return "TEXT"


def _columns(model: type[BaseModel]) -> list[tuple[str, str]]:
    return [(name, _sql_type(f.annotation)) for name, f in model.model_fields.items()]


def _ddl(table: str, model: type[BaseModel], key: Sequence[str]) -> str:
    cols = ", ".join(f"{n} {t}" for n, t in _columns(model))
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols}, PRIMARY KEY ({', '.join(key)}))"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class BenchStore:
    """Thread-safe access to one bench database (one connection, one lock)."""

    def __init__(self, out: Path, *, create: bool = True) -> None:
        self.out = Path(out)
        self.path = self.out / DB_NAME
        if not create and not self.path.is_file():
            raise FileNotFoundError(
                f"{self.out} holds no bench database ({DB_NAME}); run `ptxrag bench --out {out}`"
            )
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._conn.row_factory = sqlite3.Row
        with self._tx() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            c.execute(_ddl("episodes", EpisodeRow, ["episode_id"]))
            c.execute(_ddl("rounds", RoundRow, ["episode_id", "round"]))
            c.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        version = self.meta().get("schema_version")
        if version != str(SCHEMA_VERSION):
            raise BenchConfigError(
                f"{self.path} has schema version {version}; this ptxrag writes {SCHEMA_VERSION}"
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> BenchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise

    # -- study settings --------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        with self._lock:
            return {r["key"]: r["value"] for r in self._conn.execute("SELECT key, value FROM meta")}

    def check_settings(self, settings: dict[str, str]) -> None:
        """Record the study's fixed settings, or raise if OUT holds a study run with different ones."""
        old = self.meta()
        clashes = [f"{k} {old[k]} (now {v})" for k, v in settings.items() if k in old and old[k] != v]
        if clashes:
            raise BenchConfigError(
                f"{self.out} holds a study run with "
                + ", ".join(clashes)
                + "; re-run with the same settings to resume it, or use another --out"
            )
        with self._tx() as c:
            c.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", list(settings.items()))

    # -- episodes -----------------------------------------------------------------------------------------
    def add_pending(self, rows: Sequence[EpisodeRow]) -> int:
        """Insert episodes not yet known; returns how many were new."""
        names = [n for n, _ in _columns(EpisodeRow)]
        sql = f"INSERT OR IGNORE INTO episodes ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        with self._tx() as c:
            before = c.total_changes
            c.executemany(sql, [[getattr(r, n) for n in names] for r in rows])
            return c.total_changes - before

    def episode(self, episode_id: str) -> EpisodeRow | None:
        with self._lock:
            r = self._conn.execute("SELECT * FROM episodes WHERE episode_id = ?", (episode_id,)).fetchone()
        return EpisodeRow.model_validate(dict(r)) if r else None

    def episodes(self) -> list[EpisodeRow]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM episodes ORDER BY task_id, model, condition, sample"
            ).fetchall()
        return [EpisodeRow.model_validate(dict(r)) for r in rows]

    def mark_running(self, episode_id: str) -> EpisodeRow:
        with self._tx() as c:
            c.execute(
                "UPDATE episodes SET status = 'running', attempts = attempts + 1, started_at = COALESCE(started_at, ?) WHERE episode_id = ?",
                (now_iso(), episode_id),
            )
        row = self.episode(episode_id)
        if row is None:
            raise KeyError(f"episode {episode_id} is not in {self.path}")
        return row

    def mark_error(self, episode_id: str, message: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE episodes SET status = 'error', error = ?, finished_at = ? WHERE episode_id = ?",
                (message, now_iso(), episode_id),
            )

    def finish(self, row: EpisodeRow, rounds: Sequence[RoundRow]) -> None:
        """Write a finished (or interrupted) episode and all its rounds, atomically."""
        row = row.model_copy(update={"finished_at": now_iso()})
        e_names = [n for n, _ in _columns(EpisodeRow)]
        r_names = [n for n, _ in _columns(RoundRow)]
        with self._tx() as c:
            c.execute(
                f"INSERT OR REPLACE INTO episodes ({', '.join(e_names)}) VALUES ({', '.join('?' * len(e_names))})",
                [getattr(row, n) for n in e_names],
            )
            c.execute("DELETE FROM rounds WHERE episode_id = ?", (row.episode_id,))
            c.executemany(
                f"INSERT INTO rounds ({', '.join(r_names)}) VALUES ({', '.join('?' * len(r_names))})",
                [[getattr(r, n) for n in r_names] for r in rounds],
            )

    # -- rounds ---------------------------------------------------------------------------------------------
    def rounds(self, episode_id: str | None = None, *, light: bool = False) -> list[RoundRow]:
        """Rounds of one episode (or all), in order; ``light`` leaves the large text columns empty."""
        cols = [n for n, _ in _columns(RoundRow) if not (light and n in HEAVY_ROUND_COLUMNS)]
        sql = f"SELECT {', '.join(cols)} FROM rounds"
        args: tuple[Any, ...] = ()
        if episode_id is not None:
            sql += " WHERE episode_id = ?"
            args = (episode_id,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY episode_id, round", args).fetchall()
        return [RoundRow.model_validate(dict(r)) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute("SELECT status, COUNT(*) AS n FROM episodes GROUP BY status").fetchall()
        return {r["status"]: r["n"] for r in rows}
