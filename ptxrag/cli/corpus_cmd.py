"""``ptxrag corpus add/list/diff/remove``, ``ptxrag index``, ``ptxrag ask``, ``ptxrag eval-retrieval``:
manuals per GPU generation, the index, and retrieval from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ptxrag.indexer.baselines import ABLATION_NAMES

from .common import console, err_console, fail, quiet_model_loading

corpus_app = typer.Typer(help="Manuals per GPU generation: add, list, diff, remove.", no_args_is_help=True)


def query_threads(cpus: int | None = None, load: float | None = None) -> int:
    """Torch threads for searches: two where two cores are idle, else one. A search embeds one short text
    (and, when switched on, the reader two short pairs): two threads took session 8's default (reader on)
    from ~21 to ~17 ms p95 on an idle 2-core machine, but two threads fighting over a busy small machine are far slower than one (measured: 13 ms
    against 149 ms per query on 2 cores under a load average of 7). ``PTXRAG_TORCH_THREADS`` overrides."""
    import os

    forced = os.environ.get("PTXRAG_TORCH_THREADS", "").strip()
    if forced:
        try:
            return max(1, int(forced))
        except ValueError:
            fail(f"PTXRAG_TORCH_THREADS must be a whole number, not {forced!r}")
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float(cpus)
    return 2 if cpus >= 2 and cpus - load >= 1.5 else 1


def _search_threads() -> None:
    try:
        import torch

        torch.set_num_threads(query_threads())
    except ImportError:  # pragma: no cover - torch comes with sentence-transformers
        pass


def _limit_threads() -> None:
    """One BLAS thread (numpy's and torch's pools fight on small machines and double query time), and no
    model-loading progress bars of their own (ours is rich)."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl comes with the dependencies
        pass
    quiet_model_loading()


def _errors() -> tuple[type[Exception], ...]:
    from ptxrag.indexer import IndexerError

    return (IndexerError,)


@corpus_app.command("add")
def add_cmd(
    source: Annotated[str, typer.Argument(help="which manual: ptx-isa")],
    version: Annotated[str, typer.Option("--version", help="manual version, e.g. 9.1")],
    origin: Annotated[
        str | None,
        typer.Option(
            "--from", help="file (.html, .pdf), folder of Markdown sections, or URL; default: official"
        ),
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="markdown, html or pdf (default: detect)")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="makes relative section anchors absolute")
    ] = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="replace an added manual of this version even by a much smaller one"),
    ] = False,
) -> None:
    """Add (or replace) a manual version.

    It is parsed and checked first; a broken input changes nothing, and a replaced manual is kept until `ptxrag index` has indexed the new one."""
    from ptxrag.indexer import add_manual
    from ptxrag.indexer.library import previous_record

    if source != "ptx-isa":
        fail(f"unknown manual {source!r}; known: ptx-isa (the knowledge pack is indexed by `ptxrag index`)")
    if fmt is not None and fmt not in ("markdown", "html", "pdf"):
        fail(f"--format must be markdown, html or pdf, not {fmt!r}")
    with console.status(f"reading {origin or 'the official manual'} ..."):
        try:
            rec = add_manual(
                origin,
                version=version,
                source=source,
                fmt=fmt,  # type: ignore[arg-type]
                base_url=base_url,
                replace=replace,
            )
        except _errors() as e:
            fail(str(e))
    console.print(
        f"added [bold]{rec.source} {rec.version}[/] ({rec.format}): {rec.sections} sections, "
        f"{rec.instructions} instructions, architectures up to {rec.architectures[-1] if rec.architectures else '?'}"
    )
    prev = previous_record(rec.version, source=rec.source)
    if prev is not None:
        console.print(
            f"the previous {prev.source} {prev.version} ({prev.sections} sections, from {prev.origin}) is kept "
            "until the new one is indexed"
        )
    console.print("run [bold]ptxrag index[/] to index it")


@corpus_app.command("list")
def list_cmd(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Added manuals (and whether they are indexed) and the official versions known."""
    from ptxrag.indexer import list_added, official_manuals
    from ptxrag.indexer.catalog import Store, collection_key

    added = list_added()
    indexed = Store().manifest().collections
    official = official_manuals()
    if json_out:
        print(
            json.dumps(
                {
                    "added": [
                        {**r.model_dump(), "indexed": collection_key(r.source, r.version) in indexed}
                        for r in added
                    ],
                    "official": [o.model_dump() for o in official],
                },
                indent=2,
            )
        )
        return
    t = Table(title="added manuals", header_style="bold")
    for col in ("source", "version", "format", "sections", "instructions", "newest arch", "indexed", "from"):
        t.add_column(col, overflow="fold")
    for r in added:
        key = collection_key(r.source, r.version)
        t.add_row(
            r.source,
            r.version,
            r.format,
            str(r.sections),
            str(r.instructions),
            r.architectures[-1] if r.architectures else "",
            "yes" if key in indexed else "[yellow]no[/]",
            r.origin,
        )
    if added:
        console.print(t)
    else:
        console.print("no manual added yet: `ptxrag corpus add ptx-isa --version 9.1 --from PATH`")
    have = {r.version for r in added}
    o = Table(title="official PTX ISA manuals known (corpus/manuals/ptx-isa.toml)", header_style="bold")
    for col in ("version", "CUDA", "added", "html / pdf"):
        o.add_column(col, overflow="fold")
    for m in official:
        o.add_row(
            m.version, m.cuda, "yes" if m.version in have else "", "\n".join(x for x in (m.html, m.pdf) if x)
        )
    console.print(o)


@corpus_app.command("diff")
def diff_cmd(
    old: Annotated[str, typer.Argument(help="older version, e.g. 9.0")],
    new: Annotated[str, typer.Argument(help="newer version, e.g. 9.1")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    limit: Annotated[int, typer.Option("--limit", help="rows shown per table")] = 40,
) -> None:
    """Sections and instructions added, removed or changed between two added manuals."""
    from ptxrag.indexer import diff_manuals, load_added

    try:
        d = diff_manuals(load_added(old), load_added(new))
    except _errors() as e:
        fail(str(e))
    if json_out:
        print(d.model_dump_json(indent=2))
        return
    console.print(
        f"PTX ISA {d.old_version} -> {d.new_version}: {len(d.sections_added)} sections added, "
        f"{len(d.sections_removed)} removed, {len(d.sections_changed)} changed or renumbered"
    )
    console.print(f"instructions added: {', '.join(d.instructions_added) or 'none'}")
    console.print(f"instructions removed: {', '.join(d.instructions_removed) or 'none'}")
    console.print(f"architectures first named: {', '.join(d.architectures_added) or 'none'}")
    for title, rows in (
        ("added", d.sections_added),
        ("removed", d.sections_removed),
        ("changed", d.sections_changed),
    ):
        if not rows:
            continue
        t = Table(title=f"sections {title}", header_style="bold")
        for col in ("section", "kind", "title", "detail"):
            t.add_column(col, overflow="fold")
        for c in rows[:limit]:
            t.add_row(c.number, c.kind, c.title, c.detail)
        if len(rows) > limit:
            t.caption = f"{len(rows) - limit} more (--limit, or --json for all)"
        console.print(t)


@corpus_app.command("remove")
def remove_cmd(version: Annotated[str, typer.Argument(help="version to remove, e.g. 9.0")]) -> None:
    """Forget an added manual; the next `ptxrag index` drops its collection."""
    from ptxrag.indexer import remove_added

    try:
        remove_added(version)
    except _errors() as e:
        fail(str(e))
    console.print(f"removed ptx-isa {version}; run [bold]ptxrag index[/] to drop it from the index")


def index_cmd(
    model: Annotated[str | None, typer.Option("--model", help="embedding model name or folder")] = None,
    version: Annotated[list[str] | None, typer.Option("--version", help="only these manual versions")] = None,
    force: Annotated[bool, typer.Option("--force", help="rebuild even if nothing changed")] = False,
    no_knowledge: Annotated[
        bool, typer.Option("--no-knowledge", help="skip the bundled knowledge pack")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Index the added manuals and the bundled knowledge pack (contracts, templates, hardware cards).

    It says first what it will index and about how long; --version indexes only the manuals a study needs."""
    from ptxrag.indexer import build_index

    from .index_plan import index_plan

    try:
        for line in index_plan(None, version, force=force, knowledge=not no_knowledge, model=model):
            err_console.print(line, markup=False, highlight=False, soft_wrap=True)
    except _errors() as e:
        fail(str(e))
    _limit_threads()
    if not err_console.is_terminal:
        from .plainprogress import PlainProgress

        try:
            report = build_index(
                model=model,
                versions=version,
                knowledge=not no_knowledge,
                force=force,
                progress=PlainProgress(err_console.file),
            )
        except _errors() as e:
            fail(str(e))
        _print_report(report, json_out)
        return
    tasks: dict[str, Any] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=json_out,
    ) as progress:

        def on_progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = progress.add_task(label, total=total)
            progress.update(tasks[label], completed=done, total=total)

        try:
            report = build_index(
                model=model, versions=version, knowledge=not no_knowledge, force=force, progress=on_progress
            )
        except _errors() as e:
            fail(str(e))
    _print_report(report, json_out)


def _print_report(report: Any, json_out: bool) -> None:
    if json_out:
        print(report.model_dump_json(indent=2))
        return
    t = Table(title=f"index under {report.home} (model {report.model})", header_style="bold")
    for col in ("source", "version", "action", "sections", "chunks", "embed s", "s", "why"):
        t.add_column(col, overflow="fold")
    for c in report.collections:
        t.add_row(
            c.source,
            c.version,
            c.action,
            str(c.sections),
            str(c.chunks),
            f"{c.embed_s:.1f}",
            f"{c.wall_s:.1f}",
            c.reason,
        )
    console.print(t)
    for s in report.skipped:
        console.print(f"[yellow]note:[/] {s}")
    console.print(f"done in {report.wall_s:.1f} s")


def _hits_json(query: str, hits: list[Any]) -> dict[str, Any]:
    return {"query": query, "hits": [h.model_dump() for h in hits]}


def ask_cmd(
    query: Annotated[str | None, typer.Argument(help="what to look up")] = None,
    k: Annotated[int, typer.Option("-k", help="hits per query")] = 5,
    version: Annotated[
        str | None, typer.Option("--version", help="manual version (default: newest indexed)")
    ] = None,
    arch: Annotated[
        str | None, typer.Option("--arch", help="use the newest manual documenting this arch")
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source", help="ptx-isa, contracts, patterns, hints, templates, hardware (repeatable)"
        ),
    ] = None,
    queries_file: Annotated[
        Path | None, typer.Option("--queries-file", help="one query per line; all share one model load")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    show_text: Annotated[bool, typer.Option("--text", help="print each hit's text")] = False,
) -> None:
    """Search the index: manual sections and knowledge-pack documents, best first."""
    from ptxrag.indexer import Retriever

    queries: list[str] = []
    if queries_file is not None:
        if not queries_file.is_file():
            fail(f"{queries_file}: no such file")
        queries += [ln.strip() for ln in queries_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if query:
        queries.insert(0, query)
    if not queries:
        fail("give a QUERY or --queries-file FILE")
    from ptxrag.indexer.library import index_warnings

    _limit_threads()
    _search_threads()
    try:
        retriever = Retriever()
        if arch is not None:
            version = retriever.version_for_arch(arch)
        results = [(q, retriever.search(q, k, version=version, sources=source)) for q in queries]
    except _errors() as e:
        fail(str(e))
    for warning in index_warnings(version=version, sources=source):
        err_console.print(f"[yellow]warning:[/] {warning}", markup=True, highlight=False)
    if json_out:
        print(json.dumps([_hits_json(q, hits) for q, hits in results], indent=2))
        return
    for q, hits in results:
        t = Table(title=f"[bold]{q}[/]", header_style="bold", title_justify="left")
        for col in ("#", "section", "title", "source", "score", "url"):
            t.add_column(col, overflow="fold")
        for i, h in enumerate(hits, start=1):
            t.add_row(
                str(i), h.section_number, h.title, f"{h.source} {h.version}", f"{h.score:.3f}", h.url or ""
            )
        console.print(t)
        if show_text:
            for h in hits:
                console.rule(f"{h.breadcrumb}")
                console.print(h.text, markup=False, highlight=False)


def eval_cmd(
    file: Annotated[
        Path | None,
        typer.Argument(help='JSON lines: {"query": ..., "expect": ["9.7.13.15.16"]}; default: --set'),
    ] = None,
    version: Annotated[str | None, typer.Option("--version", help="manual version (default: newest)")] = None,
    eval_set: Annotated[
        str | None,
        typer.Option("--set", help="the packaged evaluation set of this manual version (9.1, 9.0)"),
    ] = None,
    split: Annotated[str, typer.Option("--split", help="dev (tune on it), test (report it) or all")] = "all",
    ablation: Annotated[
        list[str] | None,
        typer.Option(
            "--ablation",
            help=", ".join(ABLATION_NAMES) + " (repeatable; 'all' for every one)",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Score retrieval on a query set: recall@1/5/10, MRR@10, nDCG@10.

    A subsection of an expected section counts as a hit; scores per category, with contract-rule recall where queries expect a contract; optionally for ablations."""
    from ptxrag.indexer import Retriever, evaluate, load_queries
    from ptxrag.indexer.baselines import ABLATION_NAMES, searcher
    from ptxrag.indexer.evaluation import packaged_set, select

    if split not in ("dev", "test", "all"):
        fail(f"--split must be dev, test or all, not {split!r}")
    names = list(ablation or [])
    if "all" in names:
        names = list(ABLATION_NAMES)
    unknown = [n for n in names if n not in ABLATION_NAMES]
    if unknown:
        fail(f"unknown ablation(s) {unknown}; choose from {', '.join(ABLATION_NAMES)} or all")
    _limit_threads()
    _search_threads()
    results = []
    try:
        if file is None:
            if eval_set is None:
                fail("give a query FILE or --set VERSION (a packaged set: 9.1, 9.0)")
            file = packaged_set(eval_set)
            version = version or eval_set
        queries = select(load_queries(file), split)  # type: ignore[arg-type]
        retriever = Retriever()
        retriever.search("warm-up", 1, version=version, sources=["ptx-isa"])
        for name in names or [""]:
            retriever.clear_query_cache()  # every ablation embeds its queries afresh (fair latency)
            s = retriever if not name else searcher(name, retriever, version)
            results.append(
                evaluate(
                    s,
                    queries,
                    file=str(file),
                    version=version,
                    split=split,
                    label=name or "retriever",
                    contracts=name != "bm25-chunks",
                )
            )
    except _errors() as e:
        fail(str(e))
    if json_out:
        payload = [r.model_dump(mode="json") for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
        return
    for result in results:
        _print_eval(result, file, show_misses=len(results) == 1)


def _print_eval(result: Any, file: Path, *, show_misses: bool) -> None:
    contract = ""
    if result.contract_recall_at_5 is not None:
        contract = (
            f"  contract recall@5 {result.contract_recall_at_5:.3f} "
            f"(manual recall@5 beside contracts {result.contract_manual_recall_at_5:.3f}, "
            f"{result.contract_queries} queries)"
        )
    console.print(
        f"[bold]{result.label}[/] {result.queries} queries ({result.split}) from {file}: recall@1 "
        f"{result.recall_at_1:.3f}  recall@5 {result.recall_at_5:.3f}  recall@10 {result.recall_at_10:.3f}  "
        f"MRR@10 {result.mrr_at_10:.3f}  nDCG@10 {result.ndcg_at_10:.3f}  exact-number recall@1 "
        f"{result.exact_recall_at_1:.3f}  (p50 {result.median_query_ms:.1f} / p95 {result.p95_query_ms:.1f} "
        f"ms/query wall, CPU p50 {result.median_cpu_ms:.1f} / p95 {result.p95_cpu_ms:.1f} ms){contract}"
    )
    if len(result.by_category) > 1:
        t = Table(title=f"{result.label} by category", header_style="bold")
        for col in ("category", "queries", "recall@1", "recall@5", "MRR@10"):
            t.add_column(col)
        for cat, c in result.by_category.items():
            t.add_row(
                cat, str(c.queries), f"{c.recall_at_1:.3f}", f"{c.recall_at_5:.3f}", f"{c.mrr_at_10:.3f}"
            )
        console.print(t)
    misses = result.misses
    if show_misses and misses:
        t = Table(title="not ranked first", header_style="bold")
        for col in ("rank", "expected", "query", "got (top 5)"):
            t.add_column(col, overflow="fold")
        for o in misses:
            t.add_row(str(o.rank or "-"), ", ".join(o.expect), o.query, ", ".join(o.top[:5]))
        console.print(t)


def register(app: typer.Typer) -> None:
    app.add_typer(corpus_app, name="corpus")
    app.command("index")(index_cmd)
    app.command("ask")(ask_cmd)
    app.command("eval-retrieval")(eval_cmd)
