"""`fedpref summarize`'s efficiency table: bytes per client per round and s/round over seeds, by hand."""

import json

from fedpref.cli import main


def write_run(folder, seed: int, up: int, global_s: float) -> None:
    """A finished run of FL (bytes recorded) and FedGD (none recorded) on one client, three rounds."""
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
