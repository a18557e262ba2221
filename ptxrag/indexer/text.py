"""Text helpers shared by the loaders, the chunker and the lexical index: cleaning Markdown-ish text,
section numbers, architectures, and the tokenizer that keeps PTX names (``mbarrier.try_wait.parity``) whole."""

from __future__ import annotations

import re
from collections.abc import Iterable

# --- section numbers -----------------------------------------------------------------------------------

NUMBER_RE = re.compile(r"^\d+(?:\.\d+)*$")


def number_key(number: str) -> tuple[int, ...]:
    """Sort key of a dotted section number: "9.7.10" after "9.7.9"."""
    return tuple(int(p) for p in number.split("."))


def parent_number(number: str) -> str | None:
    return number.rsplit(".", 1)[0] if "." in number else None


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a manual version ("9.1" > "8.10" > "8.9"); non-numeric parts sort first."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-]", version))


# --- queries --------------------------------------------------------------------------------------------

# Where a compiler message points: ptxas "kernel.ptx, line 17;", nvcc "kernel.cu(12):", gcc/clang style
# "kernel.cu:12:5:". The path is the writer's or the agent's own (often a temporary name, sometimes one that
# describes the mistake); no manual section is about it.
_PTXAS_AT = re.compile(r"(?m)^([ \t]*ptxas)[ \t]+[^\s,;]+,[ \t]*line[ \t]+\d+;[ \t]*")
_NVCC_AT = re.compile(
    r"(?m)^[ \t]*[^\s():]+\(\d+\):[ \t]*(?=(?:fatal[ \t]+)?(?:error|warning|catastrophic))", re.I
)
_CLANG_AT = re.compile(r"(?m)^[ \t]*[^\s():]+:\d+:(?:\d+:)?[ \t]*(?=(?:fatal[ \t]+)?(?:error|warning))", re.I)


def strip_compiler_locations(query: str) -> str:
    """``query`` with compiler locations taken out of pasted compiler output: "ptxas /tmp/a/k.ptx, line 17;
    error : Unknown modifier '.x'" -> "ptxas error : Unknown modifier '.x'", "k.cu(12): error: ..." ->
    "error: ...". Other text is returned unchanged."""
    out = _PTXAS_AT.sub(r"\1 ", query)
    out = _NVCC_AT.sub("", out)
    return _CLANG_AT.sub("", out)


# --- cleaning ------------------------------------------------------------------------------------------

# A Sphinx permalink: an empty (or icon-only) link, e.g. [](url "Permalink to this headline") or [¶](#x).
_PERMALINK = re.compile(r"\[[^\w\]]{0,3}\]\((?:[^()\"\s]+)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]\((?:[^()\s]+)(?:\s+\"[^\"]*\")?\)")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_NOISE_LINES = {"copy to clipboard", "copy", "¶", "\uf0c1", "permalink to this headline"}
_FENCE = re.compile(r"^\s*(```|~~~)")
_COPY_BUTTON = re.compile(r"[ \t]*Copy to clipboard", re.IGNORECASE)


def clean_inline(text: str) -> str:
    """Clean one line of Markdown: permalinks and images dropped, links unwrapped, backticks and
    backslash escapes removed."""
    text = _COPY_BUTTON.sub("", text)
    text = _PERMALINK.sub("", text)
    text = _IMAGE.sub("", text)
    for _ in range(2):  # links inside link text (rare) need a second pass
        text = _LINK.sub(r"\1", text)
    text = text.replace("`", "")
    text = _ESCAPE.sub(r"\1", text)
    return text.replace("\uf0c1", "").replace("¶", "")


def _clean_prose(lines: list[str]) -> list[str]:
    """Prose lines cleaned together, so a link whose text wraps onto the next line is still unwrapped."""
    kept = [ln for ln in lines if ln.strip().lower() not in _NOISE_LINES]
    out = []
    for raw, cleaned in zip(kept, clean_inline("\n".join(kept)).split("\n"), strict=False):
        if cleaned.strip() or not raw.strip():  # a line that held only an image or permalink goes
            out.append(cleaned.rstrip())
    return out


def clean_markdown(text: str) -> str:
    """Clean a Markdown body: navigation noise out; code blocks kept verbatim and whole; blank runs
    collapsed. The result is still Markdown (``` fences and | tables |)."""
    out: list[str] = []
    prose: list[str] = []
    in_code = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if _FENCE.match(line):
            if not in_code:
                out.extend(_clean_prose(prose))
                prose = []
            in_code = not in_code
            out.append(line.strip())
        elif in_code:
            out.append(line)
        else:
            prose.append(line)
    out.extend(_clean_prose(prose))
    if in_code:
        out.append("```")
    return collapse_blank_lines("\n".join(out))


def collapse_blank_lines(text: str) -> str:
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def strip_deprecated(title: str) -> str:
    return re.sub(r"\s*\(deprecated\)\s*", " ", title).strip()


# --- architectures -------------------------------------------------------------------------------------

_ARCH = re.compile(r"\bsm_(\d{2,3})([af]?)\b")


def arch_key(arch: str) -> tuple[int, str]:
    """sm_90 < sm_90a < sm_100 < sm_100a < sm_100f."""
    m = _ARCH.fullmatch(arch)
    return (int(m.group(1)), m.group(2)) if m else (-1, arch)


def architectures_in(text: str) -> set[str]:
    return {f"sm_{m.group(1)}{m.group(2)}" for m in _ARCH.finditer(text)}


# --- tokenizer -----------------------------------------------------------------------------------------

# Words, numbers and PTX names: dotted (cp.async.bulk), with state-space qualifiers (shared::cluster),
# special registers (%tid) and directives (.target). Lower-cased before matching.
_TOKEN = re.compile(r"[%.]?[a-z0-9_]+(?:(?:\.|::)[a-z0-9_]+)*")

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "within",
        "without",
        "you",
        "your",
        "use",
        "used",
        "using",
    ]
)


def _stem(word: str) -> str:
    """A light plural stemmer for prose words ("modes" -> "mode"); PTX names are left alone."""
    if len(word) > 4 and word.isalpha():
        if word.endswith("ies"):
            return word[:-3] + "y"
        if word.endswith("s") and not word.endswith(("ss", "us", "is")):
            return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Tokens for BM25. A dotted name yields itself, its dotted prefixes and its parts, so
    ``mbarrier.try_wait.parity`` matches a query for ``mbarrier.try_wait`` and one for ``parity``."""
    tokens: list[str] = []
    for m in _TOKEN.finditer(text.lower()):
        tok = m.group(0)
        sigil = tok[0] if tok[0] in "%." else ""
        body = tok[1:] if sigil else tok
        if "." not in body and "::" not in body:
            if body in STOPWORDS:
                continue
            if sigil:
                tokens.append(sigil + body)
            tokens.append(_stem(body))
            continue
        if re.fullmatch(r"\d+(?:\.\d+)+", body):  # a version or section number: keep it whole
            tokens.append(body)
            continue
        parts = re.split(r"\.|::", body)
        tokens.append(sigil + body)
        # dotted prefixes (cp.async, cp.async.bulk, ...), qualifiers removed
        dotted = body.split("::", 1)[0].split(".")
        for i in range(2, len(dotted)):
            tokens.append(".".join(dotted[:i]))
        tokens.extend(p for p in parts if p and p not in STOPWORDS)
    return tokens


def unique(items: Iterable[str]) -> tuple[str, ...]:
    """Items in first-seen order, without repeats."""
    return tuple(dict.fromkeys(items))
