"""Pull exactly one ``.cu`` file out of a model's reply: fenced or not, one block or several, with prose.

Rules, in order:
1. Fenced blocks (```` ``` ```` or ``~~~``, any info string; an unterminated last fence runs to the end
   of the reply, as happens when a reply is cut off). Blocks tagged as another language (python,
   bash, text, ...) are ignored.
2. Among them, the blocks that define ``ptxrag_launch``. When several do, the prose line introducing
   each decides: a block introduced as final, corrected or fixed wins over one introduced as a
   fallback, an alternative, the original or for comparison; without such words the first one is
   taken (replies put the answer first, alternatives after). The choice, and why, is noted: the notes
   go into the next round's feedback.
3. No block defines it: a single CUDA-looking block is taken (the compiler will say what is missing);
   several are refused as ambiguous.
4. No fences at all: the reply itself when it looks like a whole source file, from its first
   ``#include`` or comment line on.
Anything else raises :class:`NoCodeFound`, whose message becomes the next round's feedback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ptxrag.base.errors import ModelApiFailure

ENTRY = "ptxrag_launch"
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.M)
_NOT_CUDA = {
    "python", "py", "bash", "sh", "shell", "console", "text", "txt", "json", "toml", "yaml", "yml",
    "ptx", "sass", "asm", "markdown", "md", "diff", "output", "log",
}  # fmt: skip
_CUDA_HINT = re.compile(r"__global__|#include|asm\s*(volatile)?\s*\(|extern\s+\"C\"|__device__")
_ENTRY_DEF = re.compile(r"\bptxrag_launch\s*\([^;{)]*\)\s*\{", re.S)


class NoCodeFound(ModelApiFailure, ValueError):
    """The reply holds no usable source file; the message tells the model what to send instead."""


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    closed: bool
    lead: str = ""
    """the last line of prose before the block's opening fence"""


_FINAL = re.compile(r"\b(final|corrected|fixed|complete|full|updated|use this)\b", re.I)
_OTHER = re.compile(
    r"\b(fallback|alternative(ly)?|for comparison|original|previous|old|earlier|backup|reference|"
    r"simpler|naive|baseline|draft|before)\b",
    re.I,
)


@dataclass(frozen=True)
class Extraction:
    code: str
    blocks_found: int
    notes: list[str] = field(default_factory=list)


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block in ``text``, in order. A fence closes with the same character, at least as long."""
    blocks: list[Block] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if m is None:
            return blocks
        fence, info = m.group(1), m.group(2).strip()
        prose = [ln.strip() for ln in text[pos : m.start()].splitlines() if ln.strip()]
        lead = prose[-1] if prose else ""
        lang = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        c = close.search(text, start)
        if c is None:
            blocks.append(Block(lang, text[start:].rstrip() + "\n", closed=False, lead=lead))
            return blocks
        blocks.append(Block(lang, text[start : c.start()].rstrip() + "\n", closed=True, lead=lead))
        pos = c.end()


def _defines_entry(code: str) -> bool:
    return bool(_ENTRY_DEF.search(code))


def _pick(blocks: list[Block]) -> tuple[Block, str]:
    """The block to take among several that define the entry point, and why (see the module doc)."""
    if len(blocks) == 1:
        return blocks[0], "the only one"
    final = [b for b in blocks if _FINAL.search(b.lead) and not _OTHER.search(b.lead)]
    if final:
        return final[0], f"introduced as {_FINAL.search(final[0].lead).group(0).lower()!r}"  # type: ignore[union-attr]
    others = [b for b in blocks if _OTHER.search(b.lead) and not _FINAL.search(b.lead)]
    rest = [b for b in blocks if b not in others]
    if others and rest:
        label = _OTHER.search(others[0].lead).group(0).lower()  # type: ignore[union-attr]
        return rest[0], f"the other is introduced as {label!r}"
    return blocks[0], "no label said which is final, so the first"


def extract_code(reply: str) -> Extraction:
    """The one ``.cu`` source in ``reply``; raises :class:`NoCodeFound` when there is none or it is ambiguous."""
    if not reply or not reply.strip():
        raise NoCodeFound("the reply was empty; send the whole .cu file in one ```cuda code block")
    blocks = fenced_blocks(reply)
    notes: list[str] = []
    if blocks:
        cuda = [b for b in blocks if b.lang not in _NOT_CUDA and b.code.strip()]
        skipped = len(blocks) - len(cuda)
        if skipped:
            notes.append(f"ignored {skipped} block(s) in other languages or empty")
        with_entry = [b for b in cuda if _defines_entry(b.code)]
        if with_entry:
            chosen, why = _pick(with_entry)
            where = f"block {cuda.index(chosen) + 1} of {len(cuda)}"
            if len(with_entry) > 1:
                notes.append(
                    f"{len(with_entry)} code blocks define {ENTRY}; took {where} ({why}); "
                    "send exactly one next time"
                )
            elif len(cuda) > 1:
                notes.append(f"{len(cuda)} code blocks; took {where}, the one that defines {ENTRY}")
        elif len(cuda) == 1 and _CUDA_HINT.search(cuda[0].code):
            chosen = cuda[0]
            notes.append(f"the only code block does not define {ENTRY}")
        elif len(cuda) > 1:
            raise NoCodeFound(
                f'the reply has {len(cuda)} code blocks and none defines extern "C" int {ENTRY}(...); '
                "send the whole .cu file in one ```cuda block"
            )
        else:
            raise NoCodeFound(
                "the reply has no CUDA code block; send the whole .cu file in one ```cuda block"
            )
        if not chosen.closed:
            notes.append("the code block was not closed (reply cut off?)")
        return Extraction(chosen.code, len(blocks), notes)
    # no fences: accept a reply that is itself a source file
    if _defines_entry(reply) and _CUDA_HINT.search(reply):
        lines = reply.splitlines(keepends=True)
        first = next(
            (
                i
                for i, ln in enumerate(lines)
                if ln.lstrip().startswith(("#include", "//", "/*", "#define", "#pragma"))
            ),
            0,
        )
        notes.append("no code fences; took the reply from its first source line")
        return Extraction("".join(lines[first:]).rstrip() + "\n", 0, notes)
    raise NoCodeFound(
        f'the reply has no code: send the whole .cu file (with extern "C" int {ENTRY}(...)) in one ```cuda block'
    )
