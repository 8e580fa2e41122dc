"""The trained delta world model (issue 40 items 2 and 3), at tiny sizes: the learned causal mask
recovers a known dependency structure, a masked field cannot be emitted under the grammar, SFT
lowers validation loss, a killed run resumes at its saved step (and ends where an uninterrupted one
does), and bad input is one error naming the file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from environments.cdwm import wm_format
from environments.cdwm.causal_mask import LearnedMask, mask_scores
from harness.environment import DIMENSIONS, Delta
from harness.errors import HarnessError
from tests.environments.cdwm.wm_fixtures import TRUE_STRUCTURE, synthetic_rows, tiny_base, write_dataset

torch = pytest.importorskip("torch")


def _tiny_config(data: Path, base: Path, **kw):
    from environments.cdwm.wm_train import TrainConfig

    settings = dict(
        data=str(data),
        base_model=str(base),
        steps=6,
        batch_size=4,
        lr=2e-2,
        head_lr=1e-2,
        rank=4,
        alpha=8,
        top_layers=0,
        val_rows=8,
        eval_every=100,
        checkpoint_every=2,
        max_tokens=256,
    )
    settings.update(kw)
    return TrainConfig(**settings)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("wm")
    return write_dataset(root / "data"), tiny_base(root / "base")


def test_gates_recover_the_known_structure():
    """Trained by the same loss and optimiser groups as SFT (with a stand-in trunk: features that
    carry the class and, noisily, the row), the gates end open exactly where the synthetic world's
    classes touch a dimension; they start all open, so the check can fail."""
    from environments.cdwm.causal_mask import CausalGates, touched_vector
    from tests.environments.cdwm.wm_fixtures import synthetic_delta

    torch.manual_seed(0)
    rng = random.Random(0)
    classes = sorted(TRUE_STRUCTURE)
    gates = CausalGates(classes, hidden_size=len(classes) + len(DIMENSIONS))
    start = LearnedMask(gates.table()).allowed("make")
    assert start == frozenset(DIMENSIONS)  # open everywhere before training
    opt = torch.optim.AdamW(
        [{"params": list(gates.head.parameters()), "lr": 1e-2}, {"params": [gates.logits], "lr": 0.05}]
    )
    for _ in range(400):
        ids, targets = [], []
        for _ in range(32):
            c = rng.choice(classes)
            ids.append(classes.index(c))
            targets.append(touched_vector(synthetic_delta(c, "cup", "red", "yard", rng)))
        cls = torch.tensor(ids)
        target = torch.tensor(targets)
        hidden = torch.cat(
            [torch.nn.functional.one_hot(cls, len(classes)).float(), target + 0.3 * torch.randn_like(target)], -1
        )
        loss, _ = gates.loss(hidden, cls, target, sparsity=0.02)
        opt.zero_grad()
        loss.backward()
        opt.step()
    learned = LearnedMask(gates.table())
    for c, dims in TRUE_STRUCTURE.items():
        assert learned.allowed(c) == frozenset(dims), (c, gates.table()[c])
    assert learned.allowed("unseen") is None  # a class never trained keeps every dimension


def test_a_gate_stays_open_where_the_head_cannot_tell_which_rows():
    """A class that changes a dimension on a random 20% of its rows, with features that carry the
    class only (no hint of which rows): the edge exists, so its gate must stay open, while the
    dimensions it never touches close. (The product form BCE(g * p) settled such a gate near the base
    rate, below the threshold: MiniGrid `forward` -> irreversible in session 25.)"""
    from environments.cdwm.causal_mask import CausalGates

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    gates = CausalGates(["step"], hidden_size=1)
    irreversible = DIMENSIONS.index("irreversible")
    opt = torch.optim.AdamW(
        [{"params": list(gates.head.parameters()), "lr": 1e-2}, {"params": [gates.logits], "lr": 0.05}]
    )
    for _ in range(300):
        target = torch.zeros(32, len(DIMENSIONS))
        target[:, irreversible] = (torch.rand(32, generator=gen) < 0.2).float()
        loss, _ = gates.loss(torch.ones(32, 1), torch.zeros(32, dtype=torch.long), target, sparsity=0.02)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert LearnedMask(gates.table()).allowed("step") == frozenset({"irreversible"}), gates.table()


def test_mask_scores_against_truth():
    rows = [("w/a", Delta(created=["x:1"])), ("w/b", Delta(reversible=False))]
    exact = mask_scores({"w/a": frozenset({"created"}), "w/b": frozenset({"irreversible"})}, rows)
    assert exact["precision"] == exact["recall"] == exact["fact_recall"] == 1.0
    loose = mask_scores({}, rows)  # no mask: recall 1, precision 2 of 12 pairs
    assert loose["recall"] == 1.0 and loose["precision"] == pytest.approx(2 / 12)
    wrong = mask_scores({"w/a": frozenset(), "w/b": frozenset({"irreversible"})}, rows)
    assert wrong["recall"] == 0.5 and wrong["fact_recall"] == 0.5


def test_a_masked_field_cannot_be_emitted():
    """Under the engine's own grammar compiler (preft.constrain), a reply with a fact in a masked
    dimension, or an irreversible reply where `irreversible` is masked, is rejected token by token;
    the same reply is accepted when nothing is masked, and the empty one is accepted under the mask."""
    from transformers import AutoTokenizer

    from harness.providers.embedded import ensure_converted
    from preft.constrain import Grammars

    tok = AutoTokenizer.from_pretrained(str(ensure_converted()))
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    grammars = Grammars(tok, len(tok), frozenset({stop}))

    def accepted(schema, text):
        c = grammars.constraint("json_schema", schema)
        return all(c.accept(t) for t in tok(text, add_special_tokens=False)["input_ids"]) and c.complete

    bad, _ = wm_format.target_parts(Delta(created=["order:1"], reversible=False, irreversible_cost=3))
    empty, _ = wm_format.target_parts(Delta())
    bad, empty = bad + "0.9}", empty + "0.9}"
    masked = wm_format.prediction_schema({"attributes"})
    assert accepted(wm_format.prediction_schema(None), bad)
    assert not accepted(masked, bad)
    assert not accepted(wm_format.prediction_schema({"created"}), bad)  # created allowed, irreversible not
    assert accepted(wm_format.prediction_schema({"created", "irreversible"}), bad)
    assert accepted(masked, empty)


@pytest.fixture(scope="module")
def whole(tiny, tmp_path_factory):
    """One uninterrupted tiny training (6 steps, checkpoints every 2), shared by the tests below."""
    from environments.cdwm.wm_train import train

    data, base = tiny
    out = tmp_path_factory.mktemp("whole")
    return train(_tiny_config(data, base), out), out


def test_sft_lowers_validation_loss_and_exports_an_adapter(whole):
    from preft.adapters import load_adapter

    result, _ = whole
    assert result.step == 6 and result.examples == 48
    # deterministic (seeded, CPU): an adapter that learns nothing leaves the loss where it was
    assert result.val_loss_last < result.val_loss_first - 0.02, (result.val_loss_first, result.val_loss_last)
    adapter = load_adapter(result.adapter)  # the local engine's loader reads what peft saved
    assert adapter.rank == 4 and adapter.modules
    mask = LearnedMask.load(result.adapter)
    assert set(mask.gates) == {f"toy/{c}" for c in TRUE_STRUCTURE}


def test_resume_continues_at_the_saved_step(tiny, whole, tmp_path):
    from safetensors.torch import load_file

    from environments.cdwm.wm_train import checkpoints, train

    data, base = tiny
    killed = train(_tiny_config(data, base), tmp_path / "killed", stop_after=3)  # dies after step 3; checkpoint at 2
    assert [p.name for p in checkpoints(tmp_path / "killed")] == ["step-000002"]
    resumed = train(_tiny_config(data, base), tmp_path / "killed")
    assert killed.step == 3 and resumed.resumed_from == 2 and resumed.step == 6
    assert [e["step"] for e in resumed.log if "loss" in e] == [1, 2, 3, 4, 5, 6]
    a = load_file(str(whole[0].adapter / "adapter_model.safetensors"))
    b = load_file(str(resumed.adapter / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    g1 = json.loads((whole[0].adapter / "cdwm_mask.json").read_text())["gates"]
    g2 = json.loads((resumed.adapter / "cdwm_mask.json").read_text())["gates"]
    assert g1.keys() == g2.keys() and all(abs(g1[c][d] - g2[c][d]) < 1e-3 for c in g1 for d in DIMENSIONS)


def test_bad_input_names_the_file(tiny, whole, tmp_path):
    from environments.cdwm.wm_train import train

    data, base = tiny
    rows = {"train": synthetic_rows(8, 0, "train")}
    rows["train"][5]["delta"] = json.dumps({"created": "not a list"})
    bad = write_dataset(tmp_path / "bad", rows=rows)
    with pytest.raises(
        HarnessError, match=r"\.arrow: row 5 of split 'train': its delta does not match the Delta schema"
    ):
        train(_tiny_config(bad, base), tmp_path / "o1")
    _, out = whole  # its newest checkpoint: step-000006
    other = tiny_base(tmp_path / "other", seed=1)
    with pytest.raises(HarnessError, match=r"step-000006/state\.pt: made on another base model"):
        train(_tiny_config(data, other, steps=8), out)
    with pytest.raises(HarnessError, match=r"state\.pt: made with other training settings \(lr\)"):
        train(_tiny_config(data, base, steps=8, lr=1e-3), out)


def test_evaluate_scores_masks_and_refuses_another_worlds_adapter(tiny, tmp_path):
    from environments.cdwm.wm_eval import evaluate

    data, _ = tiny
    right = tmp_path / "right"
    right.mkdir()
    gates = {f"toy/{c}": {d: (0.9 if d in dims else 0.1) for d in DIMENSIONS} for c, dims in TRUE_STRUCTURE.items()}
    LearnedMask(gates).save(right)
    report = evaluate(data, None, right)
    scores = report["splits"]["validation"]["mask"]
    assert scores["learned"]["precision"] == scores["learned"]["recall"] == 1.0
    assert scores["none"]["precision"] < 0.5
    other = tmp_path / "other"
    other.mkdir()
    LearnedMask({"minigrid/left": {d: 0.9 for d in DIMENSIONS}}).save(other)
    with pytest.raises(HarnessError, match=r"other/cdwm_mask\.json: trained for action classes minigrid/left"):
        evaluate(data, None, other)
