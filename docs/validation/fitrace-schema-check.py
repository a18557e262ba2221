"""Check ptxrag's FlashInfer-Trace files against flashinfer-bench's own pydantic models.

ptxrag keeps its own models of the schema (ptxrag/tasks/fitrace.py) because the package requires CUDA torch and
flashinfer-python. Its schema modules (flashinfer_bench/data/{definition,workload}.py) need only pydantic, so
this script loads them from an unpacked wheel and validates: the test fixtures (the study's definitions and
workloads), each fixture imported and exported again, and the export of every suite task.

    pip download --no-deps flashinfer-bench==0.1.2 -d /tmp/fib && (cd /tmp/fib && unzip -q -o *.whl)
    python docs/validation/fitrace-schema-check.py /tmp/fib
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path

from ptxrag.tasks import list_tasks
from ptxrag.tasks.fitrace import load_definition, load_workloads
from ptxrag.tasks.interop import import_definition, write_export
from ptxrag.tasks.loader import load_task_dir

FIX = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "fitrace"


def _schema(wheel_dir: Path) -> tuple[type, type]:
    """flashinfer_bench's Definition and Workload without importing the package's heavy __init__ files."""
    root = wheel_dir / "flashinfer_bench"
    for name, path in (("flashinfer_bench", root), ("flashinfer_bench.data", root / "data")):
        mod = types.ModuleType(name)
        mod.__dict__["__path__"] = [str(path)]  # a package without running its __init__
        sys.modules[name] = mod
    from flashinfer_bench.data.definition import Definition
    from flashinfer_bench.data.workload import Workload

    return Definition, Workload


def main() -> int:
    fd, fw = _schema(Path(sys.argv[1]))
    bad: list[str] = []

    def check(what: str, definition: Path, workloads: Path) -> None:
        try:
            fd.model_validate(json.loads(definition.read_text()))
            for line in workloads.read_text().splitlines():
                obj = json.loads(line)
                fw.model_validate(obj.get("workload", obj))
        except Exception as e:  # noqa: BLE001 - report every failure, then exit non-zero
            bad.append(f"{what}: {e}")

    tmp = Path(tempfile.mkdtemp())
    fixtures = sorted(FIX.glob("*.json"))
    for f in fixtures:
        wl = f.with_suffix(".workloads.jsonl")
        check(f"fixture {f.name}", f, wl)
        d = load_definition(f)
        task = load_task_dir(
            import_definition(d, load_workloads(wl, d), ["wgmma.mma_async"], tmp / "i").folder
        )
        check(f"{f.name} imported and exported", *write_export(task, tmp / "e" / f.stem))
    tasks = list_tasks()
    for task in tasks:
        check(f"suite task {task.id}", *write_export(task, tmp / "s" / task.id))
    print(f"{len(fixtures)} fixtures, their re-exports and {len(tasks)} suite exports: {len(bad)} invalid")
    for b in bad:
        print(" ", b)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
