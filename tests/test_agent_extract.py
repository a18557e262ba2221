"""Code extraction from messy model replies."""

from __future__ import annotations

import pytest

from ptxrag.agent_graph.extract import NoCodeFound, extract_code, fenced_blocks

KERNEL = (
    '#include "ptxrag_abi.h"\n__global__ void k() {}\n'
    'extern "C" int ptxrag_launch(const ptxrag_args* a) {\n  k<<<1, 1, 0, a->stream>>>();\n  return 0;\n}\n'
)


def test_single_fenced_block_with_prose_around():
    reply = f"Here is my kernel.\n\n```cuda\n{KERNEL}```\n\nIt uses one warp per row."
    ex = extract_code(reply)
    assert ex.code == KERNEL
    assert ex.blocks_found == 1 and ex.notes == []


@pytest.mark.parametrize("info", ["cuda", "cpp", "c++", "cu", "", "CUDA", "{.cuda}", "cuda title=kernel.cu"])
def test_any_cuda_info_string(info):
    assert extract_code(f"```{info}\n{KERNEL}```").code == KERNEL


def test_block_introduced_as_final_wins_and_other_languages_are_ignored():
    first = KERNEL.replace("k<<<1", "k<<<2")
    reply = (
        f"First try:\n```cuda\n{first}```\nCompile with:\n```bash\nnvcc -arch=sm_90a k.cu\n```\n"
        f"A helper:\n```cuda\n__device__ int helper() {{ return 1; }}\n```\nFinal:\n```cuda\n{KERNEL}```\n"
    )
    ex = extract_code(reply)
    assert ex.code == KERNEL
    assert any("took block 3 of 3 (introduced as 'final')" in n for n in ex.notes), ex.notes
    assert any("other languages" in n for n in ex.notes)


def test_final_version_first_and_a_fallback_second_takes_the_final_one():
    fallback = KERNEL.replace("k<<<1", "k<<<2")
    reply = (
        "Final version first, a fallback for comparison second.\n\n"
        f"```cuda\n{KERNEL}```\n\nFallback (plain shuffles):\n\n```cuda\n{fallback}```\n"
    )
    ex = extract_code(reply)
    assert ex.code == KERNEL
    assert any("took block 1 of 2" in n and "'fallback'" in n for n in ex.notes), ex.notes


def test_unlabelled_blocks_take_the_first_and_say_why():
    second = KERNEL.replace("k<<<1", "k<<<2")
    ex = extract_code(f"```cuda\n{KERNEL}```\n\n```cuda\n{second}```\n")
    assert ex.code == KERNEL
    assert any("no label said which is final" in n for n in ex.notes)


def test_the_block_that_defines_the_entry_is_taken_and_the_note_says_so():
    helper = "__device__ int helper() { return 1; }\n"
    ex = extract_code(f"```cuda\n{KERNEL}```\nand a helper:\n```cuda\n{helper}```\n")
    assert ex.code == KERNEL
    assert ex.notes == ["2 code blocks; took block 1 of 2, the one that defines ptxrag_launch"]


def test_tilde_fences_and_longer_backtick_fences_holding_backticks():
    assert extract_code(f"~~~cuda\n{KERNEL}~~~").code == KERNEL
    inner = KERNEL + "// a comment that shows ```code``` inline\n"
    assert extract_code(f"````cuda\n{inner}````").code == inner


def test_unterminated_fence_runs_to_the_end_and_is_noted():
    ex = extract_code(f"Sure:\n```cuda\n{KERNEL}")
    assert ex.code == KERNEL
    assert any("not closed" in n for n in ex.notes)


def test_reply_that_is_a_bare_source_file():
    ex = extract_code(f"Here you go\n{KERNEL}")
    assert ex.code == KERNEL
    assert any("no code fences" in n for n in ex.notes)


def test_single_block_without_entry_is_taken_with_a_note():
    ex = extract_code("```cuda\n__global__ void k() {}\n```")
    assert "__global__" in ex.code
    assert any("does not define ptxrag_launch" in n for n in ex.notes)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("", "empty"),
        ("I cannot do this task.", "no code"),
        ("```python\nprint(1)\n```", "no CUDA code block"),
        ("```cuda\n__global__ void a() {}\n```\n```cuda\n__global__ void b() {}\n```", "none defines"),
    ],
)
def test_no_usable_code_raises_with_advice(reply, says):
    with pytest.raises(NoCodeFound, match=says):
        extract_code(reply)


def test_fenced_blocks_keep_order_and_languages():
    blocks = fenced_blocks("a\n```text\nx\n```\nb\n```cuda\ny\n```\n")
    assert [(b.lang, b.code, b.closed) for b in blocks] == [("text", "x\n", True), ("cuda", "y\n", True)]
