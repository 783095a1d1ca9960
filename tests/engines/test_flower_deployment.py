"""A real loopback deployment: one SuperLink and two SuperNodes on 127.0.0.1, two rounds of FedAvg."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.flower, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NODES = 2
OVERRIDES = "data.group_sizes=[1, 1, 0, 0]; federation.rounds=2; federation.clients_per_round=2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def wait_for_results(path: Path, method: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and method in (results := json.loads(path.read_text()))["methods"]:
            return results
        time.sleep(2)
    raise TimeoutError(f"no results for {method} in {path} after {timeout_s} s")


def start(args: list[str], log: Path, env: dict, cwd: Path) -> subprocess.Popen:
    """A process in its own session, so that stopping its group also stops the app processes it starts."""
    out = log.open("w")
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), including app processes started in sessions of their own."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return children + [d for c in children for d in descendants(c)]


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to every started process's group and all their descendants; SIGKILL a group still up after 15 s."""
    below = [d for p in processes for d in descendants(p.pid)]
    for p in processes:
        signal_group(p.pid, signal.SIGTERM)
    for pid in below:
        signal_pid(pid, signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            signal_group(p.pid, signal.SIGKILL)
            p.wait(timeout=15)


def signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def signal_pid(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def test_loopback_deployment_runs_two_rounds_of_fedavg(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "FLWR_HOME": str(tmp_path / "flwr")}
    env |= {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
    link = free_port()
    (tmp_path / "flwr").mkdir()
    (tmp_path / "flwr" / "config.toml").write_text(
        f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    processes = []
    try:
        superlink = [str(BIN / "flower-superlink"), "--insecure", "--port", str(link)]
        processes.append(
            start(superlink + ["--disable-runtime-dependency-installation"], tmp_path / "link.log", env, tmp_path)
        )
        wait_for_port(link, 60)
        for i in range(NODES):
            node = [str(BIN / "flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link}"]
            node += ["--port", str(free_port()), "--node-config", f"partition-id={i} num-partitions={NODES}"]
            processes.append(start(node, tmp_path / f"node{i}.log", env, tmp_path))
        out = tmp_path / "out"
        # A relative config-path: the nodes run in tmp_path, so it resolves inside the installed app (FAB).
        run_config = f'config-path="configs/tiny.toml" method="FL" out-dir="{out}" overrides="{OVERRIDES}"'
        submit = [str(BIN / "flwr"), "run", str(ROOT), "loopback", "--run-config", run_config]
        subprocess.run(submit, env=env, cwd=tmp_path, check=True, timeout=120, capture_output=True)
        results = wait_for_results(out / "results.json", "FL", timeout_s=600)
    finally:
        stop(processes)
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [0, 1]
    assert all(r["dropped"] == [] and sorted(r["sampled"]) == ["c000", "c001"] for r in rounds)
    fl = results["methods"]["FL"]
    assert fl["engine"] == "flower"
    assert sorted(fl["personalization"]["per_client"]) == ["c000", "c001"]
    assert len(fl["personalization"]["acc_mean"]) == 2  # configs/tiny.toml: steps [0, 2]
    assert all(p.poll() is not None for p in processes)
