"""rcaux_pointmaze's pixel setting: the renderer draws the wall with its door and the agent exactly
where the state says (the dot's brightest pixel holds the state, its intensity-weighted centre is
the state), the goal is rendered the same way, every learned arm stays reconstruction-free with the
conv encoder in both regimes, and a bad setting or observation name is one clear error naming it.
The torch test: run under `flock /tmp/harness-torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest

from environments.papers import rcaux, rcaux_model
from environments.papers.rcaux import RCAuxTask, episodes, setting_parts
from environments.papers.rcaux_pixels import CENTRES, IMAGE, PIXEL, WALL_LEVEL, agent_image, render, wall_image


def test_the_wall_is_drawn_beside_x_zero_with_the_door_open():
    wall = wall_image(rcaux_model.DOOR)
    lit = np.argwhere(wall > 0)
    assert set(lit[:, 1]) == {IMAGE // 2 - 1, IMAGE // 2}  # the two columns touching x = 0
    door_rows = np.flatnonzero(np.abs(CENTRES) <= rcaux_model.DOOR)
    assert len(door_rows) == 2 and not wall[door_rows].any()  # the door's rows are open
    assert len(lit) == 2 * (IMAGE - len(door_rows)) and np.all(wall[wall > 0] == WALL_LEVEL)


def test_the_renderer_draws_the_agent_where_the_state_says():
    rng = np.random.default_rng(0)
    p = rng.uniform(-0.5, 0.5, size=(200, 2))  # >= 4 dot widths from the border: nothing is cut off
    images = render(p, rcaux_model.DOOR)
    assert images.shape == (200, IMAGE, IMAGE) and images.dtype == np.float32
    dots = images - wall_image(rcaux_model.DOOR)
    assert np.allclose(dots, agent_image(p), atol=1e-6)  # the image is the wall plus the agent, nothing else
    row, col = np.unravel_index(dots.reshape(200, -1).argmax(1), (IMAGE, IMAGE))
    assert np.all(np.abs(CENTRES[col] - p[:, 0]) <= PIXEL / 2 + 1e-9)  # the brightest pixel holds x ...
    assert np.all(np.abs(CENTRES[row] - p[:, 1]) <= PIXEL / 2 + 1e-9)  # ... and y (row = y)
    mass = dots.sum((1, 2))
    centre = np.stack([(dots * CENTRES[None, None, :]).sum((1, 2)), (dots * CENTRES[None, :, None]).sum((1, 2))], 1)
    assert np.allclose(centre / mass[:, None], p, atol=1e-4)  # sub-pixel position is in the intensities
    assert not np.allclose(render(p[:1] + [0.03, 0.0], rcaux_model.DOOR), images[:1])  # less than a pixel shows
    # the goal is seen the way observations are: the same image for the same position
    assert np.array_equal(rcaux_model.observe(p[:3], 9, "pixels"), images[:3])


def test_a_bad_setting_or_observation_name_is_one_clear_error():
    assert setting_parts("pixels_continued") == ("pixels", "continued")
    with pytest.raises(ValueError, match=r"unknown setting 'pixel_scratch': use one of \('scratch', "):
        episodes("pixel_scratch", 0)
    with pytest.raises(ValueError, match="unknown setting 'rgb'"):
        RCAuxTask().solve_cell("rgb", 0, "one_step")
    with pytest.raises(ValueError, match=r"unknown observation 'rgb': use one of \('fourier', 'pixels'\)"):
        rcaux_model.observe(np.zeros(2), 0, "rgb")
    with pytest.raises(ValueError, match="unknown observation 'rgb'"):
        rcaux_model.trained_model(0, "rcaux", "scratch", 1, "rgb")
    # every setting pairs with every other by seed: the same episodes
    for s in rcaux.SETTINGS:
        assert all(np.array_equal(a, b) for a, b in zip(episodes(s, 3), episodes("scratch", 3)))


def test_every_learned_arm_is_reconstruction_free_from_pixels(monkeypatch):
    import torch

    from tests.environments.papers.test_rcaux import tiny

    tiny(monkeypatch)
    for name, value in (("TRAIN_STEPS", 4), ("BATCH", 8), ("REACH_BATCH", 16)):  # the architecture is the point
        monkeypatch.setattr(rcaux_model, name, value)
    try:
        for variant in rcaux_model.VARIANTS:
            for regime in rcaux_model.REGIMES:
                model = rcaux_model.trained_model(5, variant, regime, 1, "pixels")
                assert set(model) == {"enc", "dyn", "reach"}
                kinds = {type(m).__name__ for m in model.modules()}
                assert not kinds & {"ConvTranspose1d", "ConvTranspose2d", "Upsample", "Unflatten"}
                convs = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
                assert convs and all(n.startswith("enc.") for n in convs)  # only the encoder reads images
                widest = max(m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear))
                assert widest < IMAGE * IMAGE  # no layer outputs an image's worth of numbers
                z = model["enc"](torch.from_numpy(render(np.zeros((2, 3, 2)), rcaux_model.DOOR)))
                assert z.shape == (2, 3, rcaux_model.LATENT)
        start = rcaux_model.pretrained_one_step(5, 1, "pixels")["enc"].conv[0].weight.detach()
        continued = rcaux_model.trained_model(5, "rcaux", "continued", 1, "pixels")["enc"].conv[0].weight
        assert not np.allclose(start.numpy(), continued.numpy())  # the continuation trained on from its start
        task = RCAuxTask()
        cell = task.solve_cell("pixels_scratch", 5, "rcaux")
        assert all(len(a) == 4 for a in cell.answer["actions"])
        assert cell.answer != task.solve_cell("scratch", 5, "rcaux").answer  # the pixels were what it planned from
    finally:
        for cached in (rcaux_model.trained_model, rcaux_model.pretrained_one_step, rcaux_model.training_data):
            cached.cache_clear()
