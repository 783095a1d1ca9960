"""A deployed node's long-lived worker: builds its client (data, model, encodings) once and answers every message
the node's per-message ClientApp processes hand it (`node_app`), so a node pays the imports and the model load once.

    python -m fedpref.engines.flower.node_worker ADDRESS KEY_FILE SUPERNODE_PID

It listens on the Unix socket ADDRESS (only a client holding the key in KEY_FILE, readable by this user alone,
may talk to it) and exits when the SuperNode with SUPERNODE_PID is gone or after IDLE_EXIT_S without a message.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from multiprocessing.connection import Listener
from pathlib import Path

IDLE_EXIT_S = 1800.0
WATCH_EVERY_S = 0.25


def alive(pid: int) -> bool:
    """Whether `pid` runs (on Linux a zombie, a finished process nobody has reaped, does not)."""
    if not Path("/proc").is_dir():  # no procfs (macOS): whether the id exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def watch(supernode_pid: int, last_message: list[float], address: Path, key_file: Path) -> None:
    """Exit (removing the socket and the key) once the SuperNode has gone or nothing came for IDLE_EXIT_S."""
    while alive(supernode_pid) and time.monotonic() - last_message[0] < IDLE_EXIT_S:
        time.sleep(WATCH_EVERY_S)
    address.unlink(missing_ok=True)
    key_file.unlink(missing_ok=True)
    os._exit(0)


def handle(request: tuple) -> tuple:
    """(content, message type, Context.state, node config, run config), all but the type as bytes or dicts ->
    ("ok", reply content, Context.state after the task) or ("error", the traceback, b"")."""
    from flwr.app import Context

    from fedpref.engines.flower import client_app
    from fedpref.engines.flower.wire import content_from_bytes, content_to_bytes

    content, message_type, state, node_config, run_config = request
    try:
        context = Context(0, 0, node_config, content_from_bytes(state), run_config)
        reply = client_app.answer_message(
            content_from_bytes(content), message_type, client_app.run_config_source, context
        )
        return "ok", content_to_bytes(reply), content_to_bytes(context.state)
    except Exception:  # noqa: BLE001 - the ClientApp process re-raises it, so Flower reports the task failed
        return "error", traceback.format_exc(), b""


def serve(address: Path, key_file: Path, supernode_pid: int) -> None:
    listener = Listener(str(address), family="AF_UNIX", authkey=key_file.read_bytes())
    last_message = [time.monotonic()]
    threading.Thread(target=watch, args=(supernode_pid, last_message, address, key_file), daemon=True).start()
    while True:
        try:
            with listener.accept() as conn:
                conn.send(handle(conn.recv()))
        except (EOFError, OSError) as e:  # a ClientApp process that went away mid-request (its node was killed)
            print(f"fedpref node worker: a request was lost ({e})", file=sys.stderr, flush=True)
        last_message[0] = time.monotonic()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
