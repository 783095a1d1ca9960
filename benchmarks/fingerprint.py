"""Set-up's tokenizer fingerprint (fedpref.models.token_cache): memoized on the serialization against re-parsed.

`fedpref run` fingerprints the tokenizer once per split of every client (120 times for 40 clients) to key the
token cache. Both ways run here in the same process, alternating, on the embedded MiniLM's tokenizer.

    .venv/bin/python benchmarks/fingerprint.py [--calls 120] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from transformers import AutoTokenizer

from fedpref.models import token_cache
from fedpref.models.backbone import resolve_backbone


def uncached(tokenizer) -> str:
    """The fingerprint before: the serialization parsed and re-dumped every call."""
    head = f"{type(tokenizer).__qualname__}\0{tokenizer.truncation_side}\0"
    return token_cache._fast_fingerprint.__wrapped__(head, tokenizer.backend_tokenizer.to_str())


def _timed(fn, tokenizer, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(tokenizer)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=120, help="fingerprints per set-up (3 splits x 40 clients)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    assert uncached(tokenizer) == token_cache.tokenizer_fingerprint(tokenizer)
    times = {"re-parsed": [], "memoized": []}
    for _ in range(args.repeats):  # alternating; the memo is cleared so each repeat pays its first parse
        times["re-parsed"].append(_timed(uncached, tokenizer, args.calls))
        token_cache._fast_fingerprint.cache_clear()
        times["memoized"].append(_timed(token_cache.tokenizer_fingerprint, tokenizer, args.calls))
    for name, ts in times.items():
        print(f"{name:10s} median {statistics.median(ts):6.2f} s for {args.calls} fingerprints")
    print(f"ratio {statistics.median(times['re-parsed']) / statistics.median(times['memoized']):.1f}x")


if __name__ == "__main__":
    main()
