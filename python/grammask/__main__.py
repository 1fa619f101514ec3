"""Command line: ``grammask demo`` (also ``python -m grammask demo``) and ``grammask serve``.

``demo`` decodes once for real, offline: a small random Llama over a tokenizer built in memory
(or ``--model``/``--tokenizer``), constrained by a sample JSON Schema (or ``--grammar``), and
reports whether the output is valid and what the grammar cost per token against the model.
``serve`` runs an OpenAI-compatible server (``/v1/chat/completions`` with ``response_format`` and
``tools``). Both need the ``serve`` extra.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="grammask", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    from .demo import add_arguments as demo_arguments
    from .serve.server import add_arguments as serve_arguments

    demo_arguments(
        sub.add_parser(
            "demo", help="run one grammar-constrained decode offline with a real model loop"
        )
    )
    serve_arguments(
        sub.add_parser(
            "serve", help="run an OpenAI-compatible server with response_format and tools"
        )
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import demo

            return demo(args)
        from .serve.server import serve

        return serve(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one clear line; --debug for the traceback
        if args.debug:
            raise
        print(f"grammask {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
