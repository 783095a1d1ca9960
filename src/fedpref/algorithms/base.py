"""The engine-independent contract between a server algorithm and the clients that serve it.

An algorithm never calls a client. Each round, the engine asks it for tasks
(`next_tasks`), carries each task to its client, and hands the replies back
(`receive`); it asks again until the algorithm returns no tasks, so a round
may have several stages (e.g. evaluate all experts, then train). After the
last round the engine asks once more with `round == num_rounds` (a final
stage, e.g. FedGD's last reassignment). Then `initialization(client)` gives
each client its starting point for personalization.

Clients held out of the global phase (`held_out`, the FedVPA-GP paper's unseen clients) are never
sampled for training; a method that picks a model per client asks them too in its final stage, so
they start from a model chosen on their own validation data without any update.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedpref.protocol import Aggregate, ClientInfo, Reply, State, Task


class Algorithm:
    """Server logic of one method; subclasses implement the three hooks below (the others are optional)."""

    name = "base"
    phase_end_rounds: Sequence[int] = ()  # rounds after which one of the method's phases ends (checkpointed)
    has_selector = False  # a latent-conditioned selector, evaluated by `selector_tasks` after the rounds
    latent_trace: list[dict]  # a latent-conditioned selector's per-round client latent means (FedVPA family)

    def __init__(self, clients: list[ClientInfo], init_state: State, num_rounds: int):
        self.clients = clients
        self.by_id = {c.client_id: c for c in clients}
        self.init_state = init_state
        self.num_rounds = num_rounds
        self.held_out: list[str] = []  # client ids evaluated in the final stage only (never trained)
        self.history: list[dict] = []  # per-round records for the log (sampled clients, assignments, ...)

    def next_tasks(self, round_idx: int) -> list[Task]:
        """Tasks for the next stage of `round_idx`; an empty list ends the round."""
        raise NotImplementedError

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        """Aggregate the replies to the tasks of the stage just run."""
        raise NotImplementedError

    def receive_aggregate(self, round_idx: int, aggregate: Aggregate) -> None:
        """Take the securely summed replies of a stage whose tasks carry SECURE_WEIGHT (only methods whose server
        step is a weighted sum of the states hand out such tasks)."""
        raise NotImplementedError(f"{self.name} does not aggregate securely")

    def initialization(self, client_id: str) -> State:
        """The model client `client_id` starts personalization from."""
        raise NotImplementedError

    def server_models(self) -> list[State]:
        """The reward model(s) the server holds now, for the loop's periodic evaluation (federation.eval_every):
        each is evaluated by the round's participants with an EVALUATE task. None by default (no evaluation)."""
        return []

    def privacy_spent(self) -> dict | None:
        """The (epsilon, delta) the method's releases have spent under client-level DP; None without DP."""
        return None

    def selector_tasks(self, client_ids: list[str]) -> list[Task]:
        """A latent-conditioned selector's own evaluation of each of `client_ids` (FedVPA-GP paper, Tables 1-2),
        as tasks; none for the other methods."""
        return []

    def summarize_selector(self, replies: list[Reply]) -> dict:
        """The selector evaluation's summary from the replies to `selector_tasks`."""
        raise NotImplementedError

    def final_stage_clients(self) -> list[str]:
        """Every client that evaluates the models in a final selection stage: the trained ones, then the held out."""
        return [c.client_id for c in self.clients] + self.held_out
