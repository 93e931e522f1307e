"""The training loop stops on a NaN or infinite loss and names the first bad step; the record of
that step stays on the loss's device until the loop reads it."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from mlm_lib.device import DistInfo
from mlm_lib.loop import TrainingDiverged, _FirstNonFinite, train_loop


def test_the_record_keeps_the_first_bad_step_and_its_loss():
    record = _FirstNonFinite()
    for step, loss in enumerate([1.0, 2.0, float("inf"), float("nan"), 3.0], start=1):
        record.note(torch.tensor(loss), step)
    assert record.step.device.type == "cpu" and record.step.dim() == 0
    with pytest.raises(TrainingDiverged, match=r"loss became inf at step 3$"):
        record.check(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), DistInfo(), 5)


def test_a_finite_run_is_not_stopped():
    record = _FirstNonFinite()
    record.check(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), DistInfo(), 0)  # no step yet
    for step in range(1, 4):
        record.note(torch.tensor(float(step)), step)
    record.check(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), DistInfo(), 3)


@pytest.mark.parametrize("log_every", [1, 4])
def test_the_loop_stops_at_the_bad_step_before_the_optimizer_takes_it(log_every):
    model = nn.Linear(2, 1)
    bad_step = 3

    def objective(m: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
        loss = m(batch["x"]).pow(2).mean() * batch["scale"]
        return loss, {"loss": (loss.detach(), 1)}

    batches = ([{"x": torch.ones(4, 2), "scale": float("nan") if i == bad_step else 1.0}]
               for i in itertools.count(1))
    seen = []
    with pytest.raises(TrainingDiverged, match=rf"loss became nan at step {bad_step}$"):
        train_loop(model, objective, batches, torch.optim.SGD(model.parameters(), lr=0.1), None, 10,
                   log_every=log_every, callbacks=[lambda s: seen.append(s.step)])
    assert seen == list(range(1, bad_step))  # the callbacks never saw the bad step
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_callback_can_ask_whether_the_run_is_still_finite_before_it_saves():
    """Between log steps a GPU loop has not read its record; a checkpointing callback asks first
    (state.check_finite), and the question reads the record. Simulated here: the record is noted
    by hand as a GPU loop would note it, after the loop's own check."""
    model = nn.Linear(2, 1)

    def objective(m: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
        loss = m(batch["x"]).pow(2).mean()
        return loss, {"loss": (loss.detach(), 1)}

    asked = []

    def save(state) -> None:
        state.check_finite()  # finite so far: returns
        asked.append(state.step)

    batches = ([{"x": torch.ones(4, 2)}] for _ in itertools.count())
    state = train_loop(model, objective, batches, torch.optim.SGD(model.parameters(), lr=0.1), None, 3,
                       log_every=10, callbacks=[save])
    assert asked == [1, 2, 3]
    record = _FirstNonFinite()
    record.note(torch.tensor(float("nan")), 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state.check_finite = lambda: record.check(optimizer, DistInfo(), 4)
    with pytest.raises(TrainingDiverged, match="step 4"):
        save(state)
