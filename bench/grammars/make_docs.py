"""Regenerates the benchmark documents under docs/<grammar>/ (seeded, so the output is stable).

The documents are committed; run this only to change them: `python bench/grammars/make_docs.py`.
Each grammar gets ten documents of roughly 50-500 tokens (Llama 3 / Qwen2.5 tokenizers).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_DOCS = 10

WORDS = ["request", "user", "order", "cache", "timeout", "retry", "payload", "session", "token", "shard", "replica", "index", "query", "latency", "worker", "queue", "batch", "upload", "invoice", "customer", "region", "metric", "deploy", "config", "backend", "gateway", "connection", "handshake", "checksum", "snapshot", "migration", "schema", "tenant", "quota"]
NAMES = ["Ada Lovelace", "José Núñez", "Zoë Kravitz", "李雷", "Søren Kierkegaard", "Grace Hopper",
         "Émile Zola", "Олег Попов", "Ngozi Okonjo", "Mary Jackson"]
CITIES = ["Zürich", "São Paulo", "Kraków", "Reykjavík", "Tōkyō", "Nairobi", "Montréal", "Lisboa"]


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def json_value(rng: random.Random, depth: int):
    kind = rng.choice(["obj", "arr", "str", "num", "lit"] if depth < 4 else ["str", "num", "lit"])
    if kind == "obj":
        return {rng.choice(WORDS) + ("_" + rng.choice(WORDS) if rng.random() < 0.4 else ""): json_value(rng, depth + 1)
                for _ in range(rng.randint(1, 5))}
    if kind == "arr":
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "str":
        return rng.choice([words(rng, 1, 6), rng.choice(NAMES), rng.choice(CITIES),
                           f"line one\nline \"two\"\t{rng.randint(0, 99)}", "https://example.com/a/b?x=1&y=2"])
    if kind == "num":
        return rng.choice([rng.randint(-1000, 100000), round(rng.uniform(-1e3, 1e3), 4), 6.02e23, 1.5e-7, 0])
    return rng.choice([True, False, None])


def json_doc(rng: random.Random, i: int) -> str:
    doc = {
        "id": f"{rng.randrange(16**12):012x}",
        "customer": {"name": rng.choice(NAMES), "city": rng.choice(CITIES), "vip": rng.random() < 0.3},
        "items": [{"sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 9),
                   "price": round(rng.uniform(1, 500), 2), "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]}
                  for _ in range(rng.randint(1, 4))],
        "meta": json_value(rng, 1),
        "note": words(rng, 3, 15),
    }
    if i % 3 == 2:
        doc = [doc, json_value(rng, 2)]
    # Mix pretty-printed, compact and escaped-unicode styles.
    style = i % 3
    if style == 0:
        return json.dumps(doc, indent=2, ensure_ascii=False)
    if style == 1:
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(doc, ensure_ascii=True)


def arith_expr(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice([str(rng.randint(0, 999)), f"{rng.randint(0, 99)}.{rng.randint(0, 99)}",
                           rng.choice(["x", "y", "rate", "total_2", "n", "alpha", "delta_t"])])
    if r < 0.75:
        return f"{arith_expr(rng, depth + 1)} {rng.choice('+-*/')} {arith_expr(rng, depth + 1)}"
    if r < 0.85:
        return f"({arith_expr(rng, depth + 1)})"
    if r < 0.9:
        return f"-{arith_expr(rng, depth + 1)}"
    args = ", ".join(arith_expr(rng, depth + 1) for _ in range(rng.randint(1, 3)))
    return f"{rng.choice(['sqrt', 'max', 'min', 'clamp', 'f'])}({args})"


def arith_doc(rng: random.Random, i: int) -> str:
    lines = [f"{rng.choice(['x', 'y', 'z', 'acc', 'out_1', 'tmp'])} = {arith_expr(rng, 0)}"
             for _ in range(rng.randint(3, 9))]
    return "\n".join(lines) + "\n"


def sql_cond(rng: random.Random) -> str:
    preds = [
        f"u.age >= {rng.randint(18, 70)}", "o.status = 'shipped'", "o.total BETWEEN 10 AND 250.5",
        "c.name LIKE '%O''Brien%'", "o.deleted_at IS NULL", "u.region IN ('eu', 'us', 'apac')",
        "LOWER(u.email) <> 'admin@example.com'", "NOT (o.total < 0)", f"p.stock > {rng.randint(0, 50)}",
    ]
    n = rng.randint(1, 3)
    return (" AND " if rng.random() < 0.7 else " OR ").join(rng.sample(preds, n))


def sql_stmt(rng: random.Random) -> str:
    kind = rng.choice(["select", "select", "select", "insert", "update", "delete"])
    sp = rng.choice([" ", "\n  "])
    if kind == "select":
        cols = rng.choice(["*", "u.id, u.name AS user_name, COUNT(o.id) AS orders",
                           "c.name, SUM(o.total) AS revenue, AVG(o.total)", "DISTINCT p.category, MAX(p.price)"])
        s = f"SELECT {cols}{sp}FROM users u{sp}LEFT JOIN orders o ON o.user_id = u.id"
        if rng.random() < 0.5:
            s += f"{sp}INNER JOIN customers c ON c.id = o.customer_id"
        s += f"{sp}WHERE {sql_cond(rng)}"
        if rng.random() < 0.6:
            s += f"{sp}GROUP BY u.id, u.name{sp}HAVING COUNT(o.id) > {rng.randint(1, 10)}"
        s += f"{sp}ORDER BY {rng.choice(['u.name ASC', 'revenue DESC, c.name', 'orders DESC'])}"
        s += f"{sp}LIMIT {rng.randint(1, 100)}" + (f" OFFSET {rng.randint(0, 500)}" if rng.random() < 0.5 else "")
        return s
    if kind == "insert":
        rows = ", ".join(f"({rng.randint(1, 9999)}, '{rng.choice(NAMES).replace(chr(39), chr(39) * 2)}', "
                         f"{round(rng.uniform(0, 999), 2)}, NOW())" for _ in range(rng.randint(1, 4)))
        return f"INSERT INTO products (id, name, price, created_at){sp}VALUES {rows}"
    if kind == "update":
        return (f"UPDATE orders{sp}SET status = 'cancelled', total = total * 0.9, note = 'batch {rng.randint(1, 99)}'"
                f"{sp}WHERE {sql_cond(rng)}")
    return f"DELETE FROM sessions{sp}WHERE {sql_cond(rng)}"


def sql_doc(rng: random.Random, i: int) -> str:
    return "\n".join(sql_stmt(rng) + ";" for _ in range(rng.randint(2, 5))) + "\n"


def log_doc(rng: random.Random, i: int) -> str:
    out = []
    for _ in range(rng.randint(4, 10)):
        ts = (f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
              f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}" + (f".{rng.randint(0, 999):03d}" if rng.random() < 0.7 else "") + "Z")
        level = rng.choice(["DEBUG", "INFO", "INFO", "WARN", "ERROR"])
        comp = rng.choice(["api.gateway", "db-pool", "auth", "scheduler.cron_2", "cache"])
        msg = rng.choice([f"{words(rng, 3, 12)}", f"connection to {rng.choice(CITIES)} replica lost after {rng.randint(1, 900)} ms",
                          f"user {rng.choice(NAMES)} logged in from 10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}",
                          "GET /api/v2/orders?page=3 -> 200 (cached)", f"retrying ({rng.randint(1, 5)}/5): {words(rng, 2, 5)}"])
        line = f"{ts} {level} [{comp}] {msg}"
        if rng.random() < 0.6:
            fields = " ".join(f"{rng.choice(['req_id', 'user', 'ms', 'shard', 'path'])}={rng.choice([str(rng.randint(0, 9999)), 'abc-123', chr(34) + words(rng, 1, 3) + chr(34)])}"
                              for _ in range(rng.randint(1, 4)))
            line += f" | {fields}"
        out.append(line)
    return "\n".join(out) + "\n"


def main() -> None:
    makers = {"json": json_doc, "arith": arith_doc, "sql": sql_doc, "logline": log_doc}
    for name, make in makers.items():
        rng = random.Random(f"grammask-bench-{name}")
        d = HERE / "docs" / name
        d.mkdir(parents=True, exist_ok=True)
        for i in range(N_DOCS):
            (d / f"{i:02d}.txt").write_text(make(rng, i), encoding="utf-8")


if __name__ == "__main__":
    main()
