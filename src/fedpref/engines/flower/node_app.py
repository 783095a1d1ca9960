"""The deployed ClientApp: a light front (flwr only, no torch) that hands each message to its node's long-lived
worker (`node_worker`), started by the first message.

A SuperNode starts a fresh ClientApp process for every message (flwr 1.42), so the heavy ClientApp
(`client_app`) would import torch, transformers and peft and load the model for each one. Here the worker keeps
them: one per SuperNode process and run config, reached over a Unix socket in a folder only this user can read,
ending with its SuperNode. Context.state still lives in the SuperNode (it travels to the worker and back with each
message), SecAgg+'s mod still runs here, and what the node answers is `client_app.answer_message`'s reply.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Client, Connection
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedpref.engines.flower.appconfig import resolve_config_path
from fedpref.engines.flower.mods import secure_when_asked
from fedpref.engines.flower.wire import content_from_bytes, content_to_bytes

START_TIMEOUT_S = 120.0


def worker_folder(context: Context) -> Path:
    """The node config's `worker-dir`, else a folder of this user's in the temporary directory (mode 0700)."""
    configured = context.node_config.get("worker-dir")
    folder = (
        Path(str(configured)).expanduser() if configured else Path(tempfile.gettempdir()) / f"fedpref-{os.getuid()}"
    )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def worker_name(context: Context, supernode_pid: int) -> str:
    """One worker per SuperNode process and run: a restarted node, or another run's config, gets a new one."""
    what = json.dumps([dict(context.node_config), dict(context.run_config), supernode_pid], sort_keys=True)
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def connect(context: Context, supernode_pid: int | None = None) -> Connection:
    """A connection to the node's worker, starting it first when there is none (one starter at a time). The worker
    lives as long as `supernode_pid`: by default this process's parent, the SuperNode's executor
    (flower-superexec), which ends with its SuperNode."""
    supernode_pid = supernode_pid or os.getppid()
    folder = worker_folder(context)
    name = worker_name(context, supernode_pid)
    address, key_file = folder / f"{name}.sock", folder / f"{name}.key"
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (conn := try_connect(address, key_file)) is not None:
            return conn
        start_worker(address, key_file, supernode_pid, folder / f"{name}.log")
    deadline = time.monotonic() + START_TIMEOUT_S
    while (conn := try_connect(address, key_file)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node's worker did not start within {START_TIMEOUT_S} s (see {folder / name}.log)")
        time.sleep(0.05)
    return conn


def try_connect(address: Path, key_file: Path) -> Connection | None:
    if not address.exists() or not key_file.exists():
        return None
    try:
        return Client(str(address), family="AF_UNIX", authkey=key_file.read_bytes())
    except (ConnectionRefusedError, FileNotFoundError):
        return None


def start_worker(address: Path, key_file: Path, supernode_pid: int, log: Path) -> None:
    """A detached worker process (its own session: it outlives this ClientApp process, not the SuperNode)."""
    address.unlink(missing_ok=True)  # a socket left by a worker that died
    key_file.write_bytes(secrets.token_bytes(32))
    key_file.chmod(0o600)
    cmd = [sys.executable, "-m", "fedpref.engines.flower.node_worker", str(address), str(key_file), str(supernode_pid)]
    with log.open("a") as out:
        subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def worker_run_config(context: Context) -> dict:
    """The run config with `config-path` resolved here: a relative one may name a file of the installed app
    (FAB), whose folder is on this process's import path and not on the worker's."""
    run_config = dict(context.run_config)
    if run_config.get("config-path"):
        run_config["config-path"] = str(resolve_config_path(str(run_config["config-path"])).resolve())
    return run_config


def forward(msg: Message, context: Context) -> Message:
    """The node's reply to `msg`, computed by its worker; Context.state comes back with the task's changes."""
    return ask_worker(connect(context), msg, context)


def ask_worker(conn: Connection, msg: Message, context: Context) -> Message:
    request = (
        content_to_bytes(msg.content),
        msg.metadata.message_type,
        content_to_bytes(context.state),
        dict(context.node_config),
        worker_run_config(context),
    )
    with conn:
        conn.send(request)
        status, reply, state = conn.recv()
    if status != "ok":
        raise RuntimeError(f"the node's worker failed:\n{reply}")
    updated = content_from_bytes(state)
    for key in list(context.state.keys()):
        del context.state[key]
    for key, record in updated.items():
        context.state[key] = record
    return Message(content_from_bytes(reply), reply_to=msg)


app = ClientApp()
app.train(mods=[secure_when_asked])(forward)
for register in (app.evaluate(), app.query("personalize"), app.query("restore_memory"), app.query("partition")):
    register(forward)
