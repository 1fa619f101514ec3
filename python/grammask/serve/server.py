"""The ``grammask serve`` entry: load the model (or build the embedded tiny one), build the
engine and the app, and run uvicorn."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "serve"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        help="a Hugging Face model directory or hub id (default: the embedded tiny random Llama)",
    )
    p.add_argument(
        "--tokenizer",
        help="a tokenizer directory or hub id (default: the model's, or the embedded one)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=4,
        help="requests decoded at once; more wait for a slot (default: 4)",
    )
    p.add_argument(
        "--tool-format",
        default="auto",
        help="tool-call format: auto (from the chat template), hermes, or a model family name of get_model_structural_tag (default: auto)",
    )
    p.add_argument(
        "--max-model-len",
        type=int,
        default=4096,
        help="prompt plus output tokens per request (default: 4096)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="weight seed of the embedded tiny model (default: 0)"
    )
    p.add_argument(
        "--device",
        default="auto",
        help="torch device: auto (CUDA for --model when available, else CPU), cpu, cuda, ... (default: auto)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")


def serve(args: argparse.Namespace) -> int:
    if args.max_concurrency < 1:
        raise ValueError("--max-concurrency must be at least 1")
    try:
        import uvicorn

        from ..tiny_model import load_model_and_tokenizer
        from .app import create_app
        from .engine import Engine
    except ImportError as e:
        raise RuntimeError(
            f"grammask serve needs the 'serve' extra (pip install 'grammask[serve]'): {e}"
        ) from None
    model, tokenizer, model_id = load_model_and_tokenizer(
        args.model, args.tokenizer, seed=args.seed, device=args.device
    )
    engine = Engine(
        model,
        tokenizer,
        model_id,
        max_concurrency=args.max_concurrency,
        tool_format=args.tool_format,
        max_model_len=args.max_model_len,
    )
    app = create_app(engine, max_concurrency=args.max_concurrency)
    print(
        f"grammask serve: {model_id} on http://{args.host}:{args.port}/v1 "
        f"(tool format {engine.tool_format}, {args.max_concurrency} slots)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
