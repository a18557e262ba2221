"""The token-use minimum of the execution stage (threat-model row 5): a fraction of the reference solution's
recorded count for instructions that do work, never for synchronisation, whose count is the kernel's design."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from ptxrag.sandbox.opcodes import resolve, table
from ptxrag.sandbox.stages.execution import minimum_count
from ptxrag.tasks import COUNTS_FILE, builtin_suite_dir, load_task, load_task_dir

TASK = "bulk-copy-scale"  # requires a copy, its expect_tx and the wait on it


def test_work_instructions_need_a_fraction_of_the_reference_count() -> None:
    task = load_task(TASK)
    recorded = json.loads(task.path(COUNTS_FILE).read_text())["counts"]
    copy = "cp.async.bulk.shared::cluster.global"
    want = math.ceil(task.execution.min_fraction_of_reference * recorded[copy])
    assert minimum_count(task, copy) == want  # 103 on the H200 record: what token_bulk_copy fell below


def test_waits_and_barrier_arrivals_need_only_to_run() -> None:
    """The reference's every thread polls the barrier (266,496 predicated-on polls for 1,024 copies on the
    H200); an honest kernel that waits with one thread and then syncs the block executes under 1% of that, and
    a fraction of the reference's count would fail it."""
    task = load_task(TASK)
    assert minimum_count(task, "mbarrier.try_wait.parity") is None
    assert minimum_count(task, "mbarrier.arrive.expect_tx") is None


def test_a_tasks_own_expression_applies_to_any_instruction(tmp_path: Path) -> None:
    dst = tmp_path / TASK
    shutil.copytree(builtin_suite_dir() / TASK, dst)
    spec = dst / "task.toml"
    spec.write_text(
        spec.read_text() + '\n[execution]\nmin_counts = { "mbarrier.try_wait.parity" = "n / 4096" }\n'
    )
    task = load_task_dir(dst)
    assert minimum_count(task, "mbarrier.try_wait.parity") == math.ceil(task.shapes.check[0]["n"] / 4096)


def test_every_row_says_whether_its_count_is_work() -> None:
    for row in table():
        assert row.count == "work" or (row.count.startswith("any: ") and len(row.count) > 20), row.ptx
    # the families the token-use check exists for stay counted as work
    for ptx in ("wgmma.mma_async", "cp.async.bulk.tensor", "redux.sync", "ldmatrix", "mma.sync", "st.async"):
        assert resolve(ptx).counts_work, ptx
    for ptx in ("mbarrier.try_wait.parity", "fence.proxy.async", "wgmma.wait_group", "barrier.cluster.wait"):
        assert not resolve(ptx).counts_work, ptx
