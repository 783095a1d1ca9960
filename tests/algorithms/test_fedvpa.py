"""FedVPA-GP / FedVPL server (Algorithm 1), client step (Algorithm 2), evaluation, and a 2-round smoke run."""

import dataclasses
import json
import logging
import math

import pytest
import torch

from fedpref.algorithms.fedvpa import VARIANTS, FedVPA, FedVPAStudy, Settings, algorithm_class, spec_from_config
from fedpref.algorithms.registry import check_methods, method_options, method_spec
from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.client.variational import GUMBEL_KEY, LossSettings
from fedpref.client.worker import EncodedClient, Trainers, handle_task
from fedpref.config import VariationalConfig, VPADiagnosisConfig, load_config
from fedpref.data.splits import split_clients
from fedpref.data.synthetic import generate_synthetic_with_axes
from fedpref.engines.inprocess import InProcessTransport
from fedpref.engines.loop import run_rounds
from fedpref.errors import ConfigError
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.models.variational import VariationalSpec, variational_model
from fedpref.models.variational_math import init_prototypes
from fedpref.protocol import EVALUATE_SELECTOR, TRAIN_VARIATIONAL, ClientInfo, Reply, Task

D = 4
# The paper's literal steps (the sampled z, one lr, no centring or scaling), as these tests were written for.
PAPER = {"selector_reads": "sample", "base_lr_scale": 1.0, "center_latents": False, "scale_latents": False}
SPEC = VariationalSpec.from_config(VariationalConfig(latent_dim=D, feature_dim=8, **PAPER), VPADiagnosisConfig(), 0)
OPTION_KEYS = {f.name for f in dataclasses.fields(VariationalConfig)}


# ---------------------------------------------------------------- server logic with hand-made replies


def server(prior="mixture", orthogonal=True, per_round=4, ids=("a", "b", "c", "d"), **settings) -> FedVPA:
    infos = [ClientInfo(c, 10, "G1" if c in "ab" else "G2") for c in ids]
    init = {"w": torch.zeros(2), "prototypes": init_prototypes(2, D, 5.0, torch.Generator().manual_seed(0))}
    options = {**PAPER, **{k: settings.pop(k) for k in OPTION_KEYS & set(settings)}}  # the rest: the study's
    options, study = VariationalConfig(latent_dim=D, feature_dim=8, **options), VPADiagnosisConfig(**settings)
    settings = Settings.from_config(prior, orthogonal, options, study)
    return algorithm_class(study)(infos, init, 3, per_round, 2, 0, SPEC, settings)


def reply(task: Task, mu: list[float], var: list[float] | None = None, w: float = 1.0) -> Reply:
    state = {"w": torch.full((2,), float(w)), "prototypes": task.models[0]["prototypes"]}
    metrics = {"train_loss": 0.5, "latent_mu": mu, "latent_var": var or [1.0] * len(mu)}
    return Reply(task.client_id, 10, state=state, metrics=metrics)


def means(sign: float) -> list[float]:
    return [sign * 5.0] + [0.0] * (D - 1)


def test_first_round_has_no_prior_then_the_participants_become_the_prior():
    algo = server()
    tasks = algo.next_tasks(0)
    assert all(t.action == TRAIN_VARIATIONAL and "prior" not in t.payload for t in tasks)
    assert all(t.payload["prototype"] is None for t in tasks)
    json.dumps([t.payload for t in tasks])  # small, JSON-able
    algo.receive(0, [reply(t, means(1 if t.client_id in "ab" else -1), w=i) for i, t in enumerate(tasks)])
    assert float(algo.global_state["w"][0]) == pytest.approx(1.5)  # uniform average of 0, 1, 2, 3
    tasks = algo.next_tasks(1)
    prior = tasks[0].payload["prior"]
    assert sorted(prior["ids"]) == ["a", "b", "c", "d"] and len(prior["mu"][0]) == D
    protos = {t.client_id: t.payload["prototype"] for t in tasks}
    assert protos["a"] == protos["b"] != protos["c"] == protos["d"]


def test_prototype_labels_follow_the_prototypes_not_the_arbitrary_kmeans_labels():
    algo = server()
    tasks = algo.next_tasks(0)
    p = algo.global_state["prototypes"]
    near = {"a": p[0], "b": p[0], "c": p[1], "d": p[1]}
    algo.receive(0, [reply(t, (near[t.client_id] + 0.1).tolist()) for t in tasks])
    assert algo.prototype_of == {"a": 0, "b": 0, "c": 1, "d": 1}


def test_a_client_absent_last_round_gets_its_nearest_centroid_or_none():
    algo = server(per_round=2)
    algo.last_mean["a"] = means(1)
    algo.receive(0, [])  # an empty round keeps everything
    algo.update_prior(0, {"c": (means(1), [1.0] * D), "d": (means(-1), [1.0] * D)})
    assert algo.prototype_index("a") == algo.prototype_of["c"]
    assert algo.prototype_index("b") is None


def test_all_clients_assignment_clusters_every_clients_latest_mean():
    algo = server(per_round=2, assignment="all_clients")
    algo.update_prior(0, {"a": (means(1), [1.0] * D), "c": (means(-1), [1.0] * D)})
    algo.update_prior(1, {"b": (means(1), [1.0] * D), "d": (means(-1), [1.0] * D)})
    assert sorted(algo.prototype_of) == ["a", "b", "c", "d"]  # the literal rule would label only b and d
    assert algo.prototype_of["a"] == algo.prototype_of["b"] != algo.prototype_of["c"] == algo.prototype_of["d"]
    paper = server(per_round=2)
    paper.update_prior(0, {"a": (means(1), [1.0] * D), "c": (means(-1), [1.0] * D)})
    paper.update_prior(1, {"b": (means(1), [1.0] * D), "d": (means(-1), [1.0] * D)})
    assert sorted(paper.prototype_of) == ["b", "d"]


def test_oracle_assignment_labels_clients_by_their_true_type():
    algo = server(assignment="oracle")
    assert [algo.prototype_index(c) for c in "abcd"] == [0, 0, 1, 1]


def test_balanced_sampling_hears_each_label_equally_every_round():
    ids = ("a", "b", "c", "d", "e", "f")  # G1: a, b; G2: c, d, e, f
    algo = server(per_round=2, ids=ids, sampling="by_true_type")
    types = {"a": "G1", "b": "G1"}
    for r in range(20):
        assert sorted(types.get(c, "G2") for c in algo.sample(r)) == ["G1", "G2"]
    labelled = server(per_round=2, ids=ids, sampling="by_prototype")
    labelled.prototype_of = {"a": 0, "b": 0, "c": 1, "d": 1, "e": 1, "f": 1}
    for r in range(20):
        assert sorted(labelled.prototype_of[c] for c in labelled.sample(r)) == [0, 1]
    with pytest.raises(ValueError, match="sampling must be one of"):
        server(sampling="stratified")


def test_the_centre_is_the_mean_of_every_clients_latest_mean_and_reaches_training_and_evaluation():
    algo = server(per_round=2, center_latents=True)
    assert "center" not in algo.next_tasks(0)[0].payload  # nothing heard yet: z is read as is
    algo.update_prior(0, {"a": ([2.0] * D, [1.0] * D), "c": ([0.0] * D, [1.0] * D)})
    algo.update_prior(1, {"a": ([4.0] * D, [1.0] * D)})  # a's latest mean replaces its first
    assert algo.next_tasks(1)[0].payload["center"] == [2.0] * D
    assert algo.selector_tasks(["b"])[0].payload["center"] == [2.0] * D
    assert "center" not in server(per_round=2).selector_tasks(["b"])[0].payload
    scaled = server(per_round=2, center_latents=True, scale_latents=True)
    scaled.update_prior(0, {"a": ([3.0] * D, [1.0] * D), "c": ([-1.0] * D, [1.0] * D)})
    payload = scaled.next_tasks(1)[0].payload
    assert payload["center"] == [1.0] * D and payload["scale"] == pytest.approx(2.0)  # per-axis RMS of +-2


def test_round_records_carry_the_mean_loss_terms_and_gradient_norms():
    algo = server()
    tasks = algo.next_tasks(0)
    replies = [reply(t, means(1)) for t in tasks]
    for i, r in enumerate(replies):
        r.metrics.update(recon=0.5, kl=1.0, orth=2.0, grad_base=float(i), grad_latent_path=2.0 * i)
    algo.receive(0, replies)
    assert algo.history[-1]["grad_base"] == pytest.approx(1.5) and algo.history[-1]["grad_latent_path"] == 3.0
    assert algo.history[-1]["recon"] == 0.5


def test_nan_statistics_are_skipped_and_logged_and_never_enter_the_prior(caplog):
    algo = server()
    tasks = algo.next_tasks(0)
    bad = {tasks[0].client_id: [math.nan] * D, tasks[1].client_id: [1.0, math.inf, 0.0, 0.0]}
    with caplog.at_level(logging.WARNING):
        algo.receive(0, [reply(t, bad.get(t.client_id, means(1))) for t in tasks])
    assert "non-finite latent statistics" in caplog.text
    assert sorted(algo.prior["ids"]) == sorted(t.client_id for t in tasks[2:])
    assert all(math.isfinite(x) for row in algo.prior["mu"] for x in row)
    assert algo.history[-1]["skipped_statistics"] == [tasks[0].client_id, tasks[1].client_id]


def test_all_nan_round_falls_back_to_the_standard_prior(caplog):
    algo = server()
    tasks = algo.next_tasks(0)
    with caplog.at_level(logging.WARNING):
        algo.receive(0, [reply(t, [math.nan] * D) for t in tasks])
    assert algo.prior is None and "N(0, I)" in caplog.text
    assert all("prior" not in t.payload for t in algo.next_tasks(1))


def test_mismatched_latent_sizes_are_an_error():
    algo = server()
    tasks = algo.next_tasks(0)
    with pytest.raises(ValueError, match="sizes 3/3; the latent size is 4"):
        algo.receive(0, [reply(t, [0.0] * 3) for t in tasks])


def test_fedvpl_never_sends_a_prior_or_a_prototype():
    algo = server(prior="standard", orthogonal=False)
    for r in range(2):
        tasks = algo.next_tasks(r)
        assert all("prior" not in t.payload and t.payload["prototype"] is None for t in tasks)
        algo.receive(r, [reply(t, means(1)) for t in tasks])
    assert algo.next_tasks(1) == []  # one training stage per round


def test_variants_and_initialization_keep_only_the_reward_model_part():
    assert VARIANTS["FedVPA-GP"] == ("mixture", True) and VARIANTS["FedVPL"] == ("standard", False)
    algo = server()
    algo.global_state = {"base.head.weight": torch.ones(1), "prototypes": torch.zeros(2, D)}
    assert list(algo.initialization("a")) == ["head.weight"]


# ---------------------------------------------------------------- real clients (MiniLM, top layer only)


@pytest.fixture(scope="module")
def world():
    """The humor axis of the style benchmark: 2 clients of G1 (humorous) and 2 of G2 (non-humorous)."""
    cfg = load_config(
        None,
        [
            "algorithm.methods=['FedVPA-GP']",
            "lora.top_layers=1",
            "lora.rank=4",
            "data.max_length=64",
            "federation.rounds=2",
            "federation.clients_per_round=2",
            "train.local_steps=2",
            "variational.latent_dim=8",
            "variational.feature_dim=16",
        ],
    )
    pairs = [p for p, axis in generate_synthetic_with_axes([2, 2, 0, 0], 8, 0) if axis == "humor"]
    model = build_reward_model(cfg)
    encode = model.encode
    clients = {
        s.client_id: EncodedClient(s.client_id, s.group, encode(s.train), encode(s.val), encode(s.test))
        for s in split_clients(pairs, 1, 2, 0)
    }
    infos = [ClientInfo(c.client_id, len(c.train), c.group) for c in clients.values()]
    trainer = LocalTrainer(model, OptimConfig(lr=1e-3, batch_size=4))
    return cfg, model, clients, infos, trainer


def test_a_client_uploads_exactly_2d_floats_and_keeps_its_gumbel_logits(world):
    cfg, model, clients, infos, trainer = world
    algo = method_spec("FedVPA-GP").build(cfg, infos, trainable_state(model), model)
    client = clients[infos[0].client_id]
    prior = {"ids": ["x", "y"], "mu": [[1.0] * 8, [-1.0] * 8], "var": [[0.5] * 8, [2.0] * 8]}
    task = Task(client.client_id, TRAIN_VARIATIONAL, [algo.global_state], 2, "t", algo.payload(prior, 1))
    out = handle_task(task, client, trainer, torch.Generator().manual_seed(0))
    assert len(out.metrics["latent_mu"]) + len(out.metrics["latent_var"]) == 2 * 8
    assert all(isinstance(x, float) for x in out.metrics["latent_mu"] + out.metrics["latent_var"])
    assert out.num_examples == len(client.train) and out.tag == "t"
    assert out.state.keys() == algo.global_state.keys()
    assert set(client.memory[GUMBEL_KEY]) == {"x", "y"}
    assert any(v != 0.0 for v in client.memory[GUMBEL_KEY].values())  # learned locally
    assert all("gumbel" not in k for k in out.state)  # never uploaded


def test_a_part_at_lr_scale_zero_stays_as_received(world):
    cfg, model, clients, infos, trainer = world
    algo = method_spec("FedVPA-GP").build(cfg, infos, trainable_state(model), model)
    client = clients[infos[0].client_id]
    payload = algo.payload(None, None)
    payload["loss"] = {**payload["loss"], "base_lr_scale": 0.0}
    task = Task(client.client_id, TRAIN_VARIATIONAL, [algo.global_state], 2, None, payload)
    out = handle_task(task, client, trainer, torch.Generator().manual_seed(0))
    changed = {k for k, v in out.state.items() if not torch.equal(v, algo.global_state[k])}
    assert changed and not any(k.startswith("base.") for k in changed)
    assert out.metrics["grad_base"] > 0 and out.metrics["grad_latent_path"] > 0  # measured, though not applied
    payload["loss"] = {**payload["loss"], "base_lr_scale": 1.0, "inference_lr_scale": 0.0}
    task = Task(client.client_id, TRAIN_VARIATIONAL, [algo.global_state], 2, None, payload)
    out = handle_task(task, client, trainer, torch.Generator().manual_seed(0))
    changed = {k.split(".")[0] for k, v in out.state.items() if not torch.equal(v, algo.global_state[k])}
    assert changed == {"base", "latent", "projection"}  # the inference network and prototypes stay
    payload["loss"] = {**payload["loss"], "inference_lr_scale": 1.0}
    task = Task(client.client_id, TRAIN_VARIATIONAL, [algo.global_state], 2, None, {**payload, "latent_warmup": True})
    out = handle_task(task, client, trainer, torch.Generator().manual_seed(0))
    changed = {k.split(".")[0] for k, v in out.state.items() if not torch.equal(v, algo.global_state[k])}
    assert changed == {"features", "posterior", "prototypes"}  # warm-up: the inference network alone


def test_warmup_rounds_are_flagged_to_the_clients_and_recorded():
    algo = server(latent_warmup_rounds=2)
    for r in range(3):
        tasks = algo.next_tasks(r)
        assert all(bool(t.payload.get("latent_warmup")) == (r < 2) for t in tasks)
        algo.receive(r, [reply(t, means(1)) for t in tasks])
    assert [h.get("latent_warmup", False) for h in algo.history] == [True, True, False]


def test_every_local_step_reads_z_with_the_servers_centre_and_scale(world, monkeypatch):
    # A loop variable once shadowed the scale after the first step (z read as z / 5 from step 2 on).
    cfg, model, clients, infos, trainer = world
    algo = method_spec("FedVPA-GP").build(cfg, infos, trainable_state(model), model)
    client = clients[infos[0].client_id]
    selector = variational_model(model, algo.spec)
    seen, original = [], selector.training_outputs

    def recording(enc, index, generator, oracle_z=None, center=None, scale=1.0):
        seen.append((None if center is None else center.tolist(), scale))
        return original(enc, index, generator, oracle_z, center, scale)

    monkeypatch.setattr(selector, "training_outputs", recording)
    for payload_extra, expected in (({}, (None, 1.0)), ({"center": [0.5] * 8, "scale": 2.0}, ([0.5] * 8, 2.0))):
        seen.clear()
        payload = {**algo.payload(None, 0), **payload_extra}
        handle_task(
            Task(client.client_id, TRAIN_VARIATIONAL, [algo.global_state], 3, None, payload),
            client,
            trainer,
            torch.Generator().manual_seed(0),
        )
        assert seen == [expected] * 3


def test_two_round_smoke_run_of_fedvpa_gp(world):
    cfg, model, clients, infos, trainer = world
    algo = method_spec("FedVPA-GP").build(cfg, infos, trainable_state(model), model)
    records = run_rounds(algo, InProcessTransport(clients, Trainers(trainer, trainer, seed=0)))
    assert [r["round"] for r in records] == [0, 1]
    assert records[0]["prior_components"] == 0 and records[1]["prior_components"] == 2
    assert records[1]["prototype_index"] and all(r["train_loss"] is not None for r in records)
    assert len(algo.latent_trace) == 2
    tasks = algo.selector_tasks(list(clients))
    assert {t.action for t in tasks} == {EVALUATE_SELECTOR} and all(t.steps == 0 for t in tasks)
    before = {k: v.clone() for k, v in algo.global_state.items()}
    replies = [handle_task(t, clients[t.client_id], trainer, torch.Generator()) for t in tasks]
    assert all(r.state is None for r in replies)  # an evaluation: nothing but metrics travels back
    assert all(torch.equal(before[k], v) for k, v in algo.global_state.items())
    result = algo.summarize_selector(replies)
    assert set(result["by_group"]) == {"G1", "G2"}
    assert 0.0 <= result["acc_mean"] <= 100.0
    assert result["separation"]["silhouette"] is not None
    assert math.isfinite(result["collapse"]["kl_standard_mean"]) and result["collapse"]["mean_spread"] >= 0
    assert set(algo.initialization(infos[0].client_id)) == set(trainable_state(model))


def test_config_validation_names_the_variational_key():
    with pytest.raises(ConfigError, match="variational.conditioning"):
        load_config(None, ["variational.conditioning='multiplicative'"])
    with pytest.raises(ConfigError, match="variational.assignment"):
        load_config(None, ["variational.assignment='random'"])
    with pytest.raises(ConfigError, match="variational.base_lr_scale"):
        load_config(None, ["variational.base_lr_scale=-1"])
    with pytest.raises(ConfigError, match="model.head"):
        load_config(None, ["algorithm.methods=['FedVPL']", "model.head='selector'"])


def test_the_model_and_the_loss_see_the_defaults_of_variational_config():
    """VariationalConfig (and the study's VPADiagnosisConfig) hold the only defaults: the spec the model is built
    from and the loss settings a client reads take each field from them, by name."""
    cfg = load_config(None, ["algorithm.methods=['FedVPA-GP']"])
    options, study = VariationalConfig(), VPADiagnosisConfig()
    assert method_options(cfg, "FedVPA-GP") == options and cfg.vpa_diagnosis == study
    spec = spec_from_config(cfg)
    loss = LossSettings(**Settings.from_config("mixture", True, options, study).loss_payload())
    for seen in (spec, loss):
        for f in dataclasses.fields(seen):
            table = next((t for t in (options, study) if hasattr(t, f.name)), None)
            if f.name in ("seed", "orthogonal", "z_path_lr_scale"):  # the run's seed, the variant, the warm-up's
                assert table is None, f.name
            else:
                assert getattr(seen, f.name) == getattr(table, f.name), f.name
    # where the lower dataclasses' own defaults once said otherwise (the paper's literal steps)
    assert spec.selector_reads == "mean" and loss.base_lr_scale == 0.1
    for lower in (VariationalSpec, Settings, LossSettings):  # no default of their own to disagree with
        assert [f.name for f in dataclasses.fields(lower) if f.default is not dataclasses.MISSING] in (
            [],
            ["z_path_lr_scale"],
        )


def test_the_fedvpa_family_reads_its_options_from_one_table():
    cfg = load_config(None, ["variational.beta=0.5", "algorithm.methods=['FedVPL','FedVPA-GP']"])
    assert {name: method_options(cfg, name).beta for name in VARIANTS} == dict.fromkeys(VARIANTS, 0.5)
    with pytest.raises(
        ConfigError, match=r"'algorithm.options.FedVPA-GP': FedVPA-GP's options are the \[variational\]"
    ):
        check_methods(load_config(None, ["algorithm.options.FedVPA-GP.beta=0.5"]))
    with pytest.raises(ConfigError, match="vpa_diagnosis.assignment"):
        load_config(None, ["vpa_diagnosis.assignment='random'"])


def test_the_study_s_server_switches_live_in_their_own_class():
    """The method runs as FedVPA, whose tasks never carry the study's flags; a [vpa_diagnosis] switch gives
    FedVPAStudy, which adds them."""
    assert algorithm_class(VPADiagnosisConfig()) is FedVPA
    assert algorithm_class(VPADiagnosisConfig(latent_source="oracle")) is FedVPAStudy
    plain, study = server(), server(oracle_from_round=1)
    assert type(plain) is FedVPA and type(study) is FedVPAStudy
    assert not {"oracle_blind", "latent_warmup"} & set(plain.next_tasks(0)[0].payload)
    assert [study.next_tasks(r)[0].payload.get("oracle_blind") for r in range(2)] == [True, None]
