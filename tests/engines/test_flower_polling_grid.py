"""The deployed server's Grid: Flower's send_and_receive with a short pull interval, on a fake grid."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("flwr")

from fedpref.engines.flower import polling_grid  # noqa: E402
from fedpref.engines.flower.polling_grid import PollingGrid  # noqa: E402


class FakeGrid:
    """Replies to message i come at pull number `ready[i]` (never if None)."""

    def __init__(self, ready: list[int | None]):
        self.ready, self.pulls = ready, 0

    def push_messages(self, messages):
        return [f"m{i}" for i, _ in enumerate(messages)]

    def pull_messages(self, message_ids):
        self.pulls += 1
        due = [i for i, at in enumerate(self.ready) if at == self.pulls and f"m{i}" in set(message_ids)]
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=f"m{i}")) for i in due]


@pytest.fixture
def sleeps(monkeypatch):
    """Every sleep, recorded, and a clock that each sleep moves forward."""
    clock, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(polling_grid.time, "sleep", sleep)
    monkeypatch.setattr(polling_grid.time, "monotonic", lambda: clock[0])
    return slept


def replied(replies) -> list[str]:
    return sorted(r.metadata.reply_to_message_id for r in replies)


def test_it_pulls_at_its_own_interval_until_every_reply_is_in(sleeps):
    fake = FakeGrid([1, 3, 2])
    grid = PollingGrid(fake, pull_interval_s=0.2)
    assert replied(grid.send_and_receive(["a", "b", "c"], timeout=60)) == ["m0", "m1", "m2"]
    assert fake.pulls == 3 and sleeps == [0.2, 0.2]  # Flower's own grid would have slept 3 s twice


def test_a_missing_reply_ends_the_wait_at_the_timeout(sleeps):
    fake = FakeGrid([1, None])
    grid = PollingGrid(fake, pull_interval_s=0.5)
    assert replied(grid.send_and_receive(["a", "b"], timeout=2.0)) == ["m0"]
    assert sum(sleeps) == pytest.approx(2.0) and fake.pulls == 5  # pulls at 0, 0.5, 1, 1.5 and 2 s


def test_a_pull_interval_must_be_positive():
    with pytest.raises(ValueError, match="pull interval"):
        PollingGrid(FakeGrid([]), pull_interval_s=0.0)
