"""`harness bench cdwm-visual` (entry-point group `harness.bench`): the Atari world's steps/s and
the object-delta extraction's overhead per emulator step (`bench.py`)."""

from __future__ import annotations

import typer

from harness.cli.kit import out


def bench_visual_cmd(
    steps: int = typer.Option(2000, "--steps", min=1, help="Emulator steps per game."),
    games: str = typer.Option("breakout,pong,freeway,boxing,ms_pacman,seaquest,frostbite,asterix,kangaroo,road_runner,"
                              "bank_heist,qbert,krull,jamesbond,alien,amidar,assault,demon_attack,gopher,hero,private_eye,"
                              "chopper_command,kung_fu_master,crazy_climber,up_n_down,battle_zone",
                              "--games",
                              help="Comma list of Atari 100k games (default: those with an object extractor)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the emulator and of the action sequence."),
    filmstrip: bool = typer.Option(False, "--filmstrip", help="Also copy every screen for filmstrips (reported apart)."),
    action_repeat: int = typer.Option(4, "--action-repeat", min=1, help="Emulator steps per agent step (one delta each)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The Atari world's steps/s and the object-delta extraction's overhead per emulator step."""
    import json

    from environments.atari.bench import format_table, run_visual_bench

    result = run_visual_bench(tuple(g.strip() for g in games.split(",") if g.strip()), steps, seed, filmstrip, action_repeat)
    out.print(json.dumps(result, indent=2) if as_json else format_table(result), highlight=False)
