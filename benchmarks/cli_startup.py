"""Benchmark: how long each ``ptxrag`` command takes to answer, and which heavy modules it imports.

Each command runs in a fresh ``python -m ptxrag`` process (best of ``--runs``, wall clock), so the numbers are
what a user waits for. Commands that need a bench folder get a small synthetic one (rows written through
``BenchStore``; no agent, no compiler). Commands that must fail fast (a missing API key) are timed up to their
error. For each command the heavy packages found in ``sys.modules`` at exit are listed, and with
``--importtime`` the top offenders of ``python -X importtime`` (cumulative, top-level packages).

Targets (issue 22): ``ptxrag --help`` < 1 s, every command that does not embed or compile < 2 s on 2 cores.
Timings depend on the machine and its load: the load average is printed with them.

``--study DIR`` also times ``report`` and ``export fixit`` on a copy of a recorded bench folder (for example
the 48-episode offline study under docs/validation/), whose figures are larger than the synthetic folder's.

Usage: python benchmarks/cli_startup.py [--runs 3] [--importtime] [--only report,export] [--study DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "chromadb",
    "langgraph",
    "langchain_core",
    "matplotlib",
)

#: (label, argv after ``ptxrag``); ``{study}`` and ``{tmp}`` are filled in
COMMANDS: list[tuple[str, list[str]]] = [
    ("--help", ["--help"]),
    ("run --help", ["run", "--help"]),
    ("bench --help", ["bench", "--help"]),
    ("report --help", ["report", "--help"]),
    ("tasks list", ["tasks", "list"]),
    ("tasks show", ["tasks", "show", "warp-reduce-redux"]),
    ("corpus list", ["corpus", "list"]),
    ("report", ["report", "{study}", "--out", "{tmp}/report"]),
    ("export fixit", ["export", "fixit", "{study}", "-o", "{tmp}/fixit.jsonl", "--include-unverified"]),
    ("report (no folder)", ["report", "{tmp}/missing"]),
    ("run (no API key)", ["run", "warp-reduce-redux", "--model", "anthropic:claude-sonnet-4-5", "--condition", "templates"]),
    ("bench (no API key)", ["bench", "--out", "{tmp}/b", "--tasks", "warp-reduce-redux", "--models", "anthropic:claude-sonnet-4-5", "--conditions", "templates"]),
]  # fmt: skip

# run the CLI, then report which heavy packages were imported (printed on stderr after the command)
_PROBE = (
    "import sys, atexit\n"
    "atexit.register(lambda: sys.stderr.write('\\nHEAVY=' + ','.join(m for m in {heavy!r} if m in sys.modules) + '\\n'))\n"
    "sys.argv = ['ptxrag', *sys.argv[1:]]\n"
    "from ptxrag.cli import main\n"
    "main()\n"
)


def synthetic_study(out: Path) -> Path:
    """A bench folder with a few finished episodes (what ``report`` and ``export fixit`` read)."""
    from ptxrag.bench.records import EpisodeRow, RoundRow
    from ptxrag.bench.store import BenchStore

    with BenchStore(out) as store:
        for task in ("warp-reduce-redux", "warp-elect-sum"):
            for cond in ("templates", "hardware"):
                for s in range(2):
                    eid = f"{task}.{cond}.replay.s{s}"
                    row = EpisodeRow(
                        episode_id=eid, task_id=task, family="warp", level=1, model="replay:replays",
                        condition=cond, condition_spec=cond, sample=s, status="done", stop_reason="unverified_no_gpu",
                        max_rounds=4, rounds_used=2, best_round=2, first_static_round=2, compiled=True,
                        static_ok=True, unverified=True, input_tokens=1200, output_tokens=300, cost_usd=0.0,
                    )  # fmt: skip
                    rounds = [
                        RoundRow(episode_id=eid, round=1, outcome="compile failed", failure_stage="compile",
                                 failure_reason="compile failed: error", compiled=False, static_ok=False,
                                 correct=False, executed=False, success=False, unverified=False, code="x"),
                        RoundRow(episode_id=eid, round=2, outcome="GPU stages not run", compiled=True,
                                 static_ok=True, correct=False, executed=False, success=False, unverified=True,
                                 code="y"),
                    ]  # fmt: skip
                    store.add_pending([row])
                    store.finish(row, rounds)
    return out


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child, exit code, heavy modules imported)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    m = re.search(r"HEAVY=(.*)", p.stderr)
    return wall, cpu, p.returncode, (m.group(1) if m else "?")


def importtime_top(argv: list[str], env: dict[str, str], n: int = 5) -> list[tuple[str, float]]:
    """Third-party packages by cumulative import time (seconds; a package's outermost import, so one that
    imports another includes it), from ``python -X importtime``."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PROBE.format(heavy=HEAVY), *argv],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    tops: dict[str, float] = {}
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| \s*(\S+)", line)
        if m:
            name = m.group(2).split(".")[0]
            if name not in ("ptxrag", "site", "encodings") and not name.startswith("_"):
                tops[name] = max(tops.get(name, 0.0), int(m.group(1)) / 1e6)
    return sorted(tops.items(), key=lambda kv: -kv[1])[:n]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--importtime", action="store_true", help="also list the top import-time offenders")
    ap.add_argument("--only", default="", help="comma-separated substrings of command labels")
    ap.add_argument("--study", type=Path, help="also time report and export on a copy of this bench folder")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        study = synthetic_study(tmp / "study")
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
        env["PTXRAG_HOME"] = str(tmp / "home")  # an empty home: no index, nothing cached
        env["PTXRAG_NO_GPU"] = "1"
        print(f"# ptxrag CLI start-up benchmark {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}")
        print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
        print(
            f"# best of {args.runs} runs per command (wall clock, and CPU time of the process, which depends"
        )
        print("# less on other load); heavy = which of " + ", ".join(HEAVY) + " were imported")
        print(
            f"{'command':<22} {'best s':>7} {'median s':>8} {'cpu s':>6} {'exit':>4}  heavy modules imported"
        )
        commands = list(COMMANDS)
        if args.study:
            shutil.copytree(args.study, tmp / "recorded")
            n = sum(1 for _ in (tmp / "recorded" / "episodes").glob("*"))
            commands += [
                (f"report ({n}-ep. study)", ["report", str(tmp / "recorded"), "--out", "{tmp}/report2"]),
                (f"export ({n}-ep. study)", ["export", "fixit", str(tmp / "recorded"), "-o", "{tmp}/f2.jsonl",
                                             "--include-unverified"]),
            ]  # fmt: skip
        for label, argv in commands:
            if only and not any(s in label for s in only):
                continue
            argv = [a.format(study=study, tmp=tmp) for a in argv]
            walls, cpus, code, heavy = [], [], 0, ""
            for _ in range(args.runs):
                wall, cpu, code, heavy = run_once(argv, env)
                walls.append(wall)
                cpus.append(cpu)
            walls.sort()
            print(
                f"{label:<22} {walls[0]:>7.2f} {walls[len(walls) // 2]:>8.2f} {min(cpus):>6.2f} {code:>4}  {heavy or '-'}"
            )
            if args.importtime:
                top = importtime_top(argv, env)
                print(" " * 24 + "importtime: " + ", ".join(f"{k} {v:.2f}s" for k, v in top))
        print(f"# load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
