"""Model specs, credentials errors, retries and prompt caching, against real LangChain clients talking to
a local HTTP server that plays the provider (loopback only)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from ptxrag.agent_graph import ModelCallError, ModelConfigError, RetryPolicy, is_transient, make_chat_model
from ptxrag.agent_graph.models import usage_of

FAST = RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.02)


class FakeProvider:
    """A loopback server: answers POSTs with ``fail`` error statuses first, then ``body``; keeps requests."""

    def __init__(self, body: dict, fail: list[int] | None = None, fail_headers: dict | None = None) -> None:
        self.body, self.fail, self.requests = body, list(fail or []), []
        self.fail_headers = dict(fail_headers or {})
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("content-length", 0))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(self.rfile.read(n))}
                )
                status, payload = (
                    (outer.fail.pop(0), {"error": {"type": "overloaded_error", "message": "busy"}})
                    if outer.fail
                    else (200, outer.body)
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in outer.fail_headers.items() if status != 200 else ():
                    self.send_header(k, v)
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


OPENAI_OK = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "qwen",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "```cuda\n// hi\n```"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
}  # fmt: skip
ANTHROPIC_OK = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 2, "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 0},
}  # fmt: skip


def test_missing_anthropic_key_names_the_variable_and_the_offline_way(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError) as e:
        make_chat_model("anthropic:claude-sonnet-4-5")
    assert "ANTHROPIC_API_KEY" in str(e.value) and "replay:" in str(e.value)


@pytest.mark.parametrize("spec", ["claude", "gpt:4", "anthropic:", "replay:/no/such/file.toml"])
def test_bad_specs_are_clear_errors(spec):
    with pytest.raises(ModelConfigError):
        make_chat_model(spec)


def test_openai_without_key_or_url_is_an_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        make_chat_model("openai:gpt-4o")


def test_openai_compatible_server_retries_5xx_then_answers(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    srv = FakeProvider(OPENAI_OK, fail=[503, 429])
    try:
        m = make_chat_model(f"openai:qwen2.5-coder:32b@{srv.url}/v1", retry=FAST)
        reply = m.invoke([SystemMessage("sys"), HumanMessage("write a kernel")])
    finally:
        srv.close()
    assert m.provider == "openai" and "```cuda" in reply.content
    assert len(srv.requests) == 3 and srv.requests[-1]["json"]["model"] == "qwen2.5-coder:32b"
    assert usage_of(reply).input_tokens == 11


def test_retries_give_up_with_a_model_call_error(monkeypatch):
    srv = FakeProvider(OPENAI_OK, fail=[500, 500, 500, 500])
    try:
        m = make_chat_model(f"openai:m@{srv.url}/v1", retry=FAST)
        with pytest.raises(ModelCallError, match="still failing after retries"):
            m.invoke([HumanMessage("x")])
    finally:
        srv.close()
    assert len(srv.requests) == FAST.attempts


def test_client_errors_are_not_retried():
    srv = FakeProvider(OPENAI_OK, fail=[400])
    try:
        m = make_chat_model(f"openai:m@{srv.url}/v1", retry=FAST)
        with pytest.raises(ModelCallError):
            m.invoke([HumanMessage("x")])
    finally:
        srv.close()
    assert len(srv.requests) == 1


def test_anthropic_marks_the_static_system_prompt_for_caching(monkeypatch):
    srv = FakeProvider(ANTHROPIC_OK, fail=[529])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    try:
        m = make_chat_model("anthropic:claude-test", retry=FAST)
        reply = m.invoke([SystemMessage("static knowledge " * 50), HumanMessage("round 1")])
    finally:
        srv.close()
    body = srv.requests[-1]["json"]
    assert len(srv.requests) == 2  # 529 overloaded was retried
    assert body["model"] == "claude-test" and body["max_tokens"] > 0
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["text"].startswith("static knowledge")
    headers = {k.lower(): v for k, v in srv.requests[-1]["headers"].items()}
    assert "test-key" in (headers.get("x-api-key", "") + headers.get("authorization", "")), headers
    assert usage_of(reply).cache_read_tokens == 1500


def test_is_transient():
    class E(Exception):
        def __init__(self, code):
            self.status_code = code

    assert all(is_transient(E(c)) for c in (408, 409, 429, 500, 503, 529))
    assert not any(is_transient(E(c)) for c in (400, 401, 404))
    assert not is_transient(ValueError("x"))


PATIENT = RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=30.0)


def _slept_for(status: int, headers: dict, policy: RetryPolicy = PATIENT) -> list[float]:
    """Drive the real OpenAI SDK against a loopback server that fails once with ``status`` and ``headers``;
    return the waits the retry layer asked for (recorded, not slept)."""
    srv = FakeProvider(OPENAI_OK, fail=[status], fail_headers=headers)
    waits: list[float] = []
    try:
        m = make_chat_model(f"openai:m@{srv.url}/v1", retry=policy)
        m.sleep = waits.append
        m.invoke([HumanMessage("x")])
    finally:
        srv.close()
    assert len(srv.requests) == 2
    return waits


def test_retry_after_seconds_is_honoured_on_openai_429(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _slept_for(429, {"retry-after": "7"}) == [7.0]


def test_retry_after_ms_wins_and_a_huge_retry_after_is_capped(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _slept_for(429, {"retry-after-ms": "1500", "retry-after": "9"}) == [1.5]
    assert _slept_for(503, {"retry-after": "86400"}) == [PATIENT.max_wait_s]


def test_garbage_retry_after_falls_back_to_backoff(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (wait,) = _slept_for(429, {"retry-after": "soon"})
    assert 0 <= wait <= 0.03  # exponential backoff from 0.01 s with 0.01 s jitter, not a parsed value


def test_retry_after_is_honoured_on_anthropic_529(monkeypatch):
    """The real Anthropic SDK, through ANTHROPIC_BASE_URL, on an overloaded (529) reply with Retry-After."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    srv = FakeProvider(ANTHROPIC_OK, fail=[529], fail_headers={"retry-after": "4"})
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    waits: list[float] = []
    try:
        m = make_chat_model("anthropic:claude-test", retry=PATIENT)
        m.sleep = waits.append
        reply = m.invoke([HumanMessage("x")])
    finally:
        srv.close()
    assert waits == [4.0] and len(srv.requests) == 2 and srv.requests[-1]["path"].endswith("/v1/messages")
    assert reply.content == "ok"


def test_retry_after_http_date():
    from ptxrag.agent_graph.models import retry_after_s

    class Resp:
        headers = {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}

    class E(Exception):
        response = Resp()

    import email.utils

    t = email.utils.parsedate_to_datetime(Resp.headers["retry-after"]).timestamp()
    assert retry_after_s(E(), now=t - 12) == pytest.approx(12.0)
    assert retry_after_s(E(), now=t + 5) == 0.0  # a date in the past: retry now
    assert retry_after_s(Exception()) is None
