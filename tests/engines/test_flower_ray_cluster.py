"""The [flower] section: per-client Ray resources, and a simulation run on an existing (loopback) Ray cluster."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from fedpref.config import load_config
from fedpref.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TINY = next(p for p in (ROOT / "src/fedpref/configs/quick/tiny.toml", ROOT / "configs/tiny.toml") if p.is_file())
RAY = Path(sys.executable).with_name("ray")


def test_backend_config_reads_the_flower_section(monkeypatch) -> None:
    from fedpref.engines.flower import run

    default = run.backend_config(load_config(TINY))
    assert default == {"client_resources": {"num_cpus": 1.0, "num_gpus": 0.0}, "init_args": {"logging_level": "ERROR"}}
    cfg = load_config(TINY, ["flower.num_cpus=0.5", "flower.num_gpus=0.25", "flower.ray_address=127.0.0.1:6379"])
    on_cpu = run.backend_config(cfg)
    assert on_cpu["client_resources"] == {"num_cpus": 0.5, "num_gpus": 0.0}  # no GPU fraction on a CPU device
    assert on_cpu["init_args"] == {"logging_level": "ERROR", "address": "127.0.0.1:6379"}
    monkeypatch.setattr(run, "resolve_device", lambda device: "cuda:0")
    assert run.backend_config(cfg)["client_resources"] == {"num_cpus": 0.5, "num_gpus": 0.25}  # four share a GPU
    assert run.backend_config(cfg, cpus_per_client=2.0)["client_resources"]["num_cpus"] == 2.0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("flower.num_cpus=0", "'flower.num_cpus' must be > 0"),
        ("flower.num_gpus=1.5", "'flower.num_gpus' must be a fraction of one GPU in [0, 1]"),
        ("flower.num_gpus=-0.5", "'flower.num_gpus' must be a fraction of one GPU in [0, 1]"),
        ("flower.ray_address='localhost'", "'flower.ray_address' must be empty, 'auto', or a Ray cluster's HOST:PORT"),
    ],
)
def test_bad_flower_values_are_named(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"--set {override}") as raised:
        load_config(TINY, [override])
    assert message in str(raised.value)


def test_flower_section_changes_no_digest() -> None:
    """Where the clients run changes no number, so runs on a cluster compare with (and resume) local ones."""
    base = load_config(TINY)
    moved = load_config(TINY, ["flower.num_cpus=2", "flower.ray_address=auto"])
    assert moved.digest() == base.digest() and "flower" not in base.to_dict()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(mark: str) -> list[str]:
    """The command lines of running raylet / gcs_server processes that name `mark` (this test's Ray temp dir)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if mark in line and ("raylet" in line or "gcs_server" in line)]


def alive_nodes(address: str) -> int:
    script = f"import ray; ray.init(address={address!r}, logging_level='ERROR'); "
    script += "print(sum(n['Alive'] for n in ray.nodes()))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0


@pytest.fixture
def loopback_cluster():
    """A Ray head and a second node, each with one CPU, bound to 127.0.0.1, no dashboard; its address."""
    if not RAY.exists():
        pytest.skip("no ray command beside this Python")
    temp = tempfile.mkdtemp(prefix="fpray", dir="/tmp")  # short: Ray's socket paths live under it
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--num-gpus=0", "--block", "--disable-usage-stats"]
    head = [str(RAY), "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"]
    head += [f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}"]
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(subprocess.Popen([*head, *common], env=env, start_new_session=True))
        deadline = time.monotonic() + 120
        while alive_nodes(address) < 1:
            assert time.monotonic() < deadline, "the Ray head did not come up"
            time.sleep(1)
        worker = [str(RAY), "start", f"--address={address}", f"--dashboard-agent-listen-port={free_port()}"]
        nodes.append(subprocess.Popen([*worker, *common], env=env, start_new_session=True))
        while alive_nodes(address) < 2:
            assert time.monotonic() < deadline, "the second Ray node did not join"
            time.sleep(1)
        yield address
    finally:
        for node in reversed(nodes):  # each `ray start --block` stops what it started on SIGTERM
            os.killpg(node.pid, signal.SIGTERM)
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        deadline = time.monotonic() + 30
        while ours(temp) and time.monotonic() < deadline:
            time.sleep(1)
        left = ours(temp)
        for node in nodes:  # anything still in the sessions started here (ours only: never `ray stop`)
            try:
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray processes left behind: {left}"


@pytest.mark.slow
@pytest.mark.flower
def test_simulation_on_a_ray_cluster_matches_in_process(loopback_cluster, monkeypatch, tmp_path) -> None:
    pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.engines.flower import client_app
    from fedpref.engines.flower.run import run_simulated
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    overrides = ["federation.rounds=2", "algorithm.methods=['FL']"]
    cfg = load_config(TINY, [*overrides, f"flower.ray_address={loopback_cluster}"])
    setup, (train_opt, pers_opt) = build_setup(cfg), optim_configs(cfg)
    init = {k: v.clone() for k, v in setup.init_state.items()}  # the in-process run below trains setup.model
    reference = build_algorithm("FL", cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
    reference_log = run_rounds(reference, InProcessTransport(setup.clients, trainers))

    pids = tmp_path / "pids"
    pids.mkdir()
    original = client_app.answer_message

    def recording(content, message_type, *args, **kwargs):  # pickled by value into the Ray workers
        if message_type != "query.partition":
            (pids / str(os.getpid())).touch()
        return original(content, message_type, *args, **kwargs)

    monkeypatch.setattr(client_app, "answer_message", recording)

    def body(transport):
        peers = transport.peers
        algorithm = build_algorithm("FL", cfg, peers.trained(), init, setup.model, peers.held_out)
        transport.begin_method("FL")
        return algorithm, run_rounds(algorithm, transport)

    algorithm, log = run_simulated(cfg, body)

    def without_timing(records: list[dict]) -> list[dict]:
        from fedpref.engines.loop import MEASURED  # wall_s, its split and peak memory: the machine's, not the run's

        return [{k: v for k, v in r.items() if k not in ("train_loss", *MEASURED)} for r in records]

    assert without_timing(log) == without_timing(reference_log)
    assert [r["train_loss"] for r in log] == pytest.approx([r["train_loss"] for r in reference_log], rel=1e-5)
    assert list(algorithm.global_state) == list(reference.global_state)
    for key, value in reference.global_state.items():
        torch.testing.assert_close(algorithm.global_state[key], value, rtol=1e-5, atol=1e-6, msg=key)
    workers = {int(p.name) for p in pids.iterdir()}
    assert os.getpid() not in workers
    assert len(workers) >= 2, f"clients ran in {len(workers)} Ray worker process(es): {workers}"
