"""`preft.rl`: PreFT's RL training as a suite, one RL run per cell (the runs of `preft.rl_parity`).

A sample is a cell `r{rank}/seed{NNN}` (`harness.claims.model.cell_id`; the settings are the LoRA
ranks of the `ranks` option). Solving it trains one GRPO-style RL run (`preft.rl.train_rl`) of a
LoRA adapter at that rank and seed in the arm `solver`: `preft` (prefill-only: generated positions
carry no adapter) or `all-token`. Both arms at a seed share the adapter's init and the prompt
order, so the claim compares them paired by seed. The transcript is the run (its training settings
and its mean sampled reward at every step); the scorer recomputes from it, without training:
`final_reward` (mean over the last quarter of steps: the metric the claim's conditions read),
`first_reward`, `gain` (final - first: the learn gate reads all-token's) and `wall_s` (the
training's wall time). No model role is called: the policy is the embedded model in this process.

Options: `solver`, `ranks`, `seeds`, `first_seed` (a claim check's later look runs only its new
seeds), and the training settings (`model`, `steps`, `prompts`, `group`, `lr`, `temperature`,
`std_norm`), whose defaults are the settings `preft.rl_parity` is judged at: its criterion hash
covers them (`Claim.protocol`, built from these defaults in `rl_check.py`), so changing a default
is an amendment. `model=random-tiny` is a 2-layer random Llama with a digit tokenizer: it trains in
milliseconds and cannot learn the task -- a check of the plumbing for tests, refused by
leaderboards.

torch is imported only inside `solve`: the suite, its options and its scorer load without it.
One cell is one RL training (40-80 s on the CPU for the embedded model at the defaults); a claim
check runs one cell at a time per process, and in a process trainings never overlap (a lock:
`train_rl` seeds torch's global generator).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import asdict
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, JsonValue, field_validator

from harness.claims.model import Scalar, cell_id
from harness.records import Metric, MetricSpec, SampleRecord
from harness.runner import package_versions
from harness.stats import mean_metric
from harness.cell_suite import CellSuite
from harness.suite import Sample, SuiteOptions

ARMS = ("preft", "all-token")
EMBEDDED: Literal["smollm2-135m-instruct"] = "smollm2-135m-instruct"
RANDOM_TINY = "random-tiny"
# The options that are training settings: the claim's protocol holds them.
TRAINING = ("model", "steps", "prompts", "group", "lr", "temperature", "std_norm")
_TRAIN_LOCK = threading.Lock()


class RlOptions(SuiteOptions):
    solver: Literal["preft", "all-token"] = Field("preft", description="the arm: preft (prefill-only LoRA) or all-token")
    ranks: tuple[int, ...] = Field((2, 8), min_length=1, description="LoRA ranks, comma-separated: the settings r{rank}")
    seeds: int = Field(4, ge=1, le=500, description="seeds per rank (samples = ranks x seeds)")
    first_seed: int = Field(0, ge=0, le=100_000, description="the first seed (a claim check's later look runs only its new seeds)")
    model: Literal["smollm2-135m-instruct", "random-tiny"] = Field(
        EMBEDDED, description="the policy: the embedded SmolLM2-135M-Instruct, or random-tiny (a random 2-layer "
        "Llama that cannot learn the task: for tests of the plumbing, refused by leaderboards)")
    steps: int = Field(30, ge=1, le=100_000, description="RL steps (one on-policy update each)")
    prompts: int = Field(4, ge=1, le=450, description="prompts per step")
    group: int = Field(6, ge=2, le=256, description="completions sampled per prompt (the GRPO group)")
    lr: float = Field(1e-3, gt=0.0, le=1.0, description="AdamW learning rate of the LoRA weights")
    temperature: float = Field(0.7, gt=0.0, le=10.0, description="sampling temperature")
    std_norm: bool = Field(False, description="divide advantages by the group's standard deviation")

    @field_validator("ranks", mode="before")
    @classmethod
    def _ranks(cls, value: Any) -> Any:
        if isinstance(value, str):  # `--suite-option ranks=2,8`
            try:
                return tuple(int(x) for x in value.split(",") if x.strip())
            except ValueError:
                raise ValueError(f"ranks {value!r}: write comma-separated integers, e.g. 2,8") from None
        return value

    @field_validator("ranks")
    @classmethod
    def _positive_distinct(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(r < 1 for r in value) or len(set(value)) != len(value):
            raise ValueError(f"ranks {value}: must be distinct positive integers")
        return value


def training(options: RlOptions) -> dict[str, Scalar]:
    """The options that are training settings (what the claim's protocol registers)."""
    return {k: getattr(options, k) for k in TRAINING}




class RlCell(BaseModel):
    """One cell's transcript: the RL run as trained."""

    solver: str
    rank: int
    seed: int
    model: str
    config: dict[str, JsonValue] = Field(description="preft.rl.RlConfig as trained")
    rewards: list[float] = Field(description="mean sampled reward at each step")
    seconds: float = Field(description="the training's wall time")
    versions: dict[str, str] = Field(default_factory=dict)


def final_reward(rewards: list[float]) -> float:
    """The run's final reward: its mean sampled reward over the last quarter of steps."""
    tail = max(1, len(rewards) // 4)
    return sum(rewards[-tail:]) / tail


def cell_scores(rewards: list[float], seconds: float) -> dict[str, float | None]:
    """The scores of one RL run, from its reward curve alone."""
    if not rewards:
        return {"final_reward": None, "first_reward": None, "gain": None, "wall_s": round(seconds, 3)}
    final = final_reward(rewards)
    return {"final_reward": final, "first_reward": rewards[0], "gain": final - rewards[0], "wall_s": round(seconds, 3)}


class DigitTokenizer:
    """The addition task's characters as token ids, one per character (for `random-tiny` only)."""

    VOCAB = "0123456789+=\n"

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [self.VOCAB.index(c) for c in text]}


@functools.cache
def random_tiny() -> tuple[Any, DigitTokenizer]:
    """A random 2-layer Llama over the digit vocabulary (fixed init): trains in milliseconds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=len(DigitTokenizer.VOCAB), max_position_embeddings=64,
                         rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=0, eos_token_id=12)
    return LlamaForCausalLM(config).float().eval(), DigitTokenizer()


def load_policy(model: str) -> tuple[Any, Any]:
    """(model, tokenizer) of the policy's base, loaded once per process."""
    if model == RANDOM_TINY:
        return random_tiny()
    from harness.providers.embedded import load_model

    return load_model()


class RlSuite(CellSuite[RlCell]):
    name = "preft.rl"
    version = "1.0.0"
    headline_metric = "final_reward"
    description = ("PreFT under RL: each sample r{rank}/seed{NNN} trains one GRPO-style RL run of a LoRA adapter on "
                   "few-shot two-digit addition (reward 1 iff the sampled sum is right), prefill-only (solver=preft) or "
                   "all-token; scores final_reward (mean reward over the last quarter of steps), gain over the first "
                   "step, wall_s. The runs of the claim preft.rl_parity (`harness claims check preft.rl_parity`); "
                   "defaults are the training settings its criterion is judged at.")
    Options: ClassVar[type[SuiteOptions]] = RlOptions
    transcript_type = RlCell
    built_in_code = "prompts"
    scorer_name = "reward"
    scorer_description = (
        "final_reward (mean sampled reward over the last quarter of steps), first_reward, gain = final - first, "
        "wall_s; from the recorded reward curve"
    )
    label_options: ClassVar[tuple[str, ...]] = ("solver",)
    metric_specs: ClassVar[Mapping[str, MetricSpec]] = {
        "final_reward": MetricSpec(unit="fraction", description="mean reward over the last quarter of steps"),
        "wall_s": MetricSpec(direction="lower", unit="s", description="training wall time")}

    @classmethod
    def leaderboard_refusal(cls, options: dict[str, Any]) -> str | None:
        if options.get("model") == RANDOM_TINY:
            return "model=random-tiny is a random 2-layer model for tests of the plumbing, not a result; rerun without it"
        return None

    @property
    def opts(self) -> RlOptions:
        assert isinstance(self.options, RlOptions)
        return self.options

    def cells(self) -> list[Sample]:
        o = self.opts
        return [Sample(id=cell_id(f"r{rank}", seed), data={"rank": rank, "seed": seed})
                for rank in o.ranks for seed in range(o.first_seed, o.first_seed + o.seeds)]

    def solve_cell(self, sample: Sample) -> RlCell:
        return self.train_cell(int(sample.data["rank"]), int(sample.data["seed"]))

    def train_cell(self, rank: int, seed: int) -> RlCell:
        from preft.rl import RlConfig, train_rl

        o = self.opts
        cfg = RlConfig(mode=o.solver, rank=rank, seed=seed, steps=o.steps, prompts=o.prompts, group=o.group, lr=o.lr,
                       temperature=o.temperature, std_norm=o.std_norm)
        with _TRAIN_LOCK:
            model, tokenizer = load_policy(o.model)
            result = train_rl(cfg, model, tokenizer)
        return RlCell(solver=o.solver, rank=rank, seed=seed, model=o.model, config=asdict(result.config),
                      rewards=result.rewards, seconds=result.seconds, versions=package_versions(("torch", "transformers")))

    def score_cell(self, cell: RlCell) -> dict[str, float | None]:
        return cell_scores(cell.rewards, cell.seconds)

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Mean over seeds with its Student-t interval: final reward over all cells, and each score per rank."""
        def values(name: str, rank: int | None = None) -> list[float]:
            cells = [r for r in records if rank is None or r.sample_id.startswith(f"r{rank}/")]
            return [float(v) for v in (r.scores.get(name) for r in cells) if isinstance(v, (int, float))]

        out = {"final_reward": mean_metric(values("final_reward"))}
        for rank in self.opts.ranks:
            for name in ("final_reward", "gain", "wall_s"):
                out[f"{name}@r{rank}"] = mean_metric(values(name, rank))
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {"seeds": len({r.sample_id.split("/")[-1] for r in records})}
