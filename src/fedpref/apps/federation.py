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
from dataclasses import dataclass
from pathlib import Path

from fedpref.config import find_config
from fedpref.errors import FedprefError
from fedpref.results import FAILED, RunResults, load_results, results_path

BIN = Path(sys.executable).parent
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
Report = Callable[[str], None]


@dataclass(frozen=True)
class Tls:
    """PEM files for TLS on every SuperLink API: the CA that signed the server certificate (what nodes and
    the `flwr` CLI trust), the certificate (its SANs must name the address nodes dial) and its key."""

    ca: Path
    cert: Path
    key: Path


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
    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, timeout_s, f"the SuperLink listening on 127.0.0.1:{port}")


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.5) -> None:
    """Poll `condition` until it holds; a FedprefError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise FedprefError(f"{what}: not within {timeout_s} s")
        time.sleep(poll_s)


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


def processes_of(flwr_home: Path) -> list[int]:
    """Processes running with this federation's FLWR_HOME: every process it started inherits it, also those
    that left the started ones' process trees (a node's worker, in a session of its own)."""
    mark = f"FLWR_HOME={flwr_home}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0") and running(int(environ.parent.name)):
                found.append(int(environ.parent.name))
        except OSError:
            pass
    return found


def stop_stragglers(flwr_home: Path, grace_s: float = 5.0) -> None:
    """Wait for the federation's remaining processes (node workers end with their SuperNode); SIGKILL the rest."""
    deadline = time.monotonic() + grace_s
    while (left := processes_of(flwr_home)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
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


def loopback_env(flwr_home: Path, tls: Tls | None = None) -> tuple[dict, int]:
    """(environment, SuperLink port) of a loopback federation whose flwr state lives in `flwr_home`: a
    `loopback` connection in its config.toml (trusting `tls.ca`, or insecure without TLS), telemetry and
    run-time installs off, this venv's commands first."""
    link = free_port()
    flwr_home.mkdir(parents=True, exist_ok=True)
    trust = f'root-certificates = "{tls.ca.resolve()}"' if tls else "insecure = true"
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\naddress = "127.0.0.1:{link}"\n{trust}\n'
    )
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, **QUIET, "PATH": path, "FLWR_HOME": str(flwr_home)}, link


def share_of_cores(env: dict, nodes: int) -> dict:
    """`env` for one of `nodes` SuperNodes sharing this machine: torch's threads set to its share of the cores
    (unless OMP_NUM_THREADS is set already), so the nodes' concurrent training does not oversubscribe them."""
    if "OMP_NUM_THREADS" in env:
        return env
    return {**env, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // max(nodes, 1)))}


def start_superlink(
    link: int, env: dict, cwd: Path, log: Path, tls: Tls | None = None, node_auth: bool = False
) -> subprocess.Popen:
    """A SuperLink on 127.0.0.1:`link`, once it listens: with `tls`, TLS on every API, and with `node_auth`
    (needs TLS) only SuperNodes whose public key was registered (`register_node`) may connect; without
    `tls`, insecure (loopback only)."""
    cmd = [str(BIN / "flower-superlink"), "--port", str(link), "--disable-runtime-dependency-installation"]
    if tls:
        cmd += ["--ssl-ca-certfile", str(tls.ca), "--ssl-certfile", str(tls.cert), "--ssl-keyfile", str(tls.key)]
    else:
        cmd.append("--insecure")
    if node_auth:
        cmd.append("--enable-supernode-auth")
    process = start(cmd, log, env, cwd)
    wait_for_port(link, 60)
    return process


def start_supernode(
    link: int,
    node_config: str,
    env: dict,
    cwd: Path,
    log: Path,
    root_certificates: Path | None = None,
    private_key: Path | None = None,
) -> subprocess.Popen:
    """A SuperNode dialing 127.0.0.1:`link`: over TLS trusting `root_certificates` (else insecure), signing
    its requests with `private_key` (an OpenSSH EC key; what SuperNode authentication checks) if given."""
    cmd = [str(BIN / "flower-supernode"), "--superlink", f"127.0.0.1:{link}", "--port", str(free_port())]
    cmd += ["--root-certificates", str(root_certificates)] if root_certificates else ["--insecure"]
    cmd += ["--auth-supernode-private-key", str(private_key)] if private_key else []
    return start([*cmd, "--node-config", node_config], log, env, cwd)


def register_node(public_key: Path, env: dict) -> str:
    """Admit the SuperNode holding the private half of `public_key` (OpenSSH) to the `loopback` SuperLink;
    returns the node id it will have."""
    return str(flwr_json(["supernode", "register", str(public_key), "loopback"], env)["node-id"])


def list_nodes(env: dict) -> list[dict]:
    """The `loopback` SuperLink's nodes: `node-id`, `status` ('registered', 'online', 'offline', ...) and times."""
    return flwr_json(["supernode", "ls", "loopback"], env)["nodes"]


def flwr_json(args: list[str], env: dict) -> dict:
    """`flwr ARGS --format json`, parsed; a failure is a FedprefError with what it printed."""
    done = subprocess.run(
        [str(BIN / "flwr"), *args, "--format", "json"], env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise FedprefError(f"`flwr {' '.join(args[:2])}` failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    return json.loads(done.stdout[done.stdout.index("{") :])


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
    resume: bool = False,
    app: Path | None = None,
) -> dict:
    """Run `methods` of `config` on a loopback federation, one SuperNode per file of `clients_dir` (each reads
    only its own file and keeps its private memory snapshots in its own folder); the ServerApp writes
    config.toml, rounds.jsonl, the results and its checkpoints into `out`, and the processes' logs go to
    `out/logs`. With `resume`, a fresh federation continues the run in `out` from its last complete checkpoint
    (after any of its processes was killed). `app`: another Flower app folder (default: fedpref's). Returns
    the results (as written)."""
    files, logs = client_files(clients_dir), out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env, link = loopback_env(out / "flwr")
    node_env = share_of_cores(env, len(files))
    processes: list[subprocess.Popen] = []
    try:
        processes.append(start_superlink(link, env, logs, logs / "superlink.log"))
        for path in files:
            home = out / "nodes" / path.stem  # the node's working folder: no data (it reads only its own file)
            home.mkdir(parents=True, exist_ok=True)
            own = f'data-path="{path.resolve()}" memory-dir="{(home / "memory").resolve()}"'
            processes.append(start_supernode(link, own, node_env, home, logs / f"node-{path.stem}.log"))
        report(f"started a SuperLink on 127.0.0.1:{link} and {len(files)} SuperNodes (logs: {logs})")
        submit(config, len(files), out, methods, overrides, env, logs, resume, app)
        return wait_for_results(results_path(out), methods, processes, timeout_s, report)
    finally:
        stop(processes)
        stop_stragglers(out / "flwr")
        report("stopped every process of the federation")


def submit(
    config: Path,
    clients: int,
    out: Path,
    methods: list[str],
    overrides: list[str],
    env: dict,
    cwd: Path,
    resume: bool = False,
    app: Path | None = None,
) -> None:
    run_config = f'config-path="{find_config(config).resolve()}" method="{",".join(methods)}" clients={clients} '
    run_config += "resume=true " if resume else ""
    quoted = "; ".join(overrides).replace("\\", "\\\\").replace('"', '\\"')  # inside a TOML string
    run_config += f'out-dir="{out.resolve()}" overrides="{quoted}"'
    cmd = [str(BIN / "flwr"), "run", str(app or app_dir()), "loopback", "--run-config", run_config]
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise FedprefError(f"`flwr run` failed: {(done.stdout + done.stderr).strip()[-1500:]}")


def wait_for_results(
    path: Path, methods: list[str], processes: list[subprocess.Popen], timeout_s: float, report: Report
) -> dict:
    """The results at `path` once they hold every method; an error when the run failed, a process of the
    federation ends or time runs out."""
    deadline, done = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        results = load_results(path) if path.is_file() else RunResults()
        if len(results.methods) > done:
            done = len(results.methods)
            report(f"{done}/{len(methods)} methods done")
        if all(name in results.methods for name in methods):
            return results.to_dict()
        if results.status == FAILED:
            raise FedprefError(f"{path}: the run failed ({results.error}; see {path.parent / 'logs'})")
        if ended := [p.args[0] for p in processes if p.poll() is not None]:
            raise FedprefError(
                f"{', '.join(map(str, ended))} ended before the run finished (see {path.parent / 'logs'})"
            )
        time.sleep(2)
    raise FedprefError(f"no results for every method in {path} after {timeout_s} s (see {path.parent / 'logs'})")
