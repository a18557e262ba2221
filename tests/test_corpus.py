"""The knowledge pack's loader API, hardware cards and contract documents (no GPU, no compiler needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from ptxrag.corpus import (
    CorpusError,
    HardwareCard,
    KnowledgeDoc,
    ManualIndex,
    contracts,
    hardware_card,
    iter_documents,
    list_hardware,
    matches_instruction,
    render_card,
    template_header,
    unresolved_citations,
)
from ptxrag.corpus.cards import load_card
from ptxrag.corpus.documents import load_contract, parse_front_matter
from ptxrag.corpus.files import package_dir
from ptxrag.tasks.spec import ARCHS

CONTRACT_TOPICS = {"mbarrier", "async-proxy", "tma", "wgmma", "clusters", "warp-specialization", "pdl"}
RULE_RE = re.compile(r"^(\d+)\. \*\*", re.M)
CITE_RE = re.compile(r"\(PTX ISA\s+([0-9.,\s]+)\)")


@pytest.fixture(scope="module")
def manual(shared_dir: Path) -> ManualIndex:
    return ManualIndex.build(shared_dir / "corpus" / "ptx-isa-9.1")


# ---- documents --------------------------------------------------------------------------------------------


def test_iter_documents_yields_every_layer_with_unique_ids():
    docs = list(iter_documents())
    assert all(isinstance(d, KnowledgeDoc) for d in docs)
    ids = [d.doc_id for d in docs]
    assert len(ids) == len(set(ids))
    assert {d.source for d in docs} == {"contracts", "patterns", "hints", "templates", "hardware"}
    assert {d.doc_id for d in docs if d.source == "contracts"} == {f"contract-{t}" for t in CONTRACT_TOPICS}
    assert {d.doc_id for d in docs if d.source == "hardware"} == {"hw-h100-sxm", "hw-h200", "hw-b200"}
    assert [d.doc_id for d in iter_documents(["templates"])] == ["template-ptxrag_sm90"]
    for d in docs:
        assert d.text.strip() and d.title and d.path.is_file()


def test_unknown_source_is_a_clear_error():
    with pytest.raises(CorpusError, match="unknown knowledge source.*'hardwares'.*known"):
        list(iter_documents(["contracts", "hardwares"]))


@pytest.mark.parametrize(
    ("tag", "query", "hit"),
    [
        ("mbarrier", "mbarrier.try_wait.parity", True),
        ("mbarrier.try_wait.parity", "mbarrier", True),
        ("cp.async.bulk.tensor", "cp.async.bulk.tensor.2d.shared::cluster.global", True),
        ("cp.async.bulk", "cp.async.bulkx", False),
        ("wgmma.fence", "wgmma.mma_async", False),
        ("SETMAXNREG", "setmaxnreg.inc", True),
        ("redux.sync", "", False),
    ],
)
def test_instruction_tags_match_on_dot_boundaries(tag, query, hit):
    assert matches_instruction(tag, query) is hit


def test_contracts_filter_by_instruction_prefixes():
    everything = contracts()
    assert len(everything) == len(CONTRACT_TOPICS)
    tma = {d.doc_id for d in contracts(["cp.async.bulk.tensor.2d.shared::cluster.global.tile"])}
    assert {"contract-tma", "contract-mbarrier", "contract-async-proxy"} <= tma
    assert "contract-pdl" not in tma
    assert [d.doc_id for d in contracts(["griddepcontrol.wait"])] == ["contract-pdl"]
    assert {d.doc_id for d in contracts(["setmaxnreg.dec"])} == {
        "contract-warp-specialization",
        "contract-wgmma",
    }
    assert contracts(["no.such.instruction"]) == []
    assert contracts([]) == []


def test_template_header_document_covers_every_family():
    doc = template_header()
    assert doc.doc_id == "template-ptxrag_sm90" and doc.source == "templates"
    parts = re.findall(r"^// ===== (.+?) =====$", doc.text, re.M)
    assert parts[0] == "ptxrag_sm90.cuh"
    for family in ("common", "mbarrier", "fence", "bulk", "tma", "wgmma", "warp", "cluster", "control"):
        assert f"ptxrag_sm90/{family}.cuh" in parts
    # generated wgmma files are condensed (names + dispatcher), not their 100-operand asm bodies
    assert "asm bodies omitted" in doc.text and "wgmma_m64n256k16_f32_bf16" in doc.text
    assert "%127" not in doc.text
    for instr in ("mbarrier.try_wait.parity", "cp.async.bulk.tensor", "wgmma.mma_async", "setmaxnreg.inc",
                  "griddepcontrol.wait", "elect.sync", "redux.sync", "stmatrix", "ldmatrix", "mapa",
                  "barrier.cluster.arrive", "fence.proxy.async", "fence.mbarrier_init", "st.async"):  # fmt: skip
        assert doc.concerns(instr), instr


def test_template_header_for_an_unknown_arch_lists_the_known_ones():
    with pytest.raises(CorpusError, match=r"no template header for arch 'sm_80'; known: \['sm_90a'\]"):
        template_header("sm_80")


# ---- malformed files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# no front matter\n", "must start with a '---'"),
        ("---\nid: x\n", "not closed"),
        ("---\nthis is not a pair\n---\n", "expected 'key: value'"),
        ("---\nid: a\nid: b\n---\n", "duplicate key 'id'"),
        ("---\ncites: [1.2,\n---\n", "must be on one line"),
    ],
)
def test_front_matter_errors_name_the_problem(tmp_path, text, says):
    with pytest.raises(CorpusError, match=re.escape(says)):
        parse_front_matter(text, tmp_path / "x.md")


def _contract(tmp_path: Path, name: str, head: str) -> Path:
    p = tmp_path / f"{name}.md"
    p.write_text(f"---\n{head}\n---\n# body\n")
    return p


def test_contract_validation(tmp_path):
    ok = _contract(
        tmp_path, "demo", "id: contract-demo\ntitle: Demo\ninstructions: [mbarrier]\ncites: [9.7.13.15.4]"
    )
    doc = load_contract(ok)
    assert doc.tags == ("mbarrier",) and doc.cites == ("9.7.13.15.4",) and doc.text == "# body"
    bad_id = _contract(tmp_path, "demo2", "id: contract-other\ntitle: T\ninstructions: [a.b]\ncites: []")
    with pytest.raises(CorpusError, match="must be 'contract-demo2'"):
        load_contract(bad_id)
    missing = _contract(tmp_path, "demo3", "id: contract-demo3\ntitle: T\ncites: []")
    with pytest.raises(CorpusError, match=r"lacks \['instructions'\]"):
        load_contract(missing)
    bad_cite = _contract(
        tmp_path, "demo4", "id: contract-demo4\ntitle: T\ninstructions: [a.b]\ncites: [section 9]"
    )
    with pytest.raises(CorpusError, match="not section numbers"):
        load_contract(bad_cite)


# ---- hardware cards -----------------------------------------------------------------------------------------


def test_cards_load_by_name_or_alias_case_insensitively():
    assert list_hardware() == ["b200", "h100-sxm", "h200"]
    assert hardware_card("H200").name == "h200"
    assert hardware_card(" h100 ").name == "h100-sxm"
    with pytest.raises(CorpusError, match=r"no hardware card 'a100'; known cards: b200 .*h100-sxm .*h200"):
        hardware_card("a100")


def test_cards_are_frozen_and_consistent():
    for name in list_hardware():
        card = hardware_card(name)
        assert isinstance(card, HardwareCard)
        with pytest.raises(ValidationError):
            card.sm_count = None  # type: ignore[assignment,misc]
        assert ARCHS[card.arch][1] == card.gencode, f"{name}: gencode disagrees with ptxrag.tasks ARCHS"
        assert card.compute_capability == ".".join(map(str, ARCHS[card.arch][0]))
        assert card.smem_per_block_max_kib.value < card.smem_per_sm_kib.value
        assert card.cluster_size_portable_max.value <= card.cluster_size_nonportable_max.value
        assert card.tensor_dense_tflops["bf16"].value > card.cuda_core_tflops["fp32"].value
        for _, v in card._all_values():
            assert v.source in card.sources


def test_h200_card_marks_what_was_measured_on_the_lent_device():
    card = hardware_card("h200")
    assert card.sm_count.value == 132 and card.sm_count.measured
    assert card.memory_bandwidth_tb_per_s.value == 4.8 and not card.memory_bandwidth_tb_per_s.measured
    assert {"copy_bandwidth_tb_per_s", "bf16_matmul_tflops", "l2_cache_mb"} <= set(card.measured)
    assert all(v.measured for v in card.measured.values())
    assert "KINDS.md" in card.sources["measured-device"]
    text = render_card(card)
    assert "SMs 132 [measured]" in text and "4.8 TB/s [h200-datasheet]" in text
    assert "-gencode=arch=compute_90a,code=sm_90a" in text
    assert len(text) < len(render_card(card, full_sources=True))


def test_bad_card_files_are_clear_errors(tmp_path):
    good = (package_dir() / "hardware" / "h200.toml").read_text()
    p = tmp_path / "h200.toml"
    p.write_text(good.replace('source = "h200-datasheet"', 'source = "nowhere"', 1))
    with pytest.raises(CorpusError, match="source 'nowhere' is not one of"):
        load_card(p)
    p.write_text(good.replace("[sm_count]", "[sm_countt]"))
    with pytest.raises(CorpusError, match="sm_countt"):
        load_card(p)
    renamed = tmp_path / "other.toml"
    renamed.write_text(good)
    with pytest.raises(CorpusError, match="must equal the file name"):
        load_card(renamed)
    p.write_text("name = [")
    with pytest.raises(CorpusError, match="not valid TOML"):
        load_card(p)


# ---- contracts against the PTX ISA 9.1 manual ---------------------------------------------------------------


def test_manual_index_resolves_real_sections_only(manual):
    assert "9.7.13.15.16" in manual and "9.7.15.5.1.2.1.3" in manual and "8.6" in manual
    assert "9.7.13.15.99" not in manual and "9.99.1" not in manual
    assert manual.title("9.7.13.15.16").startswith("Parallel Synchronization")
    with pytest.raises(CorpusError, match="not in the manual"):
        manual.title("9.99.1")


def test_every_citation_of_the_pack_resolves_in_the_91_manual(manual):
    docs = list(iter_documents(["contracts", "templates"]))
    assert unresolved_citations(docs, manual) == {}
    fake = KnowledgeDoc(
        "contracts", "contract-fake", "t", "x", ("a",), Path("f.md"), ("9.7.13.15.4", "9.99.1")
    )
    assert unresolved_citations([fake], manual) == {"contract-fake": ["9.99.1"]}


@pytest.mark.parametrize("topic", sorted(CONTRACT_TOPICS))
def test_every_rule_states_a_cited_section_listed_in_the_front_matter(topic):
    doc = next(d for d in contracts() if d.doc_id == f"contract-{topic}")
    rules = RULE_RE.findall(doc.text)
    assert rules and rules == [str(i) for i in range(1, len(rules) + 1)], "rules must be numbered 1..n"
    bodies = RULE_RE.split(doc.text)[2::2]
    body_cites: set[str] = set()
    for n, body in zip(rules, bodies, strict=True):
        found = CITE_RE.findall(body)
        assert found, f"rule {n} of {topic} cites no PTX ISA section"
        body_cites |= {c.strip() for group in found for c in group.split(",") if c.strip()}
    assert body_cites == set(doc.cites), "front-matter cites must equal the sections the rules cite"


def test_contracts_name_only_unit_kernels_that_exist():
    units = {p.name for p in (package_dir() / "templates" / "unit").iterdir() if (p / "task.toml").is_file()}
    named = {m for d in contracts() for m in re.findall(r"`(unit-[a-z0-9-]+)`", d.text)}
    assert named and named <= units
