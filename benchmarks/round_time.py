"""Seconds per FedAvg round of one config on the three engines (in-process, Flower's Simulation Engine, a
loopback deployment with one SuperNode per client file), the same deployment with the per-message ClientApp
(benchmarks/per_message_app: the baseline before the node worker) and the deployment's per-message floor (an
empty ClientApp's round trip, benchmarks/empty_app), measured in the same run.

    python benchmarks/round_time.py [--rounds 4] [--clients 4] [--pairs 6] [--out DIR]

Each engine runs FL on the same per-user files (configs/quick/tiny.toml's synthetic data, `--clients` users),
every client in every round, no personalization steps. A round's time is the median over rounds 1.. of
`wall_s` in rounds.jsonl (round 0 also pays for start-up). The breakdown of a deployment round: the floor
(process start of an empty app and Flower's polling), the in-process round (our training and evaluation
work), and the rest (our light ClientApp's start-up and its round trip to the node's worker; with the
per-message app: imports, model and data load, whose two parts the script also times in a process of their
own, twice). Flower's one poll setting is read
from the environment: FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1 python benchmarks/round_time.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedpref.apps import federation as fed
from fedpref.engines.flower.appconfig import DEFAULT_PULL_INTERVAL_S as PULL_INTERVAL_S

ROOT = Path(__file__).resolve().parents[1]


def fedpref(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "fedpref.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"fedpref {' '.join(args[:2])} failed:\n{(done.stdout + done.stderr)[-3000:]}")


def sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def round_seconds(run: Path) -> list[float]:
    return [json.loads(line)["wall_s"] for line in (run / "rounds.jsonl").read_text().splitlines()]


def median_after_first(seconds: list[float]) -> float:
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


START_UP = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from fedpref.config import load_config
from fedpref.engines.flower.client_app import build_local_node
t1 = time.perf_counter()
build_local_node(load_config("tiny", sys.argv[2:]), Path(sys.argv[1]))
print(t1 - t0, time.perf_counter() - t1)
"""


def client_start_up(client_file: Path, run: list[str]) -> tuple[float, float]:
    """(import s, node s) of what the per-message ClientApp process does first for every message, alone on the
    machine: import fedpref's ClientApp, then build the node from its own file (read, split, load the model,
    encode). The node worker pays this once per node."""
    argv = [sys.executable, "-c", START_UP, str(client_file), *run]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    imports, node = done.stdout.split()[-2:]
    return float(imports), float(node)


def empty_app_floor(clients: int, rounds: int, work: Path, pull_interval_s: float) -> list[float]:
    """Seconds per round of the empty app on a loopback deployment with `clients` SuperNodes, its server pulling
    replies every `pull_interval_s` seconds (0: Flower's own send_and_receive, 3 s)."""
    env, link = fed.loopback_env(work / "flwr")
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    processes = [fed.start_superlink(link, env, logs, logs / "superlink.log")]
    out = work / "floor.json"
    try:
        for i in range(clients):
            processes.append(fed.start_supernode(link, f'name="n{i}"', env, logs, logs / f"node-{i}.log"))
        config = f'rounds={rounds} nodes={clients} out-file="{out}" pull-interval={pull_interval_s}'
        app = ROOT / "benchmarks" / "empty_app"
        done = subprocess.run(
            [str(fed.BIN / "flwr"), "run", str(app), "loopback", "--run-config", config],
            env=env,
            cwd=logs,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise SystemExit(f"flwr run (empty app) failed:\n{(done.stdout + done.stderr)[-3000:]}")
        fed.wait_until(out.is_file, 600, "the empty app's rounds")
        time.sleep(0.5)  # the file is written in one call; let it land
        return json.loads(out.read_text())["seconds"]
    finally:
        fed.stop(processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4, help="client files = SuperNodes (at most 4)")
    parser.add_argument("--pairs", type=int, default=6, help="data.pairs_per_axis of each client")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="round_time_"))
    sizes = [1] * args.clients + [0] * (4 - args.clients)
    data = [f"data.group_sizes={sizes}", f"data.pairs_per_axis={args.pairs}", "data.val_pairs=2", "data.test_pairs=2"]
    data += [f"federation.clients_per_round={args.clients}"]
    pooled, clients = work / "pooled.jsonl", work / "clients"
    fedpref("data", "export", "tiny", *sets(data), "--out", str(pooled))
    fedpref("data", "split-clients", str(pooled), "--out", str(clients), "--user-key", "client")
    run = [*data, "data.source=jsonl", f"data.path={pooled}", f"federation.rounds={args.rounds}"]
    run += ["algorithm.methods=['FL']", "personalization.steps=[0]"]

    seconds = {}
    for engine in ("inprocess", "flower"):
        out = work / engine
        fedpref("run", "tiny", "--out", str(out), "--engine", engine, *sets(run))
        seconds[engine] = round_seconds(out)
    loopback = ["--clients-dir", str(clients), "--out", str(work / "loopback")]
    fedpref("federation", "tiny", *loopback, *sets(run))
    seconds["loopback"] = round_seconds(work / "loopback")
    per_message = work / "per_message"  # the baseline: every message's process imports and loads everything
    config = ROOT / "src/fedpref/configs/quick/tiny.toml"
    fed.run_federation(config, clients, per_message, ["FL"], run, app=ROOT / "benchmarks" / "per_message_app")
    seconds["per_message"] = round_seconds(per_message)
    seconds["floor_flower"] = empty_app_floor(args.clients, args.rounds, work / "floor_flower", 0.0)
    seconds["floor"] = empty_app_floor(args.clients, args.rounds, work / "floor", PULL_INTERVAL_S)
    start_ups = [client_start_up(fed.client_files(clients)[0], run) for _ in range(2)]

    med = {name: median_after_first(s) for name, s in seconds.items()}
    print(f"FedAvg, {args.clients} clients a round, {args.pairs} pairs per axis, {args.rounds} rounds ({work})")
    print(f"{'engine':<28}{'s/round':>9}{'vs in-process':>15}   rounds")
    labels = {
        "inprocess": "in-process",
        "flower": "Simulation Engine",
        "loopback": "loopback deployment",
        "per_message": "loopback, per-message app",
        "floor_flower": "empty app, Flower's pulls",
        "floor": f"empty app, pulls {PULL_INTERVAL_S} s",
    }
    for name, label in labels.items():
        extra = "" if name == "inprocess" else f"{med[name] - med['inprocess']:+.2f}"
        print(f"{label:<28}{med[name]:>9.2f}{extra:>15}   {[round(s, 2) for s in seconds[name]]}")
    rest = med["loopback"] - med["floor"] - med["inprocess"]
    print(
        f"loopback round = floor {med['floor']:.2f} + in-process work {med['inprocess']:.2f} + "
        f"the rest (our ClientApp's start-up and the worker's round trip) {rest:.2f} s"
    )
    print(f"Simulation Engine overhead per round: {med['flower'] - med['inprocess']:.2f} s (goal <= 0.3)")
    for floor in ("floor", "floor_flower"):
        goal = med[floor] + med["inprocess"]
        print(f"loopback round {med['loopback']:.2f} s against {labels[floor]} + in-process = {goal:.2f} s")
    print(f"node worker against the per-message app: {med['per_message'] / med['loopback']:.2f}x faster rounds")
    for imports, node in start_ups:
        print(f"the per-message ClientApp's start-up alone in one process: imports {imports:.2f} s, node {node:.2f} s")


if __name__ == "__main__":
    main()
