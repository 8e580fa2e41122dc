"""`harness mind2web build-corpus` (entry-point group `harness.commands`: mind2web = mind2web_app):
rewrite the project's own Mind2Web corpus from its local sites, byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import fail, out

mind2web_app = typer.Typer(no_args_is_help=True, help="Mind2Web's offline protocol: the project's own corpus.")


@mind2web_app.callback()
def _group() -> None:
    """Mind2Web's offline protocol (a group, so that later commands join it)."""


@mind2web_app.command("build-corpus")
def build_corpus_cmd(
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Folder to write (default: corpora/mind2web)."),
    check: bool = typer.Option(False, "--check", help="Write to a temporary folder and fail if it differs from --out."),
) -> None:
    """Play the 16 scripted tasks on the shop, travel and mail sites and write them in Mind2Web's
    format (split folders train/, test_task/, test_website/, test_domain/); print each file's sha256."""
    import tempfile

    from corpora.mind2web.loader import OWN_CORPUS
    from environments.mind2web.build import build_corpus

    target = out_dir or OWN_CORPUS
    if not check:
        for rel, digest in build_corpus(target).items():
            out.print(f"{target / rel}  sha256 {digest}", highlight=False)
        return
    with tempfile.TemporaryDirectory() as tmp:
        fresh = build_corpus(Path(tmp))
        differ = [rel for rel in fresh if not (target / rel).is_file() or (target / rel).read_bytes() != (Path(tmp) / rel).read_bytes()]
    if differ:
        fail(f"the corpus in {target} differs from a fresh build in {', '.join(differ)}: run `harness mind2web build-corpus`")
    out.print(f"{target}: {len(fresh)} files, identical to a fresh build", highlight=False)
