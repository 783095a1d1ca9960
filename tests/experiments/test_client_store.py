from fedpref.client.worker import EncodedClient
from fedpref.data.splits import ClientSplits
from fedpref.experiments.client_store import OnDemandClients
from fedpref.models.encoded import EncodedPairs


def fake_encode(split: ClientSplits) -> EncodedClient:
    empty = EncodedPairs(seqs=[], num_pairs=0)
    return EncodedClient(split.client_id, split.group, empty, empty, empty)


def store(resident: int) -> OnDemandClients:
    splits = [ClientSplits(f"c{i}", None, [], [], []) for i in range(5)]
    return OnDemandClients(splits, fake_encode, resident)


def test_keeps_at_most_resident_clients_and_reencodes_evicted_ones():
    clients = store(resident=2)
    assert list(clients) == ["c0", "c1", "c2", "c3", "c4"] and len(clients) == 5
    for cid in ("c0", "c1", "c0", "c2"):  # c1 is the least recently used when c2 arrives
        clients[cid]
    assert list(clients.cache) == ["c0", "c2"]
    assert clients.encodings == 3
    clients["c1"]
    assert clients.encodings == 4 and list(clients.cache) == ["c2", "c1"]


def test_private_memory_survives_eviction():
    clients = store(resident=1)
    clients["c0"].memory["logits"] = [1.0, 2.0]
    clients["c1"]  # evicts c0
    assert "c0" not in clients.cache
    assert clients["c0"].memory == {"logits": [1.0, 2.0]}


def test_on_demand_clients_give_the_same_run_as_resident_ones():
    import torch

    from fedpref.algorithms.registry import build_algorithm
    from fedpref.config import load_config
    from fedpref.experiments.runner import run_global
    from fedpref.experiments.setup import build_setup

    states = []
    for resident in (0, 2):
        cfg = load_config("tiny", ["federation.rounds=1", f"data.resident_clients={resident}"])
        setup = build_setup(cfg)
        algorithm = build_algorithm("FL", cfg, setup.infos, setup.init_state, setup.model)
        run_global(algorithm, cfg, setup)
        states.append(algorithm.global_state)
    assert isinstance(setup.clients, OnDemandClients) and len(setup.clients.cache) <= 2
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
