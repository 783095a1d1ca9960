"""FedDPO (Ye et al., 2024, "OpenFedLLM") on the engine contract: each sampled client runs local DPO of the global
policy, on-policy with its own labels on its own prompts or offline on its own logged pairs; the server averages
the LoRA weights uniformly."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from fedpref.algorithms.aggregation import uniform_average
from fedpref.algorithms.fedavg import FedAvg
from fedpref.engines.inprocess import InProcessTransport
from fedpref.engines.loop import RoundCallback, run_rounds
from fedpref.models.adapters import load_trainable_state
from fedpref.protocol import ClientInfo, Reply, Task, TaskKey
from fedpref.stage2.dpo import DPOSettings, Pair, train_dpo, train_dpo_offline
from fedpref.stage2.generation import Sampling
from fedpref.stage2.judges import Judge
from fedpref.stage2.policy import ConditionalPolicy

TRAIN_DPO = "train_dpo"  # a client's local on-policy DPO from models[0]; payload["seed"] seeds its sampling
# on_client(round, client_id, local steps, their losses, seconds): a client's local DPO is done (a progress line);
# a step whose pairs all tie has no loss
ClientCallback = Callable[[int | str, str, int, list[float], float], None]


class FedDPO(FedAvg):
    """FedAvg's uniform client sampling, with a local on-policy DPO task per client and a uniform average of
    the adapters. A client's sampling seed is `seed + 7919 * round + index` (the pinned Stage-2 losses')."""

    name = "FedDPO"

    def next_tasks(self, round_idx: int) -> list[Task]:
        return [
            Task(t.client_id, TRAIN_DPO, t.models, t.steps, payload={"seed": self.seed + 7919 * round_idx + i})
            for i, t in enumerate(super().next_tasks(round_idx))
        ]

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        if replies:
            self.global_state = uniform_average([x.state for x in replies])
        losses = [loss for x in replies for loss in x.metrics["losses"]]
        self.history[-1]["loss"] = statistics.fmean(losses) if losses else None


@dataclass
class DPOClient:
    """A Stage-2 client: its own prompts and its preference type (the key its labels are judged under), or its
    own logged preference pairs (then its local step is offline DPO on them)."""

    client_id: str
    group: str
    prompts: Sequence[str] = ()
    pairs: Sequence[Pair] = ()

    @property
    def size(self) -> int:
        return len(self.pairs) or len(self.prompts)


@dataclass
class DPOWorker:
    """The client side of FedDPO: one policy (swapped per task), the judge that stands in for a client's own
    labels, and the DPO and sampling settings."""

    policy: ConditionalPolicy
    tokenizer: object
    judge: Judge | None
    settings: DPOSettings
    sampling: Sampling
    on_client: ClientCallback | None = None

    def __call__(self, task: Task, key: TaskKey, client: DPOClient) -> Reply:
        if task.action != TRAIN_DPO:
            raise ValueError(f"a FedDPO client cannot do {task.action!r}")
        start = time.perf_counter()
        load_trainable_state(self.policy, task.models[0])
        local, seed = replace(self.settings, steps=task.steps), task.payload["seed"]
        if client.pairs:
            history = train_dpo_offline(self.policy, client.pairs, local, seed)
        else:
            contexts = {client.group: None}
            history = train_dpo(
                self.policy, self.tokenizer, client.prompts, contexts, self.judge, local, self.sampling, seed
            )
        losses = [h["loss"] for h in history if "loss" in h]
        if self.on_client is not None:
            self.on_client(key.round, client.client_id, len(history), losses, time.perf_counter() - start)
        metrics = {"losses": losses} | ({"train_loss": statistics.fmean(losses)} if losses else {})
        return Reply(client.client_id, client.size, state=self.policy.adapter_state(), metrics=metrics)


@dataclass(frozen=True)
class FedSettings:
    rounds: int = 50  # Table 4, RL training: 50 rounds of 30 local steps
    clients_per_round: int = 5
    local_steps: int = 30


def run_feddpo(
    policy: ConditionalPolicy,
    tokenizer,
    clients: dict[str, DPOClient],
    judge: Judge | None,
    settings: DPOSettings,
    fed: FedSettings,
    sampling: Sampling,
    seed: int,
    on_round: RoundCallback | None = None,
    saved: dict | None = None,
    save: Callable[[dict], None] | None = None,
    on_client: ClientCallback | None = None,
) -> list[dict]:
    """FedDPO over the in-process transport and the engines' round loop (its guards included); each round's
    sampled clients and mean DPO loss. `judge` labels on-policy clients' samples (None when every client holds
    pairs). `policy` should have latent_dim = 0; it ends holding the global adapters. Only the adapters travel.
    `save(state)` after every round (the server's state: FedDPO's clients keep nothing between rounds); `saved`
    (such a state) continues from it. `on_client` hears of each client's local DPO as it ends (a round of
    several clients can take many minutes)."""
    infos = [ClientInfo(cid, client.size) for cid, client in clients.items()]
    algorithm = FedDPO(infos, policy.adapter_state(), fed.rounds, fed.clients_per_round, fed.local_steps, seed)
    if saved:
        vars(algorithm).update(saved["algorithm"])
        torch.set_rng_state(saved["torch_rng"])
    worker = DPOWorker(policy, tokenizer, judge, settings, sampling, on_client)

    def checkpoint(next_round: int) -> None:
        save({"algorithm": vars(algorithm), "next_round": next_round, "torch_rng": torch.get_rng_state()})

    start = saved["next_round"] if saved else 0
    run_rounds(algorithm, InProcessTransport(clients, handler=worker), on_round, start, checkpoint if save else None, 1)
    load_trainable_state(policy, algorithm.global_state)
    return algorithm.history
