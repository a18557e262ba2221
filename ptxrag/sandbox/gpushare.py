"""Who may use one GPU at once: the one GPU-sharing mechanism of the sandbox, used by the bench and the service.

The stages differ in what company they tolerate. Correctness and mutation only check outputs, so several
candidates may run them on one GPU at once (``shared`` of them in this process). The Nsight Compute launch
(its replay and counters) and the timing stage measure, so each runs with the GPU to itself: ``exclusive``
waits until no candidate of any process holds the GPU, and while it waits no new one enters (writer
preference), so a stream of checks never starves a measurement.

Across processes (two benches, a bench and ``ptxrag sandbox check``) the same rules hold through ``flock`` on
two per-GPU files: a turnstile that an exclusive holder keeps while it waits, and the shared/exclusive lock
itself. The kernel drops a flock when its holder dies, so a killed process never leaves the GPU held. The limit
of ``shared`` holders is per process; two processes with ``shared=2`` may have four candidates checking.
``shared=1`` (the default) makes every GPU stage exclusive: the behaviour before sharing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_name(device: str) -> str:
    """A device name (``CUDA_VISIBLE_DEVICES`` entry: an index or a UUID) as a name for its lock files."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", device)


def visible_gpu_id() -> str:
    """The GPU the sandbox uses (the first visible one), as a name for its lock files."""
    return lock_name(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0")


def default_lock_dir() -> Path:
    """Per machine, shared by every user's benches: measurements must not overlap whoever runs them."""
    return Path(tempfile.gettempdir()) / "ptxrag-gpu-locks"


class GpuShare:
    """Shared (checking) and exclusive (measuring) use of one GPU, within this process and across processes."""

    def __init__(self, gpu_id: str = "0", lock_dir: Path | None = None, shared: int = 1) -> None:
        if shared < 1:
            raise ValueError(f"shared must be at least 1, got {shared}")
        d = lock_dir or default_lock_dir()
        d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # someone else's folder: leave its mode
            d.chmod(0o1777)
        self.path = d / f"gpu-{gpu_id}.lock"
        self._turnstile_path = d / f"gpu-{gpu_id}.turnstile"
        self.shared_slots = shared
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self.waited_s = 0.0  # time spent waiting for the GPU, summed over holders
        self.peak_shared = 0  # most candidates of this process that held it at once

    # -- across processes ---------------------------------------------------------------------------
    def _open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)

    @contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        fd, gate = self._open(self.path), self._open(self._turnstile_path)
        try:
            # the turnstile: an exclusive holder keeps it while it waits, so new shared holders queue behind it
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            os.close(gate)

    # -- the two ways in ------------------------------------------------------------------------------
    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The GPU alone: no other candidate of any process holds it meanwhile (ncu, timing)."""
        t0 = time.monotonic()
        with self._cond:
            self._writers_waiting += 1
            try:
                self._cond.wait_for(lambda: not self._writer and self._readers == 0)
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            with self._flock(exclusive=True):
                with self._cond:
                    self.waited_s += time.monotonic() - t0
                yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        """The GPU with up to ``shared`` other candidates of this process (correctness, mutation)."""
        if self.shared_slots == 1:
            with self.exclusive():
                yield
            return
        t0 = time.monotonic()
        with self._cond:
            self._cond.wait_for(
                lambda: not self._writer and self._writers_waiting == 0 and self._readers < self.shared_slots
            )
            self._readers += 1
            self.peak_shared = max(self.peak_shared, self._readers)
        try:
            with self._flock(exclusive=False):
                with self._cond:
                    self.waited_s += time.monotonic() - t0
                yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    def hold(self) -> contextlib.AbstractContextManager[None]:
        """The GPU alone (as :meth:`exclusive`): for callers that hold it around a whole evaluation."""
        return self.exclusive()


__all__ = ["GpuShare", "default_lock_dir", "lock_name", "visible_gpu_id"]
