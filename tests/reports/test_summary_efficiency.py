"""`fedpref summarize`'s efficiency table: bytes per client per round and s/round over seeds, by hand."""

import json

from fedpref.cli import main


def write_run(folder, seed: int, up: int, global_s: float, cost: dict | None = None) -> None:
    """A finished run of FL (bytes recorded, and `cost` when given) and FedGD (none recorded) on one client,
    three rounds."""
    folder.mkdir(parents=True)
    config = f'name = "fx"\nseed = {seed}\n\n[data]\nsource = "synthetic"\ngroup_sizes = [1]\n'
    (folder / "config.toml").write_text(config + '\n[algorithm]\nmethods = ["FL", "FedGD"]\n')
    curves = {"steps": [0], "acc_mean": [50.0], "acc_std": [0.0], "by_group": {}, "per_client": {"c000": [50.0]}}
    rounds = [{"round": r, "down": {"c000": 1000}, "up": {"c000": up}} for r in range(3)]
    fl = {
        "personalization": curves,
        "assignments": [],
        "timing": {"wall_s": 10.0, "global_s": global_s},
        "communication": {"bytes_down_per_client_round": 1000, "bytes_up_per_client_round": up, "rounds": rounds},
    }
    if cost is not None:
        fl["cost"] = cost
    results = {"seed": seed, "methods": {"FL": fl, "FedGD": {"personalization": curves}}, "timing": {"wall_s": 1.0}}
    (folder / "results.json").write_text(json.dumps(results))


def test_summarize_efficiency_table_by_hand(tmp_path, capsys):
    # FL's bytes per client per round: down 1000 on every seed; up 1008, 1010, 1012; 3 rounds in 3, 6, 9 s
    for seed, up, global_s in ((0, 1008, 3.0), (1, 1010, 6.0), (2, 1012, 9.0)):
        write_run(tmp_path / f"seed={seed}", seed, up, global_s)
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = out.split("Efficiency per method")[1].split("\n\n")[1]
    # up: mean 1010, std 2, half-width 4.3027 * 2 / sqrt(3) = 4.97; s/round 1, 2, 3: mean 2, half-width 2.484
    assert "| FL | 1000 [1000, 1000] | 1010 [1005, 1015] | 2.000 [-0.484, 4.484] | 3 |" in table
    assert "| FedGD |" not in table  # no bytes recorded: no row


def test_summarize_efficiency_table_shows_the_cost_by_hand(tmp_path, capsys):
    # client / server / transport s per round: (0.5, 0.2, 0.3), (1.0, 0.4, 0.6), (1.5, 0.6, 0.9) on seeds 0, 1, 2;
    # peak RSS 100, 110, 120 MiB; 250 trainable parameters; 250 numbers down and 251 up per client and round
    for seed in (0, 1, 2):
        k = seed + 1
        cost = {
            "trainable_params": 250,
            "params_down_per_client_round": 250,
            "params_up_per_client_round": 251,
            "peak_memory_bytes": (100 + 10 * seed) * 2**20,
            "peak_memory_kind": "cpu_max_rss",
            "client_s_per_round": 0.5 * k,
            "server_s_per_round": 0.2 * k,
            "transport_s_per_round": 0.3 * k,
            "rounds": 3,
        }
        write_run(tmp_path / f"seed={seed}", seed, 1010, 3.0 * k, cost)
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    section = out.split("Efficiency per method")[1]
    header, _, row = section.split("\n\n")[1].splitlines()
    assert header.endswith(
        "| s / round | seeds | client s / round | server s / round | transport s / round | peak memory MiB "
        "| trainable params | params down / client / round | params up / client / round |"
    )
    # s / round 1, 2, 3 (global_s over 3 rounds), split: means 1.0, 0.4, 0.6 s; std 0.5, 0.2, 0.3: half-widths
    # 4.3027 x std / sqrt(3) = 1.242, 0.497, 0.745;
    # memory: mean 110, std 10, half-width 24.8; the counts agree on every seed: no interval
    cells = "| 1.000 [-0.242, 2.242] | 0.400 [-0.097, 0.897] | 0.600 [-0.145, 1.345] | 110.0 [85.2, 134.8] "
    assert (
        row
        == "| FL | 1000 [1000, 1000] | 1010 [1010, 1010] | 2.000 [-0.484, 4.484] | 3 " + cells + "| 250 | 250 | 251 |"
    )
    assert "Peak memory: cpu_max_rss (the process's peak RSS, a high-water mark" in section
