"""Fixtures the ProGraf tests share: the committed corpus by task id, and one renderer (its
worker processes started once per test module)."""

import pytest

from environments.prograf.check.render import Renderer
from environments.prograf.generate.build import CORPUS
from environments.prograf.task import load_tasks


@pytest.fixture(scope="module")
def corpus():
    return {t.id: t for t in load_tasks(CORPUS)}


@pytest.fixture(scope="module")
def renderer():
    r = Renderer()
    yield r
    r.close()
