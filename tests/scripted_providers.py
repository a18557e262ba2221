"""Loopback HTTP servers that play a provider turn by turn, in the real wire formats: Anthropic Messages
(``POST /v1/messages``) and OpenAI Chat Completions (``POST /v1/chat/completions``). The real SDKs (through
LangChain's clients) talk to them; every request body is kept for the test to inspect."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One scripted answer: reply text and how it stopped (``end`` or ``cut``), or an error status."""

    text: str = ""
    stop: str = "end"
    status: int = 200
    error: str = ""


def _anthropic(turn: Turn, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": turn.text}],
        "stop_reason": "max_tokens" if turn.stop == "cut" else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 100 + n, "output_tokens": 10, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0},
    }  # fmt: skip


def _openai(turn: Turn, n: int) -> dict[str, Any]:
    return {
        "id": f"c{n}", "object": "chat.completion", "created": 0, "model": "qwen",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": turn.text},
                     "finish_reason": "length" if turn.stop == "cut" else "stop"}],
        "usage": {"prompt_tokens": 100 + n, "completion_tokens": 10, "total_tokens": 110 + n},
    }  # fmt: skip


class ScriptedProvider:
    """Answers the n-th request with the n-th turn (the last one repeats). ``refuse(body)`` may return an
    error message to answer 400 with (as a server does for a parameter it does not accept)."""

    def __init__(
        self, kind: str, turns: list[Turn], refuse: Callable[[dict[str, Any]], str | None] | None = None
    ) -> None:
        assert kind in ("anthropic", "openai")
        self.kind, self.turns, self.refuse = kind, list(turns), refuse
        self.requests: list[dict[str, Any]] = []
        self.answered = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(n))
                outer.requests.append({"path": self.path, "json": body})
                why = outer.refuse(body) if outer.refuse else None
                if why:
                    status, payload = 400, {"error": {"type": "invalid_request_error", "message": why}}
                else:
                    turn = outer.turns[min(outer.answered, len(outer.turns) - 1)]
                    outer.answered += 1
                    if turn.status != 200:
                        status, payload = turn.status, {"error": {"type": "api_error", "message": turn.error}}
                    else:
                        fmt = _anthropic if outer.kind == "anthropic" else _openai
                        status, payload = 200, fmt(turn, outer.answered)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def sent_texts(self, i: int) -> list[tuple[str, str]]:
        """(role, text) of every message of request ``i``, the system prompt first."""
        body = self.requests[i]["json"]
        out: list[tuple[str, str]] = []

        def text(content: Any) -> str:
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content)

        if self.kind == "anthropic" and body.get("system"):
            out.append(("system", text(body["system"])))
        out += [(m["role"], text(m["content"])) for m in body["messages"]]
        return out
