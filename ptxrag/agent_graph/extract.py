"""Pull exactly one ``.cu`` file out of a model's reply: fenced or not, one block or several, with prose.

Rules, in order:
1. Fenced blocks (```` ``` ```` or ``~~~``, any info string; an unterminated last fence runs to the end
   of the reply, as happens when a reply is cut off). Blocks tagged as another language (python,
   bash, text, ...) are ignored.
2. Among them, the blocks that define ``ptxrag_launch``; the last one wins (models usually end with
   the final version). Several such blocks are noted, so the transcript shows the choice.
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
        lang = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        c = close.search(text, start)
        if c is None:
            blocks.append(Block(lang, text[start:].rstrip() + "\n", closed=False))
            return blocks
        blocks.append(Block(lang, text[start : c.start()].rstrip() + "\n", closed=True))
        pos = c.end()


def _defines_entry(code: str) -> bool:
    return bool(_ENTRY_DEF.search(code))


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
            chosen = with_entry[-1]
            if len(with_entry) > 1:
                notes.append(f"{len(with_entry)} blocks define {ENTRY}; took the last one")
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
