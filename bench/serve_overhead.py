"""Grammar overhead per token against the model's own time per token, measured on a running
``grammask serve`` through the official ``openai`` client (figures come from ``usage.extra``).

    grammask serve --port 8000 &            # embedded tiny model, or --model/--tokenizer
    python bench/serve_overhead.py --url http://127.0.0.1:8000/v1 --requests 16 --concurrency 1 4 16
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import openai

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000/v1", help="the server's /v1 base URL")
    ap.add_argument("--requests", type=int, default=16, help="requests per concurrency level")
    ap.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 16], help="concurrency levels"
    )
    ap.add_argument("--max-tokens", type=int, default=160, help="max_tokens per request")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.url, api_key="unused", max_retries=0, timeout=600)
    model = client.models.list().data[0].id
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}

    def one(seed: int):
        resp = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "A user as JSON."}],
            response_format=rf,
            max_tokens=args.max_tokens,
            seed=seed,
        )
        return resp.usage.completion_tokens, resp.usage.model_extra["extra"]

    first = one(10_000)[1]  # the cache may already hold this schema if the server ran before
    print(f"model {model}; first request grammar_init_s {first['grammar_init_s'] * 1e3:.2f} ms")
    print(
        "| concurrency | requests | tokens | grammar_init_s (ms, mean) | grammar_per_token_s (µs) | "
        "budget_per_token_s (µs) | model_per_token_s (µs) | grammar / model | wall (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for conc in args.concurrency:
        start = time.perf_counter()
        with ThreadPoolExecutor(conc) as pool:
            results = list(pool.map(one, range(args.requests)))
        wall = time.perf_counter() - start
        tokens = sum(n for n, _ in results)
        # token-weighted means
        g = sum(n * e["grammar_per_token_s"] for n, e in results) / tokens
        b = sum(n * e.get("budget_per_token_s", 0.0) for n, e in results) / tokens
        m = sum(n * e["model_per_token_s"] for n, e in results) / tokens
        init = statistics.mean(e["grammar_init_s"] for _, e in results)
        print(
            f"| {conc} | {args.requests} | {tokens} | {init * 1e3:.3f} | {g * 1e6:.0f} | {b * 1e6:.0f} | "
            f"{m * 1e6:.0f} | {g / m:.2f} | {wall:.1f} |"
        )


if __name__ == "__main__":
    main()
