"""A local federation in one command: a SuperLink and one SuperNode per client file on loopback ports, the
run submitted with `flwr run`, every process stopped at the end (also on Ctrl-C and on error)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fedpref.errors import FedprefError

BIN = Path(sys.executable).parent
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
Report = Callable[[str], None]


def app_dir() -> Path:
    """The Flower app (the folder with this project's pyproject.toml) that `flwr run` builds and installs."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file():
        raise FedprefError(
            "`fedpref federation` needs fedpref's source checkout (its pyproject.toml is the Flower app)"
        )
    return root


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
    raise FedprefError(f"the SuperLink does not listen on 127.0.0.1:{port} after {timeout_s} s")


def start(args: list[str], log: Path, env: dict, cwd: Path) -> subprocess.Popen:
    """A process in its own session, so that stopping its group also stops the app processes it starts."""
    return subprocess.Popen(
        args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
    )


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), including app processes started in sessions of their own."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return children + [d for c in children for d in descendants(c)]


def stop(processes: list[subprocess.Popen], grace_s: float = 15.0) -> None:
    """SIGTERM to every started process's group and all their descendants, then wait until each is gone;
    SIGKILL what is still up after `grace_s`."""
    below = [d for p in processes for d in descendants(p.pid)]
    for pid in [p.pid for p in processes]:
        _signal(os.killpg, pid, signal.SIGTERM)
    for pid in below:
        _signal(os.kill, pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in processes:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _signal(os.killpg, p.pid, signal.SIGKILL)
            p.wait(timeout=grace_s)
    while (alive := [pid for pid in below if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in alive:
        _signal(os.kill, pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (a finished process not yet reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _signal(send: Callable[[int, int], None], pid: int, sig: signal.Signals) -> None:
    try:
        send(pid, sig)
    except ProcessLookupError:
        pass


def loopback_env(flwr_home: Path) -> tuple[dict, int]:
    """(environment, SuperLink port) of a loopback federation whose flwr state lives in `flwr_home`: a
    `loopback` connection in its config.toml, telemetry and run-time installs off, this venv's commands first."""
    link = free_port()
    flwr_home.mkdir(parents=True, exist_ok=True)
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, **QUIET, "PATH": path, "FLWR_HOME": str(flwr_home)}, link


def start_superlink(link: int, env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    """A SuperLink on 127.0.0.1:`link` without TLS (loopback only), once it listens."""
    cmd = [
        str(BIN / "flower-superlink"),
        "--insecure",
        "--port",
        str(link),
        "--disable-runtime-dependency-installation",
    ]
    process = start(cmd, log, env, cwd)
    wait_for_port(link, 60)
    return process


def start_supernode(link: int, node_config: str, env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    cmd = [str(BIN / "flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link}", "--port", str(free_port())]
    return start([*cmd, "--node-config", node_config], log, env, cwd)


def client_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.suffix in (".jsonl", ".gz")) if folder.is_dir() else []
    if not files:
        raise FedprefError(f"{folder}: no client files (*.jsonl; write them with `fedpref data split-clients`)")
    return files


def run_federation(
    config: Path,
    clients_dir: Path,
    out: Path,
    methods: list[str],
    overrides: list[str],
    timeout_s: float = 3600.0,
    report: Report = print,
) -> dict:
    """Run `methods` of `config` on a loopback federation, one SuperNode per file of `clients_dir` (each reads
    only its own file); the ServerApp writes config.toml, rounds.jsonl and results.json into `out`, and the
    processes' logs go to `out/logs`. Returns results.json."""
    files, logs = client_files(clients_dir), out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env, link = loopback_env(out / "flwr")
    processes: list[subprocess.Popen] = []
    try:
        processes.append(start_superlink(link, env, logs, logs / "superlink.log"))
        for path in files:
            home = out / "nodes" / path.stem  # the node's working folder: empty, it reads only its own file
            home.mkdir(parents=True, exist_ok=True)
            own = f'data-path="{path.resolve()}"'
            processes.append(start_supernode(link, own, env, home, logs / f"node-{path.stem}.log"))
        report(f"started a SuperLink on 127.0.0.1:{link} and {len(files)} SuperNodes (logs: {logs})")
        submit(config, len(files), out, methods, overrides, env, logs)
        return wait_for_results(out / "results.json", methods, processes, timeout_s, report)
    finally:
        stop(processes)
        report("stopped every process of the federation")


def submit(
    config: Path, clients: int, out: Path, methods: list[str], overrides: list[str], env: dict, cwd: Path
) -> None:
    run_config = f'config-path="{config.resolve()}" method="{",".join(methods)}" clients={clients} '
    quoted = "; ".join(overrides).replace("\\", "\\\\").replace('"', '\\"')  # inside a TOML string
    run_config += f'out-dir="{out.resolve()}" overrides="{quoted}"'
    cmd = [str(BIN / "flwr"), "run", str(app_dir()), "loopback", "--run-config", run_config]
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise FedprefError(f"`flwr run` failed: {(done.stdout + done.stderr).strip()[-1500:]}")


def wait_for_results(
    path: Path, methods: list[str], processes: list[subprocess.Popen], timeout_s: float, report: Report
) -> dict:
    """results.json once it holds every method; an error when a process of the federation ends or time runs out."""
    deadline, done = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        results = json.loads(path.read_text()) if path.is_file() else {"methods": {}}
        if len(results["methods"]) > done:
            done = len(results["methods"])
            report(f"{done}/{len(methods)} methods done")
        if all(name in results["methods"] for name in methods):
            return results
        if ended := [p.args[0] for p in processes if p.poll() is not None]:
            raise FedprefError(
                f"{', '.join(map(str, ended))} ended before the run finished (see {path.parent / 'logs'})"
            )
        time.sleep(2)
    raise FedprefError(f"no results for every method in {path} after {timeout_s} s (see {path.parent / 'logs'})")
