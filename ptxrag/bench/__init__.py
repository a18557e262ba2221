"""The benchmark: run studies (tasks x models x conditions x samples), measure them, report them.

from ptxrag.bench import BenchSpec, run_bench, write_report, export_fixit
spec = BenchSpec(tasks=["warp-reduce-redux"], models=["anthropic:claude-sonnet-4-5"],
                 conditions=["hardware", "rag+templates"], samples=3)
run_bench(spec, "runs/study1")          # resumable: run it again to continue
write_report("runs/study1")             # report.md, report.html
export_fixit("runs/study1")             # fixit.jsonl
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .export import ExportSummary, FixitRecord, export_fixit, fixit_records
    from .metrics import (
        Estimate,
        GroupSummary,
        PairedComparison,
        Rate,
        aggregate,
        bootstrap_ci,
        compare_conditions,
        fast_p,
        geomean_speedup,
        mcnemar_exact,
        success_at_round,
        success_curves,
    )
    from .prices import PriceError, PriceTable, load_prices
    from .records import EpisodeRow, RoundRow
    from .report import ReportFiles, build_report, write_report
    from .store import BenchStore
    from .study import BenchConfigError, BenchSpec, Episode, EpisodeKey, resolve
    from .study_runner import BenchEvent, BenchSummary, run_bench

#: name -> submodule. Imported on first use, so reading a bench folder (report, export) does not load the
#: agent (LangGraph) that only running one needs.
_EXPORTS = {
    **dict.fromkeys(["ExportSummary", "FixitRecord", "export_fixit", "fixit_records"], "export"),
    **dict.fromkeys(
        [
            "Estimate",
            "GroupSummary",
            "PairedComparison",
            "Rate",
            "aggregate",
            "bootstrap_ci",
            "compare_conditions",
            "fast_p",
            "geomean_speedup",
            "mcnemar_exact",
            "success_at_round",
            "success_curves",
        ],
        "metrics",
    ),  # fmt: skip
    **dict.fromkeys(["PriceError", "PriceTable", "load_prices"], "prices"),
    **dict.fromkeys(["EpisodeRow", "RoundRow"], "records"),
    **dict.fromkeys(["ReportFiles", "build_report", "write_report"], "report"),
    **dict.fromkeys(["BenchEvent", "BenchSummary", "run_bench"], "study_runner"),
    "BenchStore": "store",
    **dict.fromkeys(["BenchConfigError", "BenchSpec", "Episode", "EpisodeKey", "resolve"], "study"),
}


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'ptxrag.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "BenchConfigError",
    "BenchEvent",
    "BenchSpec",
    "BenchStore",
    "BenchSummary",
    "Episode",
    "EpisodeKey",
    "EpisodeRow",
    "Estimate",
    "ExportSummary",
    "FixitRecord",
    "GroupSummary",
    "PairedComparison",
    "PriceError",
    "PriceTable",
    "Rate",
    "ReportFiles",
    "RoundRow",
    "aggregate",
    "bootstrap_ci",
    "build_report",
    "compare_conditions",
    "export_fixit",
    "fast_p",
    "fixit_records",
    "geomean_speedup",
    "load_prices",
    "mcnemar_exact",
    "resolve",
    "run_bench",
    "success_at_round",
    "success_curves",
    "write_report",
]
