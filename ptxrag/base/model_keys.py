"""Whether a model spec needs an API key that is not set: answered before the model SDKs and the agent are
imported, so ``ptxrag run`` / ``ptxrag bench`` without a key say so at once (issue 22: the message took seconds
behind the imports of langgraph and the SDKs). ``ptxrag.agent_graph.models`` asks the same question."""

from __future__ import annotations

import os


def split_openai(rest: str) -> tuple[str, str | None]:
    """``gpt-x@http://host:port/v1`` -> (``gpt-x``, ``http://host:port/v1``); no server: (rest, None)."""
    for marker in ("@http://", "@https://"):
        if marker in rest:
            model, _, url = rest.rpartition(marker)
            return model, marker[1:] + url
    return rest, None


def missing_key(spec: str) -> str | None:
    """The error to show when ``spec`` needs an API key that is not in the environment, else None."""
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        return None  # not a spec this checks: the model factory says what is wrong with it
    if provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        return (
            "ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=... to use "
            f"{spec}, or run offline with a scripted model: --model replay:FILE "
            "(`ptxrag demo` shows one)"
        )
    if provider == "openai" and not os.environ.get("OPENAI_API_KEY") and split_openai(rest)[1] is None:
        return (
            "OPENAI_API_KEY is not set: export it to use the OpenAI API, give a local server as "
            "openai:<model>@http://host:port/v1 (no key needed), or run offline with --model replay:FILE"
        )
    return None
