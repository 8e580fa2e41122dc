"""The closed min-max loop (`harness adv0 train`): each round the attacker learns against the
current defender, the defender learns against the round's scenarios, and both are evaluated on
normal traffic, the current attacker and the held-out conditions.

A round r:
(a) attacker: ADV-0 proposes K distinct candidates (+ reference draws) per training context, all
    rolled out against the current defender on the context's seed, then pairs, DPO, KL stop (as
    `train/attacker.py`'s `iterate`); any option of `options.py` runs the same way (SAGE-like on its open-loop
    surrogate, without defender episodes; the fixed options do not train); the closed-loop attacker
    (`--attacker closed_loop`, `closed_loop_dpo.ClosedLoopAdv0`) the same way on trajectories: its
    draws are `ClosedLoopDraw`s, played through `ClosedLoopWorld` by every defender;
(b) defender: the round's scenarios are the updated attacker's draws on fresh seeds; the IDM/MOBIL
    planner is tuned by CEM on them mixed with as many normal-traffic episodes
    (`planner.tune_cem`), the DQN is fine-tuned with an adversarial mixing ratio (`dqn.finetune`),
    the LLM driver drives them and keeps the reflections it writes after its crashes;
(c) evaluation on seeds that never train: normal traffic, the current attacker's draws, and the
    held-out conditions (each `HELD_OUT_FAMILIES` map under a fixed evaluation adversary, and the
    training map under held-out manoeuvres; the toy world: held-out manoeuvres). The held-out
    adversary is a uniform draw fixed by the seed, the same for every run, so defenders trained
    against different attackers meet the same test. Rows are `EvalRow`s: `metrics.EpisodeScores`
    plus the round, the split and the seed (`held_out` is True for every held-out row, the
    held-out manoeuvres on the training map included).

State (`loop_state.py`): `<run-dir>/adv0-train/<run_id>/config.json` and a folder per complete round,
`rounds/0003/` with `state.json` (`RoundState`: attacker and defender state, reports, eval rows,
CPU-seconds), `attacker.json` (the attacker alone: what suite `adv0`'s `attacker_state` reads),
the defender's files (`dqn.zip` + `dqn_replay.pkl`, or `memory.json`) and `done` last. A round is
written into a hidden temporary folder that is renamed into place after `done` is written, so a
round folder either is complete or does not exist; `--resume` continues after the last complete
round and deletes leftovers of a round in flight. Every round draws its randomness from
(seed, round) alone, so a resumed run is the run that was never interrupted (the DQN's replay
buffer is saved with it; ADV-0 replays one round of pairs, its default, so none is lost).

May import: numpy, pydantic, `harness`, `agents` and `environments.adv0`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel

from environments.adv0.policies.attacker import AttackerConfig, ReferencePrior, reference_prior
from environments.adv0.metrics import episode_scores
from environments.adv0.sim.scenario import (
    FACTORS, HELD_OUT_FAMILIES, HELD_OUT_MANOEUVRES, TRAIN_MANOEUVRES, EpisodeResult, IdmParams, ScenarioParams,
)
from environments.adv0.sim.worlds import context_of, world_for
from environments.adv0.train.attacker import Adv0Attacker
# Re-exported (`X as X`, explicit for type checkers): the loop's one front door.
from environments.adv0.train.loop_state import (
    ABLATIONS as ABLATIONS,
    ATTACKERS as ATTACKERS,
    CLOSED_LOOP_ABLATIONS as CLOSED_LOOP_ABLATIONS,
    DEFENDERS as DEFENDERS,
    LOOP_FAMILIES as LOOP_FAMILIES,
    TRAIN_DIR as TRAIN_DIR,
    EvalRow as EvalRow,
    LoopConfig as LoopConfig,
    RoundState as RoundState,
    Split as Split,
    clean_partial as clean_partial,
    complete_rounds as complete_rounds,
    load_round as load_round,
    load_rows as load_rows,
    open_run as open_run,
    round_name as round_name,
    run_folder as run_folder,
    save_round as save_round,
    start_run as start_run,
)
from environments.adv0.train.planner import GenerationRecord
from environments.adv0.train.planner import cpu_seconds as cpu_seconds  # re-exported too
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.messages import ChatMessage
    from harness.providers.base import GenerateConfig, ModelOutput

Job = tuple[Any, int]  # (attack, seed): a ScenarioParams, a closed_loop.ClosedLoopDraw, or None (normal traffic)


# ---------------------------------------------------------------- worlds, seeds and contexts
class ClosedLoopWorld:
    """A world whose jobs may carry a closed-loop draw: `start_episode` gives the episode a fresh
    attacker built from the draw (`closed_loop=`), everything else is the wrapped world's. Every
    defender -- the planner's episodes and CEM, the DQN's fine-tuning env and its greedy episodes,
    the LLM driver -- plays through its world's `start_episode`, so this is all they need."""

    def __init__(self, world: Any):
        self.world = world

    def start_episode(self, family: str, seed: int, attack: Any, **kwargs: Any) -> Any:
        from environments.adv0.sim.closed_loop import ClosedLoopDraw

        if isinstance(attack, ClosedLoopDraw):
            return self.world.start_episode(family, seed, None, closed_loop=attack.attacker(), **kwargs)
        return self.world.start_episode(family, seed, attack, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "world":  # not set yet (a copy being rebuilt): no recursion
            raise AttributeError(name)
        return getattr(self.world, name)


def defender_world(cfg: LoopConfig) -> Any:
    """The world a defender plays in: the family's, able to play closed-loop draws when the loop's
    attacker is the closed-loop one."""
    world = world_for(cfg.family)
    return ClosedLoopWorld(world) if cfg.attacker == "closed_loop" else world


def seeds_for(cfg: LoopConfig, round_: int, what: Literal["attack", "defend", "eval", "held_out"], n: int) -> list[int]:
    """Disjoint seed ranges: training seeds change every round, evaluation seeds never do."""
    base = cfg.seed * 10_000_000
    start = {"attack": 1_000_000 + 1_000 * round_, "defend": 5_000_000 + 2_000 * round_,  # defend: scenarios + normal
             "eval": 9_000_000, "held_out": 9_500_000}[what]
    return [base + start + i for i in range(n)]


def held_out_attack(seed: int, manoeuvres: Sequence[str]) -> ScenarioParams:
    """The fixed evaluation adversary of the held-out conditions: a uniform draw over the grid (the
    manoeuvre from `manoeuvres`), a function of the seed alone."""
    rng = np.random.default_rng([seed, 7])
    values = {n: v[int(rng.integers(len(v)))] for n, v in FACTORS.items() if n != "manoeuvre"}
    values["manoeuvre"] = manoeuvres[int(rng.integers(len(manoeuvres)))]
    return ScenarioParams.model_validate(values)


def held_out_jobs(cfg: LoopConfig) -> list[tuple[str, Job]]:
    """(family, job) of every held-out evaluation episode."""
    n = cfg.held_out_episodes
    seeds = seeds_for(cfg, 0, "held_out", n)
    train_man = list(TRAIN_MANOEUVRES) + list(HELD_OUT_MANOEUVRES)
    jobs: list[tuple[str, Job]] = [(cfg.family, (held_out_attack(s, HELD_OUT_MANOEUVRES), s)) for s in seeds]
    if cfg.family == "highway":
        jobs += [(fam, (held_out_attack(s, train_man), s)) for fam in HELD_OUT_FAMILIES for s in seeds]
    return jobs


# ---------------------------------------------------------------- defenders
# What a defender's `update` did in a round (`RoundState.defender_report` holds it dumped).
class IdmReport(BaseModel):
    params: IdmParams  # CEM's result
    generations: list[GenerationRecord]
    cpu_s_per_generation: list[float]


class DqnReport(BaseModel):
    steps: int
    cpu_s: float
    cpu_s_per_1k: float


class LlmReport(BaseModel):
    episodes: int  # the round's scenarios, driven
    crashes: int
    lessons_added: int
    lessons: int  # in the memory now


DefenderReport = IdmReport | DqnReport | LlmReport


# What a defender's `state` saves to restore it from its round folder (`RoundState.defender` holds it dumped).
class IdmState(BaseModel):
    params: IdmParams


class DqnState(BaseModel):
    checkpoint: str  # files in the round folder
    replay: str = ""


class LlmState(BaseModel):
    memory: str  # the reflection memory's file in the round folder
    lessons: int = 0


class IdmDefender:
    """The IDM/MOBIL planner, tuned by CEM each round (starts at the under-cautious default)."""

    name = "idm"

    def __init__(self, cfg: LoopConfig, state: IdmState | None = None, folder: Path | None = None):
        self.cfg, self.world = cfg, defender_world(cfg)
        self.params = state.params if state else IdmParams()

    def run(self, jobs: Sequence[Job], family: str | None = None) -> list[EpisodeResult]:
        return run_planner(self.world, family or self.cfg.family, self.params, list(jobs))

    def update(self, scenarios: Sequence[Job], round_: int, folder: Path) -> IdmReport:
        from environments.adv0.train.planner import tune_cem

        cfg = self.cfg
        runner = lambda params, jobs: run_planner(self.world, cfg.family, params, jobs)  # noqa: E731
        normal = [(None, s) for s in seeds_for(cfg, round_, "defend", 2 * len(scenarios))[len(scenarios):]]
        self.params, gens = tune_cem(runner, list(scenarios) + normal, self.params, cfg.cem_generations,
                                     cfg.cem_population, cfg.cem_elite_frac, seed=cfg.seed * 1000 + round_, normal=0)
        return IdmReport(params=self.params, generations=gens, cpu_s_per_generation=[round(g.cpu_s, 3) for g in gens])

    def state(self, folder: Path) -> IdmState:
        return IdmState(params=self.params)

    def close(self) -> None:
        pass


def run_planner(world: Any, family: str, params: IdmParams, jobs: list[Job]) -> list[EpisodeResult]:
    """Planner episodes: the toy world runs them vectorised (summaries), highway-env one by one."""
    if family == "toy":
        from environments.adv0.sim.toy_sim import ALL_MANOEUVRES

        results: list[EpisodeResult] = world.summary_results(  # world: a module, Any
            [s for _, s in jobs], [a for a, _ in jobs], params, ALL_MANOEUVRES
        )
        return results
    from environments.adv0.train.planner import planner_episode

    return [planner_episode(world, family, params, attack, seed) for attack, seed in jobs]


class DqnLoopDefender:
    """The SB3 DQN: starts from the cached pretraining, fine-tuned each round with `dqn_ratio` of
    its episodes attacked by the round's scenarios."""

    name = "dqn"

    def __init__(self, cfg: LoopConfig, state: DqnState | None = None, folder: Path | None = None):
        from environments.adv0.train import dqn

        if cfg.family != "highway":
            raise HarnessError("--defender dqn needs --family highway (the toy world has no Kinematics observation)")
        self.cfg, self.world, self.dqn = cfg, defender_world(cfg), dqn
        _one_torch_thread()
        if state and folder is not None:
            self.model = dqn.load_checkpoint(folder / state.checkpoint)
            replay = folder / state.replay
            if state.replay and replay.is_file():
                self.model.load_replay_buffer(replay)
        else:
            self.model = dqn.load_checkpoint(cfg.dqn_checkpoint)

    def run(self, jobs: Sequence[Job], family: str | None = None) -> list[EpisodeResult]:
        driver = self.dqn.DqnDefender(self.model)
        return [driver.episode(self.world, family or self.cfg.family, seed, attack) for attack, seed in jobs]

    def update(self, scenarios: Sequence[Job], round_: int, folder: Path) -> DqnReport:
        pool = [a for a, _ in scenarios if a is not None]
        sampler = (lambda rng: pool[int(rng.integers(len(pool)))]) if pool else None
        stats = self.dqn.finetune(self.model, sampler, self.cfg.dqn_steps, adversarial_ratio=self.cfg.dqn_ratio,
                                  family=self.cfg.family, world=self.world, seed=self.cfg.seed * 1000 + round_)
        return DqnReport(steps=stats.steps, cpu_s=stats.cpu_s, cpu_s_per_1k=stats.cpu_s_per_1k)

    def state(self, folder: Path) -> DqnState:
        self.model.save(folder / "dqn.zip")
        self.model.save_replay_buffer(folder / "dqn_replay.pkl")
        return DqnState(checkpoint="dqn.zip", replay="dqn_replay.pkl")

    def close(self) -> None:
        pass


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)  # the machine is shared; more threads only contend (measured in dqn.py's README)


class LlmLoopDefender:
    """The LLM driver (`environments/adv0/driver.py`): its update is the reflection memory it writes while
    driving the round's scenarios; evaluation drives with a copy, so testing never teaches it."""

    name = "llm"
    INTENT = "Drive safely through the traffic: keep moving near the speed limit and never crash."

    def __init__(self, cfg: LoopConfig, state: LlmState | None = None, folder: Path | None = None):
        import asyncio

        from environments.adv0.driver import ReflectionMemory
        from harness.agents_registry import AgentConfig
        from harness.providers import load_model
        from harness.spec import ModelSpec

        self.cfg, self.world = cfg, defender_world(cfg)
        self.memory = ReflectionMemory()
        if state and folder is not None:
            self.memory = ReflectionMemory.model_validate_json((folder / state.memory).read_text(encoding="utf-8"))
        self.model = load_model(ModelSpec.parse(cfg.model))
        self.loop = asyncio.new_event_loop()
        # Constrained, as suite `adv0` drives by default (AgentConfig's own default is free text, which the
        # embedded model often answers with no action and its lessons with an action).
        self.agent_config = AgentConfig(max_steps=10_000, parse_attempts=2, policy_max_tokens=48,
                                        action_format="constrained")

    async def _generate(self, role: str, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        return await self.model.generate(messages, config)

    async def _episode(self, family: str, seed: int, attack: ScenarioParams | None, memory: Any) -> EpisodeResult:
        from environments.adv0.driver import DriverAgent
        from environments.adv0.env import DrivingEnvironment
        from harness.environment import ThreadedEnv

        impl = DrivingEnvironment(lambda: self.world.start_episode(family, seed, attack))
        env = await ThreadedEnv.create(lambda: impl)
        try:
            obs = await env.reset({"family": family, "seed": seed})
            await DriverAgent(memory=memory).run_episode(self._generate, env, self.INTENT, obs, self.agent_config)
        finally:
            await env.close()
        if impl.result is None:
            raise HarnessError(f"LLM driver: episode {family}/{seed} ended without a result")
        return impl.result

    def _drive(self, jobs: Sequence[Job], family: str, memory: Any) -> list[EpisodeResult]:
        return [self.loop.run_until_complete(self._episode(family, s, a, memory)) for a, s in jobs]

    def run(self, jobs: Sequence[Job], family: str | None = None) -> list[EpisodeResult]:
        return self._drive(jobs, family or self.cfg.family, self.memory.model_copy(deep=True))

    def update(self, scenarios: Sequence[Job], round_: int, folder: Path) -> LlmReport:
        before = len(self.memory.lessons)
        results = self._drive(scenarios, self.cfg.family, self.memory)
        return LlmReport(episodes=len(results), crashes=sum(r.crashed for r in results),
                         lessons_added=len(self.memory.lessons) - before, lessons=len(self.memory.lessons))

    def state(self, folder: Path) -> LlmState:
        (folder / "memory.json").write_text(self.memory.model_dump_json(indent=1), encoding="utf-8")
        return LlmState(memory="memory.json", lessons=len(self.memory.lessons))

    def close(self) -> None:
        self.loop.run_until_complete(self.model.aclose())
        self.loop.close()


def make_defender(cfg: LoopConfig, state: dict[str, Any] | None = None, folder: Path | None = None) -> Any:
    """The configured defender, fresh or restored from `state`, a saved round's `RoundState.defender`
    (the record as read from disk, validated here by the defender's own state model)."""
    if cfg.defender == "idm":
        return IdmDefender(cfg, IdmState.model_validate(state) if state else None, folder)
    if cfg.defender == "dqn":
        return DqnLoopDefender(cfg, DqnState.model_validate(state) if state else None, folder)
    return LlmLoopDefender(cfg, LlmState.model_validate(state) if state else None, folder)


# ---------------------------------------------------------------- attackers
Rollout = Callable[[list[int], list[Any]], list[EpisodeResult]]  # (seeds, draws) paired


OPTION_NAMES = {"none": "adv0", "no-kl": "adv0-noref", "no-fault-gate": "adv0-nogate", "frozen": "adv0-frozen",
                "avoidable": "adv0-avoidable", "avoidable-closed": "adv0-avoidable-closed"}


def option_name(cfg: LoopConfig) -> str:
    """`options.make`'s name for the configured attacker (ablations are ADV-0 variants)."""
    return OPTION_NAMES[cfg.ablation] if cfg.attacker == "adv0" else cfg.attacker


class LoopAttacker:
    """Any attacker option of `options.py` in the loop. A learning option (ADV-0, its ablations,
    SAGE-like) trains on a group per context (`propose`), every draw rolled out against the current
    defender on the context's seed -- except SAGE-like, whose surrogate never reads a rollout, so it
    gets bare records of what it proposed (no defender episodes: it is open-loop by design). The
    fixed options (none, random, scripted, CAT-like) do not train."""

    def __init__(self, cfg: LoopConfig, state: dict[str, Any] | None = None):
        from environments.adv0.train import options

        self.cfg, self.name = cfg, option_name(cfg)
        if cfg.attacker == "closed_loop":
            self.option: Any = closed_loop_option(cfg, state)
            self.learns, self.open_loop = True, False
            return
        reference = ReferencePrior.from_dict(state["reference"]) if state and "reference" in state \
            else reference_prior(cfg.family)
        config = AttackerConfig.model_validate(state["config"]) if state and "config" in state \
            else AttackerConfig(k=cfg.k, seed=cfg.seed, **({"dpo_steps": cfg.dpo_steps} if cfg.dpo_steps else {}))
        self.option = options.make(self.name, reference, config, seed=cfg.seed)
        self.learns = isinstance(self.option, Adv0Attacker)
        self.open_loop = isinstance(self.option, options.SageAttack)
        if state and self.learns and "policy" in state:
            restore = getattr(self.option, "load_state", None)
            if restore is not None:
                restore(state)
            else:
                self.option.policy.load_state(state["policy"])
                self.option.round = int(state["round"])

    def train(self, seeds: list[int], contexts: dict[int, np.ndarray], rollout: Rollout,
              rng: np.random.Generator) -> dict[str, Any]:
        if not self.learns:
            return {"attacker": self.name, "rollouts": 0, "learns": False}
        if self.option.frozen:  # the frozen ablation after its first round: nothing to learn, no rollouts
            return {"attacker": self.name, "rollouts": 0, "frozen": True, "round": self.option.round}
        if self.open_loop:  # SAGE-like ranks its own groups by the surrogate: no defender episodes
            report: BaseModel = self.option.update([], contexts)  # the option's update report (option: Any)
            return report.model_dump() | {"attacker": self.name, "rollouts": 0}
        flat_seeds: list[int] = []
        flat_z: list[ScenarioParams] = []
        for s in seeds:
            group = [z for z in self.option.propose(contexts[s], rng) if z is not None]
            flat_seeds += [s] * len(group)
            flat_z += group
        results = rollout(flat_seeds, flat_z)
        report = self.option.update(results, contexts)
        return report.model_dump() | {"attacker": self.name, "rollouts": len(results)}

    def draw(self, context: np.ndarray, rng: np.random.Generator) -> ScenarioParams | None:
        drawn: ScenarioParams | None = self.option.draw(context, rng, 1)[0]
        return drawn

    def kl_to_prior(self, contexts: Sequence[np.ndarray]) -> float | None:
        """Mean exact KL(q || p0) over `contexts` (None for the options without a policy); the
        closed-loop attacker's is its last round's trajectory-KL estimate (it has no context)."""
        if self.cfg.attacker == "closed_loop":
            return float(self.option.last_kl)
        if not self.learns or not len(contexts):
            return None
        return float(self.option.policy.kl_to(self.option.reference, np.array(contexts)).mean())

    def state(self) -> dict[str, Any]:
        """The attacker alone (`attacker.json`): ADV-0's `Adv0Attacker.state()` plus its name."""
        inner = self.option.state() if self.learns else {}
        return {"kind": self.name, **inner}


def closed_loop_option(cfg: LoopConfig, state: dict[str, Any] | None = None) -> Any:
    """The closed-loop attacker (`closed_loop_dpo.ClosedLoopAdv0`) of a run, or restored from its
    round state; the ablations are its config's flags, as they are ADV-0's."""
    from environments.adv0.train.closed_loop_dpo import ClosedLoopAdv0, ClosedLoopConfig

    if state:
        return ClosedLoopAdv0.from_state(state)
    ablations: dict[str, dict[str, bool | int]] = {"none": {}, "no-kl": {"use_reference": False},
                                            "no-fault-gate": {"fault_gate": False}, "frozen": {"freeze_after": 1}}
    flags = ablations[cfg.ablation]
    steps = {"dpo_steps": cfg.dpo_steps} if cfg.dpo_steps else {}
    return ClosedLoopAdv0(ClosedLoopConfig(k=cfg.k, seed=cfg.seed, **steps, **flags))


def make_attacker(cfg: LoopConfig, state: dict[str, Any] | None = None) -> LoopAttacker:
    return LoopAttacker(cfg, state)


# ---------------------------------------------------------------- one round
def round_rng(cfg: LoopConfig, round_: int, part: int) -> np.random.Generator:
    return np.random.default_rng([cfg.seed, round_, part])


def eval_rows(cfg: LoopConfig, round_: int, attacker: Any, defender: Any,
              contexts: Callable[[str, int], np.ndarray]) -> list[EvalRow]:
    seeds = seeds_for(cfg, 0, "eval", cfg.episodes)
    rng = round_rng(cfg, round_, 3)
    attacked = [(attacker.draw(contexts(cfg.family, s), rng), s) for s in seeds]
    rows: list[EvalRow] = []

    def add(split: Split, results: list[EpisodeResult], held_out: bool = False) -> None:
        for r in results:
            s = episode_scores(r).model_dump() | ({"held_out": True} if held_out else {})
            rows.append(EvalRow(round=round_, split=split, seed=r.seed, **s))

    add("normal", defender.run([(None, s) for s in seeds]))
    add("attack", defender.run(attacked))
    by_family: dict[str, list[Job]] = {}
    for family, job in held_out_jobs(cfg):
        by_family.setdefault(family, []).append(job)
    for family, jobs in by_family.items():
        add("held_out", defender.run(jobs, family), held_out=True)
    return rows


class Contexts:
    """The attacker's context per (family, seed), computed once (highway-env needs a reset for it)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int], np.ndarray] = {}

    def __call__(self, family: str, seed: int) -> np.ndarray:
        if (family, seed) not in self.cache:
            self.cache[family, seed] = context_of(world_for(family), family, seed)
        return self.cache[family, seed]


def train_round(cfg: LoopConfig, round_: int, attacker: Any, defender: Any, folder: Path,
                contexts: Callable[[str, int], np.ndarray]) -> tuple[dict[str, Any], DefenderReport, dict[str, float]]:
    """Steps (a) and (b) of round `round_`: (attacker report, defender report, CPU-seconds of each)."""
    cpu0 = cpu_seconds()
    train_seeds = seeds_for(cfg, round_, "attack", cfg.contexts)
    ctx = {s: contexts(cfg.family, s) for s in train_seeds}
    rollout: Rollout = lambda seeds, zs: defender.run(list(zip(zs, seeds)))  # noqa: E731
    attacker_report = attacker.train(train_seeds, ctx, rollout, round_rng(cfg, round_, 1))
    cpu1 = cpu_seconds()
    rng = round_rng(cfg, round_, 2)
    defend_seeds = seeds_for(cfg, round_, "defend", cfg.scenarios)
    scenarios: list[Job] = [(attacker.draw(contexts(cfg.family, s), rng), s) for s in defend_seeds]
    defender_report: DefenderReport = defender.update(scenarios, round_, folder)
    cpu2 = cpu_seconds()
    return attacker_report, defender_report, {"attacker": round(cpu1 - cpu0, 3), "defender": round(cpu2 - cpu1, 3)}


def run_round(cfg: LoopConfig, round_: int, attacker: Any, defender: Any, folder: Path) -> RoundState:
    """Round `round_` (1-based): attacker update, defender update, evaluation; files go to `folder`."""
    wall0 = time.perf_counter()
    contexts = Contexts()
    attacker_report, defender_report, cpu = train_round(cfg, round_, attacker, defender, folder, contexts)
    cpu0 = cpu_seconds()
    rows = eval_rows(cfg, round_, attacker, defender, contexts)
    cpu["eval"] = round(cpu_seconds() - cpu0, 3)
    return RoundState(round=round_, attacker=attacker.state(), defender=defender.state(folder).model_dump(),
                      attacker_report=attacker_report, defender_report=defender_report.model_dump(), rows=rows, cpu_s=cpu,
                      wall_s=round(time.perf_counter() - wall0, 3))


def train(cfg: LoopConfig, folder: Path, on_round: Callable[[RoundState], None] | None = None) -> list[int]:
    """Run the rounds after the last complete one, up to `cfg.rounds`. Returns the rounds run."""
    clean_partial(folder)
    done = complete_rounds(folder)
    last = done[-1] if done else 0
    prev = load_round(folder, last) if last else None
    prev_dir = folder / "rounds" / round_name(last) if last else None
    attacker = make_attacker(cfg, prev.attacker if prev else None)
    defender = make_defender(cfg, prev.defender if prev else None, prev_dir)
    ran = []
    try:
        for r in range(last + 1, cfg.rounds + 1):
            staging = folder / "rounds" / f".{round_name(r)}.{os.getpid()}"
            staging.mkdir()
            state = run_round(cfg, r, attacker, defender, staging)
            save_round(folder, state, staging)
            ran.append(r)
            if on_round is not None:
                on_round(state)
    finally:
        defender.close()
    return ran
