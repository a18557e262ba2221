"""The candidate process's native helpers are built safely by several workers at once (the H200 run of
2026-12-04 session 5 lost one reference to a shared temporary name: four sandboxes built audit.so together)."""

import threading
import time
from pathlib import Path

import pytest

from ptxrag.base.errors import SandboxFailure
from ptxrag.sandbox.native import _build_into

PAYLOAD = b"x" * 4096


def _slow_build(tmp: Path) -> None:
    with open(tmp, "wb") as f:  # written in pieces, as a compiler would, so that the builders overlap
        for i in range(0, len(PAYLOAD), 512):
            f.write(PAYLOAD[i : i + 512])
            f.flush()
            time.sleep(0.005)


def test_builders_that_start_together_all_get_the_whole_helper(tmp_path):
    dest = tmp_path / "audit.so"
    n = 6
    start = threading.Barrier(n)
    errors = []

    def builder():
        start.wait()
        try:
            _build_into(dest, _slow_build)
        except Exception as e:  # noqa: BLE001 - the test reports whatever a builder raised
            errors.append(e)

    threads = [threading.Thread(target=builder) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert dest.read_bytes() == PAYLOAD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.so"]  # no temporary left behind


def test_a_helper_in_place_is_not_rebuilt(tmp_path):
    dest = tmp_path / "monitor.so"
    dest.write_bytes(b"built before")
    _build_into(dest, lambda tmp: pytest.fail("rebuilt a helper that was in place"))
    assert dest.read_bytes() == b"built before"


def test_a_failed_build_leaves_neither_helper_nor_temporary(tmp_path):
    dest = tmp_path / "audit.so"

    def broken(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise SandboxFailure("building the rtld audit library failed: boom")

    with pytest.raises(SandboxFailure, match="boom"):
        _build_into(dest, broken)
    assert list(tmp_path.iterdir()) == []
