"""`harness bench`: an extensible group -- the core's own benchmarks here, more from any package
through the entry-point group `harness.bench` (a typer command function each; PreFT's `adapters`
and `structured` among them)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import fail, out

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks of the harness and of its parts.")


@bench_app.callback()
def bench_group() -> None:
    """A group even while `runner` is its only own command (the rest come from `harness.bench`)."""


@bench_app.command("runner")
def bench_runner(
    samples: int = typer.Option(2000, "--samples", min=1),
    concurrency: int = typer.Option(64, "--concurrency", min=1),
    executor: str = typer.Option("asyncio", "--executor",
                                 help="asyncio: runner vs the raw client; ray: the Ray executor vs the asyncio one."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: a cluster's HOST:PORT."),
    model: str = typer.Option("loopback", "--model",
                              help="loopback: the echo server, runner vs raw client; instant: the in-process instant "
                                   "model -- samples/s, peak RSS, resume-scan and summary time of a run of --samples."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir",
                                           help="--model instant: where the (temporary) run goes (default: the system's temp)."),
) -> None:
    """The harness's own overhead: full runner vs the raw openai client on an instant server
    (or, with --executor ray, Ray tasks vs the asyncio executor; with --model instant, what
    records cost at scale)."""
    from harness.bench import bench_runner as run

    if model not in ("loopback", "instant"):
        fail(f"--model {model!r}: use loopback (the echo server) or instant (the in-process instant model)")
    if model == "instant":
        from harness.bench import bench_instant

        if executor != "asyncio" or ray_address is not None:
            fail("--model instant measures the records with the asyncio executor: drop --executor/--ray-address")
        if run_dir is not None and not run_dir.is_dir():
            fail(f"--run-dir {run_dir}: not a folder; create it or leave the flag out")
        bench_instant(samples, concurrency, out, run_dir)
        return
    if executor == "ray":
        from harness.bench import bench_ray
        from harness.errors import HarnessError
        from harness.executors import make_executor

        try:
            make_executor("ray", ray_address=ray_address)  # the address answers; Ray is installed
        except HarnessError as exc:
            fail(str(exc))
        bench_ray(samples, concurrency, out, ray_address)
        return
    if executor != "asyncio" or ray_address is not None:
        fail(f"--executor {executor!r}{' --ray-address' if ray_address else ''}: use --executor asyncio or ray "
             "(--ray-address goes with ray)")
    run(samples, concurrency, out)
