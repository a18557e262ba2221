"""Token sizes of the study-shaped conditions for every suite task, beside the PTXBench study's prompt tags.

Run from the repository root (no GPU, no network):

    python docs/validation/condition-tokens.py [--study-repo GIT_DIR] > docs/validation/DATE-condition-tokens.txt

For each task: the static knowledge block of ``study-arch-params``, ``study-knowledge`` and
``study-knowledge+pattern`` (cl100k_base tokens, what ``build_static_context`` puts in the system prompt; the
study's counts are of its documents alone, the same scope), the pattern chosen, and the whole first request
(system prompt + task prompt with the ABI header). The study's published sizes come from
``ptxbench-prompt-tags.toml``; with ``--study-repo`` (a clone or bare git directory of zhang677/PTXBench)
its documents are also re-counted with cl100k_base, so both sides are measured with one tokenizer.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from ptxrag.agent_graph.conditions import load_condition
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context
from ptxrag.agent_graph.prompts import system_prompt, task_prompt
from ptxrag.agent_graph.tokens import TOKENIZER, count_tokens
from ptxrag.tasks import list_tasks

CONDITIONS = ("study-arch-params", "study-knowledge", "study-knowledge+pattern")
HERE = Path(__file__).resolve().parent


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _study_files(tag: str, hub: dict[str, list[str]]) -> list[str]:
    """The documents of a study tag (tags may include other tags), or the tag itself when it is a file."""
    if tag not in hub:
        return [tag]
    out: list[str] = []
    for item in hub[tag]:
        out += _study_files(item, hub)
    return out


def study_rows(data: dict, repo: Path | None) -> list[str]:
    lines = [
        f"PTXBench prompt tags ({data['source']}); published tokens: {data['tokenizer']}",
        "| ptxrag condition | ptxrag pattern | study tag | published tokens | cl100k_base recount | what |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    hub: dict[str, list[str]] = {}
    if repo is not None:
        hub = json.loads(_git(repo, "show", f"{data['commit']}:{data['hub']}"))
    for t in data["tag"]:
        recount = "-"
        if repo is not None:
            files = _study_files(t["tag"], hub)
            texts = [_git(repo, "show", f"{data['commit']}:{data['docs_root']}/{f}") for f in files]
            recount = str(sum(count_tokens(x) for x in texts))
        lines.append(
            f"| {t['condition']} | {t.get('pattern', '-')} | {t['tag']} | {t['tokens']} | {recount} | {t['what']} |"
        )
    if repo is not None:
        lines += [
            "",
            "PTXBench documents of those tags, each recounted with cl100k_base",
            "| document | tokens |",
        ]
        lines.append("| --- | --- |")
        files: list[str] = []
        for t in data["tag"]:
            files += [f for f in _study_files(t["tag"], hub) if f not in files]
        for f in files:
            text = _git(repo, "show", f"{data['commit']}:{data['docs_root']}/{f}")
            lines.append(f"| {f} | {count_tokens(text)} |")
    return lines


def task_rows() -> list[str]:
    pack = CorpusKnowledge()
    conds = [load_condition(c) for c in CONDITIONS]
    head = " | ".join(f"{c.name} static" for c in conds)
    lines = [
        f"ptxrag, per suite task ({TOKENIZER} tokens): static knowledge block, and the whole first request "
        "(system + task prompt) of study-knowledge+pattern",
        f"| task | arch | {head} | pattern chosen | first request | left out |",
        "| --- | --- | " + " | ".join("---" for _ in conds) + " | --- | --- | --- |",
    ]
    for task in list_tasks():
        blocks = [build_static_context(c, task, pack) for c in conds]
        sizes = [str(b.tokens if b else 0) for b in blocks]
        last = blocks[-1]
        pattern = next(
            (s.section_number for s in (last.sections if last else []) if s.source == "patterns"), "none"
        )
        first = count_tokens(system_prompt(last)) + count_tokens(task_prompt(task, None))
        left = sum(1 for b in blocks if b for n in b.notes if n.startswith("left out"))
        lines.append(
            f"| {task.id} | {task.arch} | " + " | ".join(sizes) + f" | {pattern} | {first} | {left} |"
        )
    return lines


def layer_rows() -> list[str]:
    """Where the tokens of study-knowledge+pattern go, per layer, for each distinct split over the suite."""
    cond = load_condition(CONDITIONS[-1])
    layers = list(cond.static)
    lines = [
        f"ptxrag, {cond.name} per layer ({TOKENIZER} tokens of each document as rendered in the prompt, heading included)",
        "| tasks | " + " | ".join(layers) + " |",
        "| --- | " + " | ".join("---" for _ in layers) + " |",
    ]
    splits: dict[tuple[int, ...], list[str]] = {}
    for task in list_tasks():
        block = build_static_context(cond, task, CorpusKnowledge())
        sections = block.sections if block else []
        key = tuple(sum(s.tokens for s in sections if s.source == layer) for layer in layers)
        splits.setdefault(key, []).append(task.id)
    for key, tasks in splits.items():
        lines.append(f"| {', '.join(tasks)} | " + " | ".join(str(n) for n in key) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study-repo", type=Path, default=None, help="git directory of zhang677/PTXBench")
    args = ap.parse_args()
    data = tomllib.loads((HERE / "ptxbench-prompt-tags.toml").read_text())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out = [
        f"# study-shaped condition sizes, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, ptxrag commit {commit or '?'}",
        "# produced by docs/validation/condition-tokens.py" + (" --study-repo" if args.study_repo else ""),
        "",
        *task_rows(),
        "",
        *layer_rows(),
        "",
        *study_rows(data, args.study_repo),
    ]
    print("\n".join(out))


if __name__ == "__main__":
    main()
