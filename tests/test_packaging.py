"""The wheel installs everything under the ptxrag namespace, with its data files, and nothing generic."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("ptxrag-*.whl"))


def test_wheel_has_only_the_ptxrag_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("ptxrag-")}
    assert tops == {"ptxrag"}, tops
    for needed in (
        "ptxrag/sandbox/abi/ptxrag_abi.h",
        "ptxrag/sandbox/data/opcodes.toml",
        "ptxrag/sandbox/gpu/worker.py",
        "ptxrag/sandbox/probes/warp.cu",
        "ptxrag/tasks/suite/warp-reduce-redux/task.toml",
        "ptxrag/tasks/suite/warp-reduce-redux/controls/hang.cu",
        "ptxrag/indexer/adapters/rerank.json",  # the learned reranker
        "ptxrag/indexer/adapters/all-MiniLM-L6-v2.tower.npz",  # the learned query tower
    ):
        assert needed in names, needed
    # every package folder in the tree is shipped
    for init in (REPO / "ptxrag").rglob("__init__.py"):
        rel = str(init.relative_to(REPO))
        assert rel in names, f"{rel}: not shipped (a subpackage folder without __init__.py?)"


def test_wheel_installs_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    before = {p.name for p in Path(site).iterdir()}
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    added = {p.name for p in Path(site).iterdir()} - before
    assert {n for n in added if not n.endswith(".dist-info")} == {"ptxrag"}, added
    assert (venv / "bin" / "ptxrag").is_file()
    probe = (
        "import importlib.util as u, sys\n"
        "assert u.find_spec('ptxrag.sandbox') is not None\n"
        "assert u.find_spec('ptxrag.tasks') is not None\n"
        "for generic in ('sandbox', 'tasks', 'indexer', 'corpus', 'agent_graph'):\n"
        "    assert u.find_spec(generic) is None, generic\n"
        "print(u.find_spec('ptxrag.sandbox').origin)\n"
    )
    out = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(site)
