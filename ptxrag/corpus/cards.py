"""Hardware cards: one TOML file per GPU in ``hardware/``, every number with the source it comes from."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .files import CorpusError, package_dir

#: tensor-core rates a card may list (TFLOP/s dense, int8 in TOPS)
TENSOR_DTYPES = ("fp64", "tf32", "bf16", "fp16", "fp8", "int8")
CUDA_CORE_DTYPES = ("fp32", "fp64")


class Sourced(BaseModel):
    """A number and the key (into the card's ``sources``) of where it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    source: str
    note: str = ""

    @property
    def measured(self) -> bool:
        return self.source.startswith("measured")


class HardwareCard(BaseModel):
    """Parameters an agent needs to size kernels for one GPU. Units are in the field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    title: str
    aliases: tuple[str, ...] = ()
    arch: str = Field(description="target to build for, e.g. sm_90a")
    compute_capability: str
    gencode: str = Field(description="the nvcc flag that builds for `arch`")
    sources: dict[str, str] = Field(
        description="source key -> citation; keys starting 'measured' are measurements"
    )
    sm_count: Sourced
    boost_clock_mhz: Sourced
    tensor_clock_mhz: Sourced | None = None
    memory_gb: Sourced
    memory_bandwidth_tb_per_s: Sourced
    l2_cache_mb: Sourced | None = None
    smem_per_sm_kib: Sourced
    smem_per_block_max_kib: Sourced
    registers_per_sm: Sourced
    registers_per_block_max: Sourced
    registers_per_thread_max: Sourced
    threads_per_sm_max: Sourced
    threads_per_block_max: Sourced
    blocks_per_sm_max: Sourced
    cluster_size_portable_max: Sourced
    cluster_size_nonportable_max: Sourced
    tensor_dense_tflops: dict[str, Sourced] = Field(
        description="dtype -> dense tensor-core TFLOP/s (int8: TOPS)"
    )
    cuda_core_tflops: dict[str, Sourced] = Field(description="dtype -> non-tensor (CUDA core) TFLOP/s")
    measured: dict[str, Sourced] = Field(default_factory=dict, description="readings on a real device")
    notes: tuple[str, ...] = ()
    path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _check(self) -> HardwareCard:
        for key, val in self._all_values():
            if val.source not in self.sources:
                raise ValueError(
                    f"{key}: source {val.source!r} is not one of [sources] {sorted(self.sources)}"
                )
        for key, val in self.measured.items():
            if not val.measured:
                raise ValueError(f"measured.{key}: its source key must start with 'measured'")
        bad = set(self.tensor_dense_tflops) - set(TENSOR_DTYPES) | set(self.cuda_core_tflops) - set(
            CUDA_CORE_DTYPES
        )
        if bad:
            raise ValueError(
                f"unknown dtype keys {sorted(bad)}; tensor: {TENSOR_DTYPES}, cuda core: {CUDA_CORE_DTYPES}"
            )
        return self

    def _all_values(self) -> list[tuple[str, Sourced]]:
        out: list[tuple[str, Sourced]] = []
        for name in type(self).model_fields:
            v = getattr(self, name)
            if isinstance(v, Sourced):
                out.append((name, v))
            elif isinstance(v, dict):
                out += [(f"{name}.{k}", x) for k, x in v.items() if isinstance(x, Sourced)]
        return out


def _cards_dir() -> Path:
    return package_dir() / "hardware"


def load_card(path: Path) -> HardwareCard:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise CorpusError(f"{path}: not valid TOML: {e}") from e
    try:
        card = HardwareCard.model_validate({**data, "path": path})
    except ValidationError as e:
        lines = [f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()]
        raise CorpusError(f"{path}: invalid hardware card:\n  " + "\n  ".join(lines)) from None
    if card.name != path.stem:
        raise CorpusError(f"{path}: name {card.name!r} must equal the file name {path.stem!r}")
    return card


@lru_cache(maxsize=1)
def _all_cards() -> dict[str, HardwareCard]:
    return {p.stem: load_card(p) for p in sorted(_cards_dir().glob("*.toml"))}


def list_hardware() -> list[str]:
    """Names of the hardware cards, e.g. ['b200', 'h100-sxm', 'h200']."""
    return sorted(_all_cards())


def hardware_card(name: str) -> HardwareCard:
    """The card named ``name`` (or one of its aliases), case-insensitive."""
    key = name.strip().lower()
    cards = _all_cards()
    if key in cards:
        return cards[key]
    for card in cards.values():
        if key in (a.lower() for a in card.aliases):
            return card
    known = ", ".join(f"{c.name} ({', '.join(c.aliases)})" if c.aliases else c.name for c in cards.values())
    raise CorpusError(f"no hardware card {name!r}; known cards: {known or '(none)'}")


def _fmt(v: Sourced, unit: str = "") -> str:
    num = f"{v.value:g}" if v.value < 1e5 else f"{int(v.value)}"
    tag = "measured" if v.measured else v.source
    return f"{num}{unit} [{tag}]"


def render_card(card: HardwareCard, *, full_sources: bool = False) -> str:
    """Compact text for prompts: one line per topic, each number tagged with its source key.

    Sources are listed by their short title (the citation up to its first colon); ``full_sources`` gives the
    whole citation text.
    """
    lines = [
        f"{card.title} (hw-{card.name}): compute capability {card.compute_capability}, target {card.arch}, "
        f"build with {card.gencode}",
        f"SMs {_fmt(card.sm_count)}; boost clock {_fmt(card.boost_clock_mhz, ' MHz')}"
        + (f"; tensor clock {_fmt(card.tensor_clock_mhz, ' MHz')}" if card.tensor_clock_mhz else ""),
        f"memory {_fmt(card.memory_gb, ' GB')} at {_fmt(card.memory_bandwidth_tb_per_s, ' TB/s')}; L2 "
        + (_fmt(card.l2_cache_mb, " MB") if card.l2_cache_mb else "not listed"),
        f"shared memory {_fmt(card.smem_per_sm_kib, ' KiB')} per SM, at most {_fmt(card.smem_per_block_max_kib, ' KiB')} "
        "per block (above 48 KiB only as dynamic shared memory after cudaFuncSetAttribute)",
        f"registers {_fmt(card.registers_per_sm)} per SM, {_fmt(card.registers_per_block_max)} per block, "
        f"{_fmt(card.registers_per_thread_max)} per thread",
        f"threads {_fmt(card.threads_per_sm_max)} per SM, {_fmt(card.threads_per_block_max)} per block; "
        f"blocks {_fmt(card.blocks_per_sm_max)} per SM",
        f"cluster size at most {_fmt(card.cluster_size_portable_max)} CTAs (portable), "
        f"{_fmt(card.cluster_size_nonportable_max)} with the non-portable opt-in",
        "tensor cores, dense TFLOP/s (int8: TOPS): "
        + ", ".join(f"{k} {_fmt(v)}" for k, v in card.tensor_dense_tflops.items()),
        "CUDA cores, TFLOP/s: " + ", ".join(f"{k} {_fmt(v)}" for k, v in card.cuda_core_tflops.items()),
    ]
    if card.measured:
        lines.append(
            "measured on a real device: " + "; ".join(f"{k} {_fmt(v)}" for k, v in card.measured.items())
        )
    lines += [f"note: {n}" for n in card.notes]
    lines += [f"[{k}] {v if full_sources else v.split(': ', 1)[0]}" for k, v in sorted(card.sources.items())]
    return "\n".join(lines)
