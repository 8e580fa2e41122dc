"""The family's tasks by name (what `harness papers` checks). Each is also a suite registered under
`harness.suites` as `papers.<task>`; add one more: a module with a `PaperTask` subclass, a line here,
an entry point, and its section in README.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.papers.alibi_lsh import AlibiLSHTask
from environments.papers.bai_tracking import BAITrackingTask
from environments.papers.base import PaperTask
from environments.papers.fedforest import FedForestTask
from environments.papers.ggtddip import GGTDDIPTask
from environments.papers.plugin_threshold import PluginThresholdTask
from environments.papers.prefix_forcing import PrefixForcingTask
from environments.papers.procti import ProCTITask
from environments.papers.prodg import ProDGTask
from environments.papers.ptq_priced import PtqPricedTask
from environments.papers.qec_pyramid import QECPyramidTask
from environments.papers.rcaux import RCAuxTask
from environments.papers.sbkan import SBKANTask
from environments.papers.tpoe_eib import TPoEEIBTask
from environments.papers.ts_faithful import TSFaithfulTask
from harness.claims.registry import ClaimFamily

TASKS: dict[str, type[PaperTask[Any]]] = {
    cls.task: cls
    for cls in (
        PtqPricedTask,
        PrefixForcingTask,
        FedForestTask,
        ProDGTask,
        ProCTITask,
        GGTDDIPTask,
        RCAuxTask,
        BAITrackingTask,
        PluginThresholdTask,
        AlibiLSHTask,
        SBKANTask,
        QECPyramidTask,
        TSFaithfulTask,
        TPoEEIBTask,
    )
}

CRITERIA_LOG = Path(__file__).with_name("criteria_log.toml")


def claim_family() -> ClaimFamily:
    """The family's claims and their criterion log (entry point `papers` under `harness.claims`)."""
    return ClaimFamily(
        name="papers",
        log=CRITERIA_LOG,
        claims=tuple(cls.claim for cls in TASKS.values()),
        suite_of=lambda claim: claim.id,
        arm_option="solver",
    )
