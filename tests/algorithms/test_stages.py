"""StagedAlgorithm: the stage state machine FedGD, FedBiscuit and Soft-FL share."""

import copy

from fake_clients import FakeClients, infos, state

from fedpref.algorithms.stages import StagedAlgorithm, evaluate_models
from fedpref.protocol import EVALUATE, TRAIN, Task


class TwoStages(StagedAlgorithm):
    """Round r < R evaluates first when r is even, then trains; the final round R evaluates only."""

    name = "two-stages"

    def __init__(self):
        super().__init__(infos({"a": 1, "b": 1}), state(0.0), num_rounds=2)
        self.seen: list[tuple[int, str, list[str]]] = []

    def stages(self, r):
        if r >= self.num_rounds:
            return ["evaluate"] if r == self.num_rounds else []
        return (["evaluate"] if r % 2 == 0 else []) + ["train"]

    def stage_tasks(self, r, stage):
        if stage == "evaluate":
            return evaluate_models(self.final_stage_clients(), [self.init_state], stage)
        return [Task("a", TRAIN, [self.init_state], steps=1, tag=stage)]

    def stage_replies(self, r, stage, replies):
        self.seen.append((r, stage, [x.client_id for x in replies]))


def test_each_stage_once_in_order_with_its_own_replies():
    alg, fake = TwoStages(), FakeClients(targets={"a": 0.0, "b": 0.0})
    fake.run(alg)
    assert alg.seen == [
        (0, "evaluate", ["a", "b"]),
        (0, "train", ["a"]),
        (1, "train", ["a"]),
        (2, "evaluate", ["a", "b"]),
    ]
    assert [t.action for _, t in fake.tasks] == [EVALUATE, EVALUATE, TRAIN, TRAIN, EVALUATE, EVALUATE]
    assert alg.next_tasks(2) == [] and alg.next_tasks(3) == []


def test_resumes_mid_round_from_its_attributes():
    first, fake = TwoStages(), FakeClients(targets={"a": 0.0, "b": 0.0})
    fake.stage(first, 0)  # round 0's evaluation done, its training not yet issued
    second = TwoStages()
    vars(second).update(copy.deepcopy(vars(first)))
    assert [t.action for t in fake.stage(second, 0)] == [TRAIN]
    assert [s for _, s, _ in second.seen] == ["evaluate", "train"]
