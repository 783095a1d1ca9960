"""Personalization-capability diagnostics of an initialization: Gradient Quotient and Headroom (Sec. 2.2)."""

from fedpref.diagnostics.gradient_quotient import (
    ClientGQ,
    GQSummary,
    average_over_clients,
    client_gq,
    full_batch_gradient,
    summarize_gq,
)
from fedpref.diagnostics.headroom import (
    ClientHeadroom,
    client_headroom,
    headroom,
    headroom_naive,
    margin_jvp,
    partition_stats,
)
from fedpref.diagnostics.report import diagnose, table_rows

__all__ = [
    "ClientGQ",
    "ClientHeadroom",
    "GQSummary",
    "average_over_clients",
    "client_gq",
    "client_headroom",
    "diagnose",
    "full_batch_gradient",
    "headroom",
    "headroom_naive",
    "margin_jvp",
    "partition_stats",
    "summarize_gq",
    "table_rows",
]
