"""The benchmark: run studies (tasks x models x conditions x samples), measure them, report them.

from ptxrag.bench import BenchSpec, run_bench, write_report, export_fixit
spec = BenchSpec(tasks=["warp-reduce-redux"], models=["anthropic:claude-sonnet-4-5"],
                 conditions=["hardware", "rag+templates"], samples=3)
run_bench(spec, "runs/study1")          # resumable: run it again to continue
write_report("runs/study1")             # report.md, report.html
export_fixit("runs/study1")             # fixit.jsonl
"""

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
from .runner import BenchEvent, BenchSummary, run_bench
from .store import BenchStore
from .study import BenchConfigError, BenchSpec, Episode, EpisodeKey, resolve

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
