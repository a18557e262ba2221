"""The pattern and debug-hint layers of the knowledge pack: format, citations against the 9.1 manual, the
files they point at, the contract rules they name, and which pattern a task gets (no GPU, no compiler)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ptxrag.corpus.documents as pat
from ptxrag.corpus import (
    CorpusError,
    ManualIndex,
    contracts,
    debug_hints,
    iter_documents,
    pattern_for,
    patterns,
    unresolved_citations,
)
from ptxrag.corpus.files import package_dir
from ptxrag.tasks import list_tasks

PATTERN_TOPICS = {
    "warp-specialized-pipeline",
    "persistent-tile-scheduler",
    "tma-multicast-cluster",
    "tma-store-epilogue",
    "fa3-attention-pipeline",
}
ITEM_RE = re.compile(r"^(\d+)\. \*\*", re.M)
CITE_RE = re.compile(r"\(PTX ISA\s+([0-9.,\s]+)\)")
#: "contract-tma rule 8", "contract-tma rules 4 and 7", "contract-clusters (rules 2, 6, 7)"
RULE_REF_RE = re.compile(r"contract-([a-z-]+?)\s*\(?rules?\s+(\d+(?:(?:,\s*|\s+and\s+)\d+)*)")
NONE_SHOWS = "No tested kernel in this repository shows"


@pytest.fixture(scope="module")
def manual(shared_dir: Path) -> ManualIndex:
    return ManualIndex.build(shared_dir / "corpus" / "ptx-isa-9.1")


def _markdown_docs():
    return [*patterns(), *debug_hints()]


def _rule_counts() -> dict[str, int]:
    return {d.doc_id: len(ITEM_RE.findall(d.text)) for d in contracts()}


# ---- format ---------------------------------------------------------------------------------------------


def test_the_pattern_layer_has_the_five_patterns_and_iter_documents_yields_them():
    assert {p.doc_id for p in patterns()} == {f"pattern-{t}" for t in PATTERN_TOPICS}
    assert [d.doc_id for d in iter_documents(["patterns"])] == sorted(f"pattern-{t}" for t in PATTERN_TOPICS)
    assert [d.doc_id for d in iter_documents(["hints"])] == ["hints-debug-sm90"]
    for p in patterns():
        assert p.source == "patterns" and p.requires and p.tags and p.text.strip()


@pytest.mark.parametrize("doc", _markdown_docs(), ids=lambda d: d.doc_id)
def test_every_numbered_item_cites_a_section_listed_in_the_front_matter(doc):
    items = ITEM_RE.findall(doc.text)
    assert items and items == [str(i) for i in range(1, len(items) + 1)], "items must be numbered 1..n"
    bodies = ITEM_RE.split(doc.text)[2::2]
    body_cites: set[str] = set()
    for n, body in zip(items, bodies, strict=True):
        found = CITE_RE.findall(body)
        assert found, f"item {n} of {doc.doc_id} cites no PTX ISA section"
        body_cites |= {c.strip() for group in found for c in group.split(",") if c.strip()}
    assert body_cites == set(doc.cites), "front-matter cites must equal the sections the items cite"


def test_every_citation_of_patterns_and_hints_resolves_in_the_91_manual(manual):
    assert unresolved_citations(_markdown_docs(), manual) == {}


@pytest.mark.parametrize("doc", _markdown_docs(), ids=lambda d: d.doc_id)
def test_named_contract_rules_and_patterns_exist(doc):
    counts = _rule_counts()
    refs = RULE_REF_RE.findall(doc.text)
    for topic, numbers in refs:
        cid = f"contract-{topic}"
        assert cid in counts, f"{doc.doc_id} names {cid}, which does not exist"
        for n in re.findall(r"\d+", numbers):
            assert 1 <= int(n) <= counts[cid], f"{doc.doc_id} names {cid} rule {n}; it has {counts[cid]}"
    named = set(re.findall(r"\bcontract-[a-z]+(?:-[a-z]+)*", doc.text))
    assert named <= set(counts), f"unknown contracts: {named - set(counts)}"
    ids = {p.doc_id for p in patterns()}
    assert set(re.findall(r"\bpattern-[a-z0-9]+(?:-[a-z0-9]+)*", doc.text)) <= ids
    if doc.source == "hints":
        assert len(refs) >= 8, "debug hints point at the contract rules to check"


def test_rule_reference_parser_reads_every_spelling():
    text = "contract-tma rule 8; contract-mbarrier rules 7 and 8, contract-clusters (rules 2, 6, 7)"
    assert RULE_REF_RE.findall(text) == [("tma", "8"), ("mbarrier", "7 and 8"), ("clusters", "2, 6, 7")]


@pytest.mark.parametrize("p", patterns(), ids=lambda d: d.doc_id)
def test_patterns_point_only_at_tested_files_that_exist_or_say_none_does(p):
    root = package_dir().parent  # the ptxrag package
    for rel in p.shown_by:
        f = root / rel
        assert f.is_file(), rel
        assert f"`{rel}`" in p.text, f"{p.doc_id} must name {rel} in its text"
        # a reference solution or unit kernel: its folder is a task the evaluator validates
        assert f.name == "solution.cu" and (f.parent / "task.toml").is_file(), f"{rel} is not a tested kernel"
    if not p.shown_by:
        assert NONE_SHOWS in " ".join(p.text.split())
    # every task or unit file the text names exists
    for rel in re.findall(r"`((?:tasks/suite|corpus/templates)/[^`]+)`", p.text):
        assert (root / rel).exists(), f"{p.doc_id} names {rel}, which does not exist"


# ---- loader errors ----------------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, head: str) -> Path:
    f = tmp_path / f"{name}.md"
    f.write_text(f"---\n{head}\n---\n# T\n\n1. **x.** y. (PTX ISA 9.7.19.5)\n")
    return f


def test_pattern_and_hints_files_are_validated(tmp_path):
    base = "title: T\ninstructions: [setmaxnreg]\ncites: [9.7.19.5]"
    ok = _write(tmp_path, "demo", f"id: pattern-demo\n{base}\nrequires: [setmaxnreg]\nshown_by: []")
    assert pat.load_pattern(ok).requires == ("setmaxnreg",)
    wrong_id = _write(tmp_path, "demo2", f"id: contract-demo2\n{base}\nrequires: [a]\nshown_by: []")
    with pytest.raises(CorpusError, match="must be 'pattern-demo2'"):
        pat.load_pattern(wrong_id)
    no_req = _write(tmp_path, "demo3", f"id: pattern-demo3\n{base}\nrequires: []\nshown_by: []")
    with pytest.raises(CorpusError, match="'requires' must name"):
        pat.load_pattern(no_req)
    missing = _write(
        tmp_path, "demo4", f"id: pattern-demo4\n{base}\nrequires: [a]\nshown_by: [tasks/nope.cu]"
    )
    with pytest.raises(CorpusError, match="do not exist.*tasks/nope.cu"):
        pat.load_pattern(missing)
    lacks = _write(tmp_path, "demo5", f"id: pattern-demo5\n{base}\nrequires: [a]")
    with pytest.raises(CorpusError, match="lacks.*shown_by"):
        pat.load_pattern(lacks)
    hints = _write(tmp_path, "h", f"id: hints-h\n{base}\narch: [SM_90A]")
    assert pat.load_hints(hints).archs == ("sm_90a",)
    no_arch = _write(tmp_path, "h2", f"id: hints-h2\n{base}\narch: []")
    with pytest.raises(CorpusError, match="'arch' must name"):
        pat.load_hints(no_arch)


def test_debug_hints_by_arch():
    assert [d.doc_id for d in debug_hints("sm_90a")] == ["hints-debug-sm90"]
    assert debug_hints("sm_90") == [] and debug_hints("sm_100a") == []


# ---- which pattern a task gets ----------------------------------------------------------------------------


def _fake_patterns(monkeypatch, tmp_path, specs: dict[str, str]) -> None:
    folder = tmp_path / "patterns"
    folder.mkdir()
    for name, extra in specs.items():
        head = f"id: pattern-{name}\ntitle: T\ninstructions: [x.y]\ncites: [9.7.19.5]\nshown_by: []\n{extra}"
        _write(folder, name, head)
    monkeypatch.setattr(pat, "_paths", lambda sub: sorted(folder.glob("*.md")) if sub == "patterns" else [])


def test_selection_prefers_the_family_then_the_most_specific_requirements(monkeypatch, tmp_path):
    _fake_patterns(
        monkeypatch,
        tmp_path,
        {
            "gemm": "requires: [wgmma.mma_async, cp.async.bulk.tensor]",
            "ws": "requires: [setmaxnreg, wgmma.mma_async, cp.async.bulk.tensor]",
            "attn": "requires: [wgmma.mma_async]\nfamilies: [attention]",
            "bulkx": "requires: [cp.async.bulkx]",
        },
    )
    tma = "cp.async.bulk.tensor.shared::cluster.global"
    assert pattern_for(["wgmma.mma_async", tma], "gemm").doc_id == "pattern-gemm"
    assert pattern_for(["wgmma.mma_async", tma, "setmaxnreg.inc"], "gemm").doc_id == "pattern-ws"
    # limited to its family, and preferred there over a more specific general pattern
    assert pattern_for(["wgmma.mma_async", tma, "setmaxnreg.inc"], "Attention").doc_id == "pattern-attn"
    assert pattern_for(["wgmma.mma_async"], "gemm") is None
    # requirements match on dot boundaries, and only as a prefix of the task's instruction
    assert pattern_for(["cp.async.bulk.tensor"], "") is None
    assert pattern_for(["wgmma"], "") is None


def test_every_shipped_pattern_is_the_one_chosen_for_its_own_requirements():
    """No pattern is shadowed by another: a task needing exactly a pattern's instructions gets it."""
    for p in patterns():
        family = p.families[0] if p.families else ""
        assert pattern_for(list(p.requires), family) == p, p.doc_id


def test_suite_tasks_get_the_pattern_their_required_instructions_call_for():
    chosen = {t.id: pattern_for(t.required_ptx, t.family) for t in list_tasks()}
    for tid, p in chosen.items():
        if p is not None:
            assert p.fits(next(t for t in list_tasks() if t.id == tid).required_ptx, "")
    assert chosen["gemm-ws-setmaxnreg-bf16"].doc_id == "pattern-warp-specialized-pipeline"
    assert chosen["gemm-tma-multicast-bf16"].doc_id == "pattern-tma-multicast-cluster"
    assert chosen["tma-bias-scale-2d"].doc_id == "pattern-tma-store-epilogue"
    assert chosen["warp-reduce-redux"] is None and chosen["gemm-mma-sync-sm80"] is None
    # no suite task is an attention task: the FA3 pattern is not chosen for a GEMM
    assert all(p is None or p.doc_id != "pattern-fa3-attention-pipeline" for p in chosen.values())
