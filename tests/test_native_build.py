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


def test_the_audit_refuses_a_forbidden_library_behind_a_symlink_with_an_innocent_name(tmp_path):
    """The rtld audit matched names as given: /tmp/x.so -> .../libcublas.so.13 loaded (class 7). It now
    matches the resolved path too. Shown with a system library standing in for cuBLAS."""
    import glob
    import shutil
    import subprocess
    import sys

    cc = shutil.which("cc") or shutil.which("gcc")
    libs = sorted(glob.glob("/lib/x86_64-linux-gnu/libbz2.so.1*") + glob.glob("/usr/lib*/libbz2.so.1*"))
    if cc is None or not libs:
        pytest.skip("needs a C compiler and libbz2")
    src = Path(__file__).resolve().parents[1] / "ptxrag" / "sandbox" / "gpu" / "native" / "audit.c"
    audit = tmp_path / "audit.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(audit), str(src)], check=True)
    innocent = tmp_path / "innocent.so"
    innocent.symlink_to(libs[0])
    log = tmp_path / "audit.log"
    probe = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1]); print('loaded')\nexcept OSError:\n    print('refused')\n"
    env = {"LD_AUDIT": str(audit), "PTXRAG_AUDIT_FORBID": "libcublas:libbz2", "PTXRAG_AUDIT_LOG": str(log)}

    def load(path: Path) -> str:
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)], env=env, capture_output=True, text=True
        )
        return out.stdout.strip()

    assert load(innocent) == "refused"
    assert f"refused {innocent}" in log.read_text()
    assert load(Path(libs[0])) == "refused"
