"""sbkan_aniso_rates: the theory slope, the spike-and-slab KL (zero at the prior), the
median-probability model's gates, the scorer's slope on errors of a known rate, fits that are pure
functions of the seed, bad options and answers rejected. Torch: run under `flock /tmp/torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest

from environments.papers import sbkan
from environments.papers.base import CellResult
from environments.papers.sbkan import (
    N_TEST, PRIOR_INCLUSION, SIZES, THEORY_SLOPE, SBKANTask, data, fit_and_predict, make_model, target,
)
from harness.errors import HarnessError
from harness.suite import parse_options


def test_theory_slope_and_target_scale():
    assert THEORY_SLOPE == pytest.approx(-0.3, abs=1e-12)  # s~ = 3/4: -s~ / (2 s~ + 1)
    x = np.random.default_rng(5).random((100_000, 2))
    assert np.std(target(x)) == pytest.approx(1.0, abs=0.02)


def test_spike_and_slab_kl_is_zero_at_the_prior_and_gates_switch_edges_off():
    import torch

    model = make_model("sbkan")
    with torch.no_grad():
        for layer in (model.first, model.second):
            layer.gate_logit.fill_(float(np.log(PRIOR_INCLUSION / (1 - PRIOR_INCLUSION))))
            layer.mu.zero_()
            layer.log_sd.zero_()
        assert abs(float(model.kl())) < 1e-5
        model.second.gate_logit.fill_(-1.0)  # the median model drops every output edge
        assert torch.equal(model(torch.rand(7, 2)), torch.zeros(7))


def test_scorer_recovers_a_known_rate():
    truth = target(data(0)[2])
    bump = np.random.default_rng(1).standard_normal(N_TEST)
    preds = [(truth + n ** -0.3 * bump).tolist() for n in SIZES]
    result = CellResult(solver="kan", setting="weierstrass", seed=0, wall_s=0.0,
                        answer={"predictions": preds, "edges_kept": [None] * len(SIZES)})
    scores = SBKANTask().score_cell(result)
    assert scores["slope"] == pytest.approx(-0.3, abs=1e-9) and scores["slope_gap"] == pytest.approx(0.0, abs=1e-9)
    result.answer["predictions"] = preds[:2]
    with pytest.raises(ValueError, match="must be 5 arrays"):
        SBKANTask().score_cell(result)


def test_fits_are_pure_functions_of_the_seed(monkeypatch):
    monkeypatch.setattr(sbkan, "STEPS", 5)
    x, y, x_test = data(0)
    first, kept = fit_and_predict("sbkan", x[:64], y[:64], x_test[:50], 3)
    again, kept_again = fit_and_predict("sbkan", x[:64], y[:64], x_test[:50], 3)
    assert np.array_equal(first, again) and kept == kept_again and 0.0 <= kept <= 1.0
    other, _ = fit_and_predict("sbkan", x[:64], y[:64], x_test[:50], 4)
    assert not np.array_equal(first, other)
    assert fit_and_predict("mlp", x[:64], y[:64], x_test[:50], 3)[1] is None


def test_unknown_solver_is_one_clear_error():
    with pytest.raises(HarnessError, match="solver=gp.*sbkan"):
        parse_options("papers.sbkan_aniso_rates", SBKANTask.Options, {"solver": "gp"})
