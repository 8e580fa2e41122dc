"""ADV-0's commands, added to `harness` through the entry-point group `harness.commands`:
`harness adv0 train` (the closed min-max loop, resumable), `harness adv0 check NAME` (the claim
checks C1-C9, one run per arm; each verdict saved for `harness claims table`), `harness adv0
verdict RUN...` (a check's verdict from its runs' records) and `harness adv0 pretrain-dqn --steps N`
(the cached DQN checkpoint). Bad input is
one error line naming the input and the fix (`harness.cli.kit.fail`), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from harness.cli.kit import RUN_DIR, err, out
from harness.cli.kit import fail as _fail
from harness.errors import HarnessError

if TYPE_CHECKING:
    from environments.adv0.checks.verdicts import Finding

adv0_app = typer.Typer(no_args_is_help=True, help="ADV-0: the adversarial driving loop, its claim checks and the DQN checkpoint.")


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        _fail(f"{flag} {value!r} is unknown; use one of {', '.join(allowed)}")
    return value


@adv0_app.command("train")
def train_cmd(
    defender: str = typer.Option("idm", "--defender", help="idm (CEM-tuned IDM/MOBIL), dqn (SB3 DQN) or llm (the LLM driver)."),
    attacker: str = typer.Option("adv0", "--attacker", help="adv0, none, random, scripted, cat, sage or closed_loop (acts every step; trajectory DPO)."),
    ablation: str = typer.Option("none", "--ablation", help="ADV-0 only: none, no-kl, no-fault-gate, frozen, avoidable (draws only triggers escapable from the initial state) or avoidable-closed (fires each trigger only at a step whose state leaves an escape)."),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="Rounds in all (default 3; with --resume: a new total, else the saved one)."),
    family: str = typer.Option("highway", "--family", help="highway (highway-env) or toy (the numpy world)."),
    episodes: int = typer.Option(20, "--episodes", min=1, help="Evaluation episodes per split and round."),
    held_out_episodes: int = typer.Option(6, "--held-out-episodes", min=0, help="Evaluation episodes per held-out condition."),
    contexts: int = typer.Option(8, "--contexts", min=1, max=900, help="Attacker training contexts per round."),
    k: int = typer.Option(8, "--k", min=2, help="ADV-0: distinct candidates per context."),
    dpo_steps: int | None = typer.Option(None, "--dpo-steps", min=1, help="ADV-0: DPO steps per round (default: the attacker's)."),
    scenarios: int = typer.Option(16, "--scenarios", min=1, max=900, help="Attacker draws the defender trains on per round."),
    cem_generations: int = typer.Option(2, "--cem-generations", min=1),
    cem_population: int = typer.Option(8, "--cem-population", min=2),
    dqn_steps: int = typer.Option(1000, "--dqn-steps", min=1, help="DQN fine-tuning steps per round."),
    dqn_checkpoint: str | None = typer.Option(None, "--dqn-checkpoint", help="DQN start (default: the cached pretraining)."),
    seed: int = typer.Option(0, "--seed", min=0, max=200),
    model: str = typer.Option("local/smollm2-135m", "--model", help="The LLM driver's model spec (--defender llm)."),
    resume: str | None = typer.Option(None, "--resume", help="Continue this run id after its last complete round."),
    run_dir: Path = RUN_DIR,
) -> None:
    """The closed min-max loop: attacker update, defender update, evaluation, each round saved."""
    from environments.adv0.train import loop

    run_id = resume or ""
    try:
        if resume is not None:
            cfg, folder = loop.open_run(run_dir, resume, rounds)
            run_id = resume
            done = loop.complete_rounds(folder)
            err.print(f"resuming {run_id}: {len(done)} of {cfg.rounds} rounds complete (its saved config is used)")
        else:
            _choice("--defender", defender, loop.DEFENDERS)
            _choice("--attacker", attacker, loop.ATTACKERS)
            _choice("--ablation", ablation, loop.ABLATIONS)
            _choice("--family", family, loop.LOOP_FAMILIES)
            if attacker == "closed_loop":
                if family != "highway":
                    _fail("--attacker closed_loop needs --family highway (the enumerable closed-loop toy game is "
                          "environments/adv0/checks/toy_game.py)")
                if ablation not in loop.CLOSED_LOOP_ABLATIONS:
                    _fail(f"--ablation {ablation} does not apply to --attacker closed_loop; use one of "
                          f"{', '.join(loop.CLOSED_LOOP_ABLATIONS)}")
            elif ablation != "none" and attacker != "adv0":
                _fail(f"--ablation {ablation} applies to --attacker adv0 only (got --attacker {attacker})")
            if defender == "dqn" and family != "highway":
                _fail("--defender dqn needs --family highway (the toy world has no Kinematics observation)")
            if defender == "llm":
                _check_model(model)
            cfg = loop.LoopConfig(
                defender=defender, attacker=attacker, ablation=ablation, family=family, rounds=rounds or 3, episodes=episodes,
                held_out_episodes=held_out_episodes, seed=seed, contexts=contexts, k=k, dpo_steps=dpo_steps, scenarios=scenarios,
                cem_generations=cem_generations, cem_population=cem_population, dqn_steps=dqn_steps,
                dqn_checkpoint=dqn_checkpoint, model=model)
            if defender == "dqn":
                _check_checkpoint(dqn_checkpoint)
            run_id, folder = loop.start_run(cfg, run_dir)
            err.print(f"run {run_id} -> {folder}")
        loop.train(cfg, folder, on_round=_print_round)
    except HarnessError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: complete rounds are saved; resume with "
                  f"`harness adv0 train --resume {run_id} --run-dir {run_dir}`")
        raise typer.Exit(130) from None
    out.print(f"done: {run_id} ({folder})", highlight=False)


def _check_model(spec: str) -> None:
    from harness.providers import validate_spec
    from harness.spec import ModelSpec

    try:
        validate_spec(ModelSpec.parse(spec))
    except HarnessError as exc:
        _fail(str(exc))


def _check_checkpoint(path: str | None) -> None:
    """A missing DQN checkpoint is one error line naming the command that builds it (before any run folder)."""
    from environments.adv0.train import dqn

    target = Path(path) if path else dqn.checkpoint_path(dqn.DEFAULT_PRETRAIN_STEPS, 0)
    if not target.is_file():
        dqn.load_checkpoint(target)  # raises the HarnessError that names `harness adv0 pretrain-dqn`


def _print_round(state: Any) -> None:
    from environments.adv0.metrics import driving_metrics

    def rate(split: str, key: str) -> str:
        rows = [r for r in state.rows if r.split == split]
        m = driving_metrics(rows).get(key) if rows else None
        if m is None or m.value is None:
            return "n/a"
        return f"{m.value:.2f} [{m.ci_low:.2f}, {m.ci_high:.2f}] (n={m.n})"

    cem = state.defender_report.get("cpu_s_per_generation")
    out.print(f"round {state.round}: attack defender-failure {rate('attack', 'defender_failure_rate')}, "
              f"normal crash {rate('normal', 'crash_rate')}, held-out crash {rate('held_out', 'crash_rate')}; "
              f"CPU-s attacker {state.cpu_s['attacker']:.1f}, defender {state.cpu_s['defender']:.1f}"
              + (f" (CEM per generation {cem})" if cem else "") + f", eval {state.cpu_s['eval']:.1f}", highlight=False)


@adv0_app.command("check")
def check_cmd(
    name: str = typer.Argument(..., help="C1 .. C9 (see `harness adv0 check --help` and the README)."),
    episodes: int | None = typer.Option(None, "--episodes", min=1, help="Episodes per arm (each check has a small default)."),
    seeds: int | None = typer.Option(None, "--seeds", min=1, help="Training seeds / contexts / repeats (check-specific)."),
    replicates: int | None = typer.Option(None, "--replicates", min=1, max=201, help="Cells (seeds) per arm, each with its own training and evaluation seeds (default 1; C6/C7: their --seeds)."),
    family: str | None = typer.Option(None, "--family", help="highway or toy (checks that run on either)."),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="C3-C9: min-max rounds (each check has a default)."),
    model: str = typer.Option("local/smollm2-135m", "--model", help="C9: the LLM driver's model spec."),
    dqn_steps: int | None = typer.Option(None, "--dqn-steps", min=1, help="C7: DQN fine-tuning steps per round (default 3000)."),
    dqn_checkpoint: str | None = typer.Option(None, "--dqn-checkpoint", help="C7: the DQN to start from (default: the cached pretraining)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the finding as JSON here."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Processes for the planner's episodes (default: one per core; 1 = serial)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Run the planner's episodes on this Ray cluster (HOST:PORT, or 'local')."),
    run_dir: Path = RUN_DIR,
) -> None:
    """Run one claim check as ordinary runs -- one `adv0-check` run per arm, a cell per seed, in RUN_DIR
    (`harness runs`, `harness view`; a killed check started again resumes them, redoing no finished
    cell) -- and print the paper's sentence, the claim, the criterion, the numbers with CIs, the
    departures and the verdict, judged from the runs' records; the verdict is saved as
    RUN_DIR/claims/adv0.CN.json (`harness claims table`). `harness adv0 verdict RUN...` recomputes it."""
    from environments.adv0.checks import check_runs, checks
    from harness.cli.kit import check_run_dir

    key = name.upper()
    if key not in checks.CHECKS:
        _fail(f"check {name!r} is unknown; use one of {', '.join(checks.CHECKS)}")
    if family is not None and family not in ("highway", "toy"):
        _fail(f"--family {family!r} is unknown; use highway or toy")
    if key == "C9":
        _check_model(model)
    from environments.adv0.train import parallel

    err.print(f"episodes: {parallel.configure(workers, ray_address).label()}")
    try:
        check_run_dir(run_dir)
        finding, verdict = check_runs.run_check_as_runs(
            key, run_dir, replicates=replicates, log=lambda line: err.print(line, highlight=False, markup=False),
            episodes=episodes, seeds=seeds, family=family, model=model, rounds=rounds, dqn_steps=dqn_steps,
            dqn_checkpoint=dqn_checkpoint)
    except HarnessError as exc:
        _fail(str(exc))
    _print_finding(checks.render(finding), verdict, run_dir, json_out, finding)


def _print_finding(text: str, verdict: Any, run_dir: Path, json_out: Path | None, finding: Finding) -> None:
    from harness.claims.verdict import save_verdict

    out.print(text, highlight=False, soft_wrap=True, markup=False)
    runs = "; ".join(f"{arm}: {', '.join(ids)}" for arm, ids in verdict.runs.items())
    out.print(f"runs: {runs}", highlight=False, soft_wrap=True, markup=False)
    out.print(f"saved: {save_verdict(run_dir, verdict)}", highlight=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(finding.model_dump(), indent=1), encoding="utf-8")


@adv0_app.command("verdict")
def verdict_cmd(
    run_ids: list[str] = typer.Argument(..., help="The runs of one check (one per arm; `harness runs` lists them)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the finding as JSON here."),
    run_dir: Path = RUN_DIR,
) -> None:
    """Recompute a check's finding and verdict from its runs' records alone (no episode is played),
    print them and save the verdict under RUN_DIR/claims/ (its wall time: none, recomputed)."""
    from environments.adv0.checks import check_runs, checks
    from harness.claims.runs import load_runs

    try:
        finding, verdict = check_runs.verdict_from_runs(load_runs(run_dir, run_ids))
    except HarnessError as exc:
        _fail(str(exc))
    _print_finding(checks.render(finding), verdict, run_dir, json_out, finding)


@adv0_app.command("pretrain-dqn")
def pretrain_dqn_cmd(
    steps: int = typer.Option(20_000, "--steps", min=1, help="Training steps on normal traffic."),
    seed: int = typer.Option(0, "--seed", min=0),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the checkpoint is cached."),
) -> None:
    """Pretrain the DQN defender on normal highway traffic and cache the checkpoint."""
    from environments.adv0.train import dqn

    try:
        path = dqn.build_checkpoint(steps, seed, force=force)
    except HarnessError as exc:
        _fail(str(exc))
    out.print(f"DQN checkpoint: {path}", highlight=False)


@adv0_app.command("gate")
def gate_cmd(
    world: str = typer.Option("toy", "--world", help="toy (every draw of the grid on each seed) or highway (one uniform draw per seed)."),
    seeds: int = typer.Option(8, "--seeds", min=1, max=100_000, help="Seeds: toy 0..N-1; highway 9,000,000 + 0..N-1."),
) -> None:
    """The escape gates measured: the same draws with no gate, the open-loop gate and the closed-loop
    gate (the default IDM/MOBIL ego), each arm's triggers fired and withheld and its crashes by fault."""
    from environments.adv0.checks import gate

    if world not in ("toy", "highway"):
        _fail(f"--world {world!r} is unknown; use toy or highway")
    rows = gate.toy_gate_split(range(seeds)) if world == "toy" else gate.highway_gate_split(seeds)
    out.print(gate.render(rows), highlight=False, soft_wrap=True)
