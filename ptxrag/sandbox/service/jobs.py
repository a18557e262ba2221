"""Persistent job state (SQLite): a restarted service keeps finished jobs and re-queues interrupted ones."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptxrag.base.errors import SandboxFailure

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  key TEXT NOT NULL,
  task_id TEXT NOT NULL,
  source TEXT NOT NULL,
  options TEXT NOT NULL,
  status TEXT NOT NULL,          -- queued | running | done | error
  stage TEXT,                    -- the stage running now (compile, static, correctness, execution, timing)
  created REAL NOT NULL,
  started REAL,
  finished REAL,
  report TEXT,
  error TEXT,
  attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_key ON jobs(key);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
"""

ACTIVE = ("queued", "running")


@dataclass(frozen=True)
class Job:
    id: str
    key: str
    task_id: str
    status: str
    stage: str | None
    created: float
    started: float | None
    finished: float | None
    report: dict[str, Any] | None
    error: str | None
    attempts: int
    options: dict[str, Any]

    def public(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "task_id": self.task_id,
            "status": self.status,
            "stage": self.stage,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "attempts": self.attempts,
            "done": self.status in ("done", "error"),
        }


class JobStore:
    """Thread-safe access to the jobs table (one connection, one lock; WAL for crash safety)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def _row(self, r: tuple) -> Job:
        return Job(
            id=r[0], key=r[1], task_id=r[2], status=r[5], stage=r[6], created=r[7], started=r[8],
            finished=r[9], report=json.loads(r[10]) if r[10] else None, error=r[11], attempts=r[12],
            options=json.loads(r[4]),
        )  # fmt: skip

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return self._row(r) if r else None

    def source(self, job_id: str) -> str | None:
        with self._lock:
            r = self._db.execute("SELECT source FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return r[0] if r else None

    def submit(
        self, key: str, task_id: str, source: str, options: dict[str, Any], max_queue: int
    ) -> tuple[Job, bool]:
        """(job, created). The same key returns the existing job unless it ended in a harness error.
        Raises QueueFull when ``max_queue`` jobs are waiting."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                r = self._db.execute(
                    "SELECT * FROM jobs WHERE key = ? AND status != 'error' ORDER BY created DESC LIMIT 1",
                    (key,),
                ).fetchone()
                if r:
                    self._db.execute("COMMIT")
                    return self._row(r), False
                queued = self._db.execute("SELECT COUNT(*) FROM jobs WHERE status = 'queued'").fetchone()[0]
                if queued >= max_queue:
                    self._db.execute("ROLLBACK")
                    raise QueueFull(queued)
                jid = uuid.uuid4().hex
                self._db.execute(
                    "INSERT INTO jobs (id, key, task_id, source, options, status, created) VALUES (?,?,?,?,?,?,?)",
                    (jid, key, task_id, source, json.dumps(options), "queued", time.time()),
                )
                self._db.execute("COMMIT")
            except QueueFull:
                raise
            except Exception:
                self._db.execute("ROLLBACK")
                raise
        job = self.get(jid)
        assert job is not None
        return job, True

    def start(self, job_id: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET status='running', started=?, attempts=attempts+1 WHERE id=?",
                (time.time(), job_id),
            )

    def set_stage(self, job_id: str, stage: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET stage=? WHERE id=?", (stage, job_id))

    def finish(self, job_id: str, report: dict[str, Any] | None, error: str | None = None) -> None:
        status = "done" if error is None else "error"
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET status=?, stage=NULL, finished=?, report=?, error=? WHERE id=?",
                (status, time.time(), json.dumps(report) if report is not None else None, error, job_id),
            )

    def requeue_interrupted(self) -> list[str]:
        """Jobs a dead service left queued or running go back to the queue (in submission order)."""
        with self._lock:
            ids = [r[0] for r in self._db.execute(
                "SELECT id FROM jobs WHERE status IN ('queued','running') ORDER BY created"
            ).fetchall()]  # fmt: skip
            self._db.execute("UPDATE jobs SET status='queued', stage=NULL WHERE status='running'")
        return ids

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {s: n for s, n in rows}

    def stages(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT stage, COUNT(*) FROM jobs WHERE status='running' AND stage IS NOT NULL GROUP BY stage"
            ).fetchall()
        return {s: n for s, n in rows}

    def close(self) -> None:
        with self._lock:
            self._db.close()


class QueueFull(SandboxFailure, RuntimeError):
    def __init__(self, depth: int) -> None:
        super().__init__(f"queue full ({depth} jobs waiting)")
        self.depth = depth
