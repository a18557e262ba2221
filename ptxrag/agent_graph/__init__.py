"""The agent: a LangGraph state machine that gathers knowledge, asks a model for a kernel, evaluates it
in the sandbox and turns the verdict into the next prompt, for up to ``max_rounds`` rounds.

    from ptxrag import run_task
    result = run_task("warp-reduce-redux", model="anthropic:claude-sonnet-4-5", condition="rag+templates")

Conditions (what knowledge the model gets) are TOML data: ``builtin_conditions()``, ``load_condition``.
"""

from ptxrag.sandbox.protocol import Evaluator

from .conditions import Condition, ConditionError, RetrievalSettings, builtin_conditions, load_condition
from .episode import AgentEvent, EpisodeMismatch, EpisodeResult, make_sandbox, run_task
from .extract import Extraction, NoCodeFound, extract_code
from .graph import build_graph, sqlite_checkpointer
from .knowledge import CorpusKnowledge, KnowledgeItem, KnowledgeProvider, KnowledgeUnavailable
from .models import ChatModel, ModelCallError, ModelConfigError, RetryPolicy, is_transient, make_chat_model
from .nodes import AgentDeps, SandboxError
from .replay import ReplayChatModel, ReplayEntry
from .retrieval import DocsRetriever, RetrievalUnavailable, default_retriever
from .state import AgentState, ContextBlock, RetrievalQuery, RoundRecord, ShownSection, TokenUsage
from .tokens import TOKENIZER, count_tokens

__all__ = [
    "TOKENIZER",
    "AgentDeps",
    "AgentEvent",
    "AgentState",
    "ChatModel",
    "Condition",
    "ConditionError",
    "ContextBlock",
    "CorpusKnowledge",
    "DocsRetriever",
    "EpisodeMismatch",
    "EpisodeResult",
    "Evaluator",
    "Extraction",
    "KnowledgeItem",
    "KnowledgeProvider",
    "KnowledgeUnavailable",
    "ModelCallError",
    "ModelConfigError",
    "NoCodeFound",
    "ReplayChatModel",
    "ReplayEntry",
    "RetrievalQuery",
    "RetrievalSettings",
    "RetrievalUnavailable",
    "RetryPolicy",
    "RoundRecord",
    "SandboxError",
    "ShownSection",
    "TokenUsage",
    "build_graph",
    "builtin_conditions",
    "count_tokens",
    "default_retriever",
    "extract_code",
    "is_transient",
    "load_condition",
    "make_chat_model",
    "make_sandbox",
    "run_task",
    "sqlite_checkpointer",
]
