"""The empty Flower app: each round the server sends every node an empty query and waits for the replies."""

import json
import time
from pathlib import Path

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

server = ServerApp()  # one name per line: flwr finds components by reading the module's assignments
client = ClientApp()


@client.query()
def echo(msg: Message, context: Context) -> Message:
    return Message(RecordDict(), reply_to=msg)


@server.main()
def main(grid: Grid, context: Context) -> None:
    rounds, wanted = int(context.run_config["rounds"]), int(context.run_config["nodes"])
    if (interval := float(context.run_config["pull-interval"])) > 0:  # else Flower's own 3 s between pulls
        from fedpref.engines.flower.polling_grid import PollingGrid

        grid = PollingGrid(grid, interval)
    while len(nodes := list(grid.get_node_ids())) < wanted:
        time.sleep(0.5)
    seconds = []
    for r in range(rounds):
        start = time.perf_counter()
        msgs = [Message(RecordDict(), node, "query", group_id=str(r)) for node in nodes]
        replies = list(grid.send_and_receive(msgs, timeout=300))
        seconds.append(time.perf_counter() - start)
        assert len(replies) == len(nodes) and not any(m.has_error() for m in replies)
    if out := str(context.run_config["out-file"]):
        Path(out).write_text(json.dumps({"seconds": seconds, "nodes": len(nodes)}))
