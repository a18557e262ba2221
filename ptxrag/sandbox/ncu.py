"""Stage 4: did each required instruction really execute? Nsight Compute's SourceCounters section gives,
per SASS instruction, "Predicated-On Thread Instructions Executed". An instruction under a false
predicate is still issued by every warp (its "Instructions Executed" is > 0) but does no work; only a
predicated-on count > 0 shows that it did work (../shared/notes/h200-ncu.md shows both on an H200)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from ptxrag.base.errors import SandboxFailure

from .opcodes import Requirement, opcode_of
from .results import InstructionExecution

COL_SOURCE = "Source"
COL_EXEC = "Instructions Executed"
COL_THREAD = "Thread Instructions Executed"
COL_PRED_ON = "Predicated-On Thread Instructions Executed"


@dataclass
class KernelCounters:
    name: str
    rows: list[tuple[str, int, int, int]] = field(default_factory=list)  # (sass, exec, thread, pred_on)


class NcuParseError(SandboxFailure, ValueError):
    pass


def _int(v: str) -> int:
    v = v.strip().replace(",", "").replace('"', "")
    if not v or v in ("n/a", "-"):
        return 0
    return int(float(v))


def ncu_command(ncu: str, launch_count: int = 64) -> list[str]:
    return [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        # launch_once.py makes a few unprofiled calls first and brackets the profiled one with
        # cudaProfilerStart/Stop: the counted call is not the process's first
        "--profile-from-start",
        "off",
        "--launch-count",
        str(launch_count),
        "--section",
        "SourceCounters",
        "--page",
        "source",
        "--print-source",
        "sass",
        "--csv",
    ]


def parse_source_csv(text: str) -> list[KernelCounters]:
    """Parse ``ncu --page source --print-source sass --csv`` output.

    Layout seen on the H200: a line ``"Kernel Name","<name>"``, a header row, then one row per SASS
    instruction; ncu's own ``==PROF==`` lines and the program's output may be interleaved. The same
    kernel block can appear twice: identical blocks are counted once.
    """
    blocks: list[KernelCounters] = []
    header: list[str] | None = None
    cur: KernelCounters | None = None
    idx: tuple[int, int, int, int] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("=="):
            continue
        try:
            row = next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration):
            continue
        if len(row) >= 2 and row[0].strip() == "Kernel Name":
            cur = KernelCounters(row[1].strip())
            blocks.append(cur)
            header, idx = None, None
            continue
        if cur is None:
            continue
        if header is None:
            header = [h.strip() for h in row]
            try:
                idx = (
                    header.index(COL_SOURCE),
                    header.index(COL_EXEC),
                    header.index(COL_THREAD),
                    header.index(COL_PRED_ON),
                )
            except ValueError as e:
                raise NcuParseError(f"ncu source page lacks a column: {e}; header was {header}") from None
            continue
        if idx is None or len(row) < len(header):
            continue
        try:
            cur.rows.append((row[idx[0]].strip(), _int(row[idx[1]]), _int(row[idx[2]]), _int(row[idx[3]])))
        except ValueError:
            continue
    unique: list[KernelCounters] = []
    seen: set[tuple] = set()
    for b in blocks:
        key = (b.name, tuple(b.rows))
        if key not in seen:
            seen.add(key)
            unique.append(b)
    return unique


def execution_counts(kernels: list[KernelCounters], req: Requirement) -> InstructionExecution:
    ops: set[str] = set()
    n_rows = ex = th = po = 0
    for k in kernels:
        for sass, e, t, p in k.rows:
            op = opcode_of(sass)
            if req.matches(op):
                ops.add(op)
                n_rows += 1
                ex += e
                th += t
                po += p
    return InstructionExecution(
        ptx=req.ptx,
        sass_opcodes=sorted(ops),
        sass_rows=n_rows,
        instructions_executed=ex,
        thread_instructions_executed=th,
        predicated_on_thread_instructions=po,
        executed=po > 0,
    )


def explain(ie: InstructionExecution) -> str:
    """One line an agent can act on."""
    n = ie.predicated_on_thread_instructions
    if ie.executed and ie.min_required is not None and n < ie.min_required:
        return (
            f"{ie.ptx}: executed only {n} times (predicated-on thread instructions), below the {ie.min_required} "
            "this shape needs: a token use while other code does the work; do the task's work with it"
        )
    if ie.executed:
        need = f", minimum {ie.min_required}" if ie.min_required is not None else ""
        return f"{ie.ptx}: executed ({n} predicated-on thread instructions{need})"
    if ie.sass_rows == 0:
        return f"{ie.ptx}: not in any profiled kernel (is it in a kernel you launch?)"
    if ie.instructions_executed > 0:
        return (
            f"{ie.ptx} is compiled in but never executed: its {'/'.join(ie.sass_opcodes)} instruction was "
            f"issued {ie.instructions_executed} times with its predicate false every time (0 threads did the "
            "work); the condition guarding it is never true at run time"
        )
    return (
        f"{ie.ptx} is compiled in but never executed: no warp reached its "
        f"{'/'.join(ie.sass_opcodes)} instruction (the branch holding it is never taken)"
    )
