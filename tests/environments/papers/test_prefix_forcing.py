"""prefix_linear_forcing on a tiny trained GPT-2: the solved prefix reproduces, token by token under
greedy decoding, a target that a hidden teacher prefix produced (so a prefix must exist); the range
test certifies the planted never-argmax token and no natural one, and no prefix makes it appear; a
cell through the suite contract forces, flags and is deterministic; a target longer than the model's
context and an unknown solver are one clear error each. Torch: run under `flock /tmp/harness-torch.lock`."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from environments.papers import prefix_forcing
from environments.papers.prefix_forcing import PrefixForcingTask, solve_linear
from environments.papers.prefix_model import ModelSize, greedy_decode, never_argmax, sample_corpus, trained_model
from harness.errors import HarnessError
from harness.suite import SampleContext, parse_options

TINY = ModelSize(vocab=16, width=24, layers=2, heads=2, context=32, train_steps=60, batch=16, seq=16)


class TinySize(ModelSize):
    @classmethod
    def scaled(cls, scale: int) -> ModelSize:
        return TINY


def test_the_model_is_a_trained_gpt2_with_layernorm_and_mlp():
    trained = trained_model(3, TINY)
    block = trained.model.transformer.h[0]
    assert type(trained.model).__name__ == "GPT2LMHeadModel" and len(trained.model.transformer.h) == TINY.layers
    assert isinstance(block.ln_1, torch.nn.LayerNorm) and hasattr(block, "mlp")
    assert trained.heldout_accuracy > 0.5 * trained.chain_accuracy  # learned the chain, not random (1/15 by chance)


def test_the_solved_prefix_reproduces_a_target_that_a_prefix_is_known_to_force():
    trained = trained_model(3, TINY)
    rng = np.random.default_rng(0)
    solved = 0
    for _ in range(3):
        x = sample_corpus(trained.successors, trained.probs, rng, 1, prefix_forcing.X_LEN)[0].tolist()
        teacher = torch.as_tensor(rng.normal(size=(4, TINY.width)), dtype=torch.float32)
        y = greedy_decode(trained.model, teacher, torch.as_tensor(x), 4)  # in range: the teacher forces it
        prefix, systems, forced = solve_linear(trained, x, y, 4)
        decoded = greedy_decode(trained.model, prefix, torch.as_tensor(x), 4)
        assert decoded == y or not forced  # 'forced' (every margin >= 0.5) implies the real greedy decode is y
        solved += decoded == y
        assert systems <= prefix_forcing.MAX_SYSTEMS
    assert solved == 3


def test_the_range_test_certifies_the_planted_token_only_and_no_prefix_produces_it():
    trained = trained_model(3, TINY)
    unembed = trained.model.lm_head.weight.double().numpy()
    assert [v for v in range(TINY.vocab) if never_argmax(unembed, v)] == [TINY.ghost]
    rng = np.random.default_rng(1)
    prefixes = torch.as_tensor(rng.normal(scale=3.0, size=(200, 4, TINY.width)), dtype=torch.float32)
    x = torch.as_tensor(sample_corpus(trained.successors, trained.probs, rng, 1, 8)[0])
    embeds = torch.cat([prefixes, trained.model.transformer.wte(x).expand(200, -1, -1)], 1)
    with torch.no_grad():
        logits = trained.model(inputs_embeds=embeds).logits[:, -1]
    assert TINY.ghost not in logits.argmax(-1).tolist()
    assert (logits - logits[0]).abs().max() > 1e-2  # the prefixes do move the logits
    w = np.random.default_rng(2).normal(size=(5, 3))
    assert not never_argmax(w, 4)
    w[4] = 0.25 * w[0] + 0.75 * w[2]  # a convex combination of two others: never the strict argmax
    assert never_argmax(w, 4)


def test_a_cell_forces_the_in_range_targets_flags_the_out_of_range_ones_and_is_deterministic(monkeypatch):
    monkeypatch.setattr(prefix_forcing, "ModelSize", TinySize)
    monkeypatch.setattr(prefix_forcing, "IN_RANGE", 2)
    monkeypatch.setattr(prefix_forcing, "OUT_OF_RANGE", 1)
    monkeypatch.setattr(prefix_forcing, "RANDOM", 1)
    prefix_forcing.problems.cache_clear()
    prefix_forcing.unreachable_tokens.cache_clear()
    try:
        suite = PrefixForcingTask(PrefixForcingTask.Options(seeds=1, first_seed=3, target_len=4))
        sample = suite.load_samples(None)[0]
        assert sample.id == "prefix8/seed003" and len(suite.load_samples(None)) == 2
        first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
        again = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
        assert first.scores["forced_rate"] == 1.0 and first.scores["token_match"] == 1.0
        assert first.scores["flag_rate"] == 1.0 and first.scores["out_of_range_forced"] == 0.0
        assert first.scores["false_flag_rate"] == 0.0 and first.scores["zero_prefix_token_match"] < 1.0
        untimed = [
            [{k: v for k, v in a.items() if k != "seconds"} for a in r.output["answer"]["targets"]]
            for r in (first, again)
        ]
        assert untimed[0] == untimed[1]
        assert suite.roles == () and "CRITERION (ours" in suite.description
    finally:
        prefix_forcing.problems.cache_clear()
        prefix_forcing.unreachable_tokens.cache_clear()


def test_a_target_longer_than_the_context_and_an_unknown_solver_are_one_clear_error_each():
    with pytest.raises(HarnessError, match=r"target_len=100: .*exceed the model's context of 32.*target_len <= 17"):
        parse_options("papers.prefix_linear_forcing", PrefixForcingTask.Options, {"target_len": 100})
    assert (
        parse_options(
            "papers.prefix_linear_forcing", PrefixForcingTask.Options, {"target_len": 100, "scale": 4}
        ).target_len
        == 100
    )  # fits a larger model's context
    with pytest.raises(ValueError, match="target_len 40: prefix 8"):
        prefix_forcing.check_fits(ModelSize(), 8, 40)
    with pytest.raises(HarnessError, match="solver=adam.*linear"):
        parse_options("papers.prefix_linear_forcing", PrefixForcingTask.Options, {"solver": "adam"})
