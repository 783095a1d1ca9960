"""The selector table (FedVPA-GP paper, Tables 1-2) from a hand-written results entry."""

from fedpref.reports.tables import results_markdown, selector_rows


def selector(acc: float, unseen: float | None = None) -> dict:
    seen = {
        "acc_mean": acc,
        "base_acc_mean": 50.0,
        "by_group": {"G1": {"acc": acc + 1, "base_acc": 50.0}, "G2": {"acc": acc - 1, "base_acc": 50.0}},
        "separation": {"silhouette": 0.5, "probe_acc": None},
        "collapse": {"kl_standard_mean": 1.25, "mean_spread": 0.125},
        "per_client": {},
    }
    out = {"seen": seen, "latent_trace": []}
    if unseen is not None:
        out["unseen"] = {**seen, "acc_mean": unseen}
    return out


def test_selector_rows_show_accuracy_separation_and_unseen():
    curves = {"steps": [0], "acc_mean": [50.0], "acc_std": [0.0], "by_group": {}, "per_client": {}}
    methods = {
        "FL": {"personalization": curves},
        "FedVPL": {"personalization": curves, "selector": selector(60.0)},
        "FedVPA-GP": {"personalization": curves, "selector": selector(80.0, unseen=75.5)},
    }
    header, rows = selector_rows(methods)
    assert header[-1] == "unseen acc" and "G1 acc" in header
    assert rows == [
        ["FedVPL", "60.00", "50.00", "61.00", "59.00", "0.500", "–", "1.250", "0.125", "–"],
        ["FedVPA-GP", "80.00", "50.00", "81.00", "79.00", "0.500", "–", "1.250", "0.125", "75.50"],
    ]
    assert "Latent-conditioned selectors" in results_markdown(methods)
