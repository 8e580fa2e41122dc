"""The family's tasks by name (what `harness papers` checks). Each is also a suite registered under
`harness.suites` as `papers.<task>`; add one more: a module with a `PaperTask` subclass, a line here,
an entry point, and its section in README.md."""

from __future__ import annotations

from environments.papers.base import PaperTask
from environments.papers.fedforest import FedForestTask
from environments.papers.prefix_forcing import PrefixForcingTask
from environments.papers.prodg import ProDGTask
from environments.papers.ptq_priced import PtqPricedTask

TASKS: dict[str, type[PaperTask]] = {cls.task: cls for cls in (PtqPricedTask, PrefixForcingTask, FedForestTask, ProDGTask)}
