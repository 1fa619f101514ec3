"""Speculative decoding: ``GrammarMatcher.traverse_draft_tree`` and the ``BatchGrammarMatcher``
accept/rollback helpers.

Random draft trees of depth 1-8 and width 1-4 are checked against a token-by-token reference
(a fresh fork per node replaying the node's path with ``accept_token``/``fill_next_token_bitmask``)
and, when xgrammar is installed, against XGrammar 0.2.8's own ``traverse_draft_tree`` row by row.
"""

from __future__ import annotations

import random
import time

import grammask as xgr
import numpy as np
import pytest

TOKENS = ["a", "b", "ab", "(", ")", "</s>", "ba", "((", "a)", "bb"]
STOP = 5
GRAMMARS = [
    'root ::= "a" "b"*',
    'root ::= ("a" | "(" root ")")*',
    'root ::= "ab" | "a" "b" "a"?',
    'root ::= [a-b]+ ")"?',
    'root ::= "(" [ab]* ")" | "b"+',
]
SENTINEL = 0x5A5A5A5A


def compiled(grammar: str, lib=xgr):
    info = lib.TokenizerInfo(TOKENS, stop_token_ids=[STOP])
    return lib.GrammarCompiler(info).compile_grammar(grammar)


def random_tree(rng: random.Random, depth: int, width: int, budget: int = 48):
    """(next_token, next_sibling, draft parents) of a random tree whose longest path has `depth`
    edges and whose nodes have at most `width` children; non-root ids are shuffled."""
    children = {0: []}
    level = [0]
    count = 1
    for d in range(depth):
        nxt = []
        for k, node in enumerate(level):
            # the first node of each level keeps the tree `depth` deep
            lo = 1 if k == 0 else 0
            n = rng.randint(lo, width) if count < budget else lo
            for _ in range(n):
                children[node].append(count)
                children[count] = []
                nxt.append(count)
                count += 1
        level = nxt
    perm = list(range(1, count))
    rng.shuffle(perm)
    ids = {0: 0, **{old: new for old, new in zip(range(1, count), perm)}}
    next_token = [-1] * count
    next_sibling = [-1] * count
    parent = [-1] * count
    for node, kids in children.items():
        kids = [ids[k] for k in kids]
        if kids:
            next_token[ids[node]] = kids[0]
        for a, b in zip(kids, kids[1:]):
            next_sibling[a] = b
        for k in kids:
            parent[k] = ids[node]
    return next_token, next_sibling, parent


def draft_tokens_for(rng, compiled_grammar, next_token, next_sibling, parent, n_vocab, start=()):
    """Draft tokens that mostly follow the grammar (so paths go deep), sometimes not: each node's
    token is picked after replaying its ancestors' tokens (after `start`) on a fresh matcher."""
    n = len(next_token)
    tokens = [0] * n
    order = []
    queue = [0]
    while queue:  # breadth first: ancestors get their tokens first
        node = queue.pop(0)
        order.append(node)
        child = next_token[node]
        while child != -1:
            queue.append(child)
            child = next_sibling[child]
    for node in order[1:]:
        path = []
        p = parent[node]
        while p != 0:
            path.append(p)
            p = parent[p]
        m = xgr.GrammarMatcher(compiled_grammar)
        ok = all(m.accept_token(t) for t in start) and all(
            m.accept_token(tokens[q]) for q in reversed(path)
        )
        allowed = m._allowed_token_ids() if ok and not m.is_terminated() else []
        r = rng.random()
        if allowed and r < 0.75:
            tokens[node] = rng.choice(allowed)
        elif r < 0.85:
            tokens[node] = STOP
        else:
            tokens[node] = rng.randrange(n_vocab)
    return tokens


def reference(matcher, next_token, next_sibling, draft, parent, vocab_size):
    """Expected rows (SENTINEL where untouched) and temperatures, node by node."""
    n = len(next_token)
    width = (vocab_size + 31) // 32
    rows = np.full((n, width), SENTINEL, dtype=np.int32)
    temps = np.full(n, -1.0, dtype=np.float32)
    t = -1.0 if matcher.temperature is None else matcher.temperature
    reachable = {0}
    stack = [0]
    while stack:
        node = stack.pop()
        c = next_token[node]
        while c != -1:
            reachable.add(c)
            stack.append(c)
            c = next_sibling[c]
    if matcher.is_terminated():
        rows[0] = 0
        return rows, temps
    for node in sorted(reachable):
        path = []
        p = node
        while p != 0:
            path.append(p)
            p = parent[p]
        path.reverse()
        m = matcher.fork()
        row = np.zeros((1, width), dtype=np.int32)
        m.fill_next_token_bitmask(row)
        status = "filled"
        for k, q in enumerate(path):
            tok = draft[q]
            allowed = 0 <= tok < vocab_size and (int(row[0, tok >> 5]) >> (tok & 31)) & 1
            if not allowed or not m.accept_token(tok) or m.is_terminated():
                status = "zero" if k == len(path) - 1 else "untouched"
                break
            m.fill_next_token_bitmask(row)
        if status == "filled":
            rows[node] = row[0]
            temps[node] = t
        elif status == "zero":
            rows[node] = 0
    return rows, temps


CASES = [(d, w) for d in range(1, 9) for w in range(1, 5)]


@pytest.mark.parametrize("depth,width", CASES)
def test_traverse_matches_token_by_token_reference(depth, width):
    rng = random.Random(f"{depth}/{width}")
    for trial in range(6):
        grammar = GRAMMARS[trial % len(GRAMMARS)]
        cg = compiled(grammar)
        tws = trial % 3 == 2
        matcher = xgr.GrammarMatcher(
            cg, terminate_without_stop_token=tws, default_temperature=0.5 if trial % 2 else None
        )
        start = []
        if trial % 2:
            first = rng.choice(matcher._allowed_token_ids())
            if matcher.accept_token(first):
                start = [first]
        nt, ns, parent = random_tree(rng, depth, width)
        draft = draft_tokens_for(rng, cg, nt, ns, parent, len(TOKENS) + 3, start)
        want_rows, want_temps = reference(matcher, nt, ns, draft, parent, len(TOKENS))
        before = matcher._debug_print_internal_state()
        rows = np.full(want_rows.shape, SENTINEL, dtype=np.int32)
        temps = np.full(len(nt), 9.0, dtype=np.float32)
        ok = matcher.traverse_draft_tree(
            np.array(nt, dtype=np.int64),
            np.array(ns, dtype=np.int64),
            np.array(draft, dtype=np.int64),
            rows,
            -1.0,
            temps,
        )
        assert ok
        np.testing.assert_array_equal(
            rows, want_rows, err_msg=f"{grammar} tree={nt},{ns} draft={draft}"
        )
        np.testing.assert_array_equal(temps, want_temps)
        assert matcher._debug_print_internal_state() == before


@pytest.fixture(scope="module")
def xgrammar():
    return pytest.importorskip("xgrammar", reason="xgrammar is not installed (differential tests)")


@pytest.mark.parametrize("depth,width", CASES)
def test_traverse_matches_xgrammar(xgrammar, depth, width):
    torch = pytest.importorskip("torch")
    rng = random.Random(f"x{depth}/{width}")
    for trial in range(4):
        grammar = GRAMMARS[(trial + depth) % len(GRAMMARS)]
        tws = trial % 2 == 1
        ours = xgr.GrammarMatcher(
            compiled(grammar), terminate_without_stop_token=tws, default_temperature=0.25
        )
        theirs = xgrammar.GrammarMatcher(
            compiled(grammar, xgrammar), terminate_without_stop_token=tws, default_temperature=0.25
        )
        nt, ns, parent = random_tree(rng, depth, width)
        draft = draft_tokens_for(rng, compiled(grammar), nt, ns, parent, len(TOKENS) + 3)
        args = [torch.tensor(x, dtype=torch.int64) for x in (nt, ns, draft)]
        shape = (len(nt), 1)
        ob, tb = (
            torch.full(shape, SENTINEL, dtype=torch.int32),
            torch.full(shape, SENTINEL, dtype=torch.int32),
        )
        ot, tt = torch.full((len(nt),), 9.0), torch.full((len(nt),), 9.0)
        assert ours.traverse_draft_tree(*args, ob, -1.0, ot) == theirs.traverse_draft_tree(
            *args, tb, -1.0, tt
        )
        # Bits past the vocabulary: grammask writes 0, XGrammar 1 (documented difference); rows
        # left untouched keep the sentinel in both.
        vocab_bits = (1 << len(TOKENS)) - 1
        ours_rows = [r if r == SENTINEL else r & vocab_bits for r in ob[:, 0].tolist()]
        theirs_rows = [r if r == SENTINEL else r & vocab_bits for r in tb[:, 0].tolist()]
        assert ours_rows == theirs_rows, f"{grammar} tws={tws} tree={nt},{ns} draft={draft}"
        assert ot.tolist() == tt.tolist()


def test_terminated_matcher_zeroes_the_root_only():
    m = xgr.GrammarMatcher(compiled('root ::= "a"'))
    assert m.accept_token(0) and m.accept_token(STOP) and m.is_terminated()
    rows = np.full((2, 1), SENTINEL, dtype=np.int32)
    temps = np.full(2, 3.0, dtype=np.float32)
    assert m.traverse_draft_tree(
        np.array([1, -1]), np.array([-1, -1]), np.array([0, 0]), rows, -1.0, temps
    )
    assert rows[:, 0].tolist() == [0, SENTINEL] and temps.tolist() == [-1.0, -1.0]


def test_torch_tensors_and_state_restored():
    torch = pytest.importorskip("torch")
    m = xgr.GrammarMatcher(compiled('root ::= "a" "b"*'))
    rows = torch.full((5, 1), SENTINEL, dtype=torch.int32)
    nt, ns, dt = (
        torch.tensor(x, dtype=torch.int64)
        for x in ([1, 3, -1, -1, -1], [-1, 2, -1, 4, -1], [99, 0, 1, 1, STOP])
    )
    assert m.traverse_draft_tree(nt, ns, dt, rows)
    # root allows a, ab; after "a": b, bb, </s>; "b" at the root is rejected; "</s>" terminates.
    assert rows[:, 0].tolist() == [0b101, 0b1000100010, 0, 0b1000100010, 0]
    assert m.accept_token(0) and not m.is_terminated()


def test_timeout_returns_false_and_restores_state():
    m = xgr.GrammarMatcher(compiled('root ::= "a" "b"*'))
    n = 40
    nt = np.array([i + 1 for i in range(n - 1)] + [-1], dtype=np.int64)
    ns = np.full(n, -1, dtype=np.int64)
    dt = np.array([0, 0] + [1] * (n - 2), dtype=np.int64)
    rows = np.full((n, 1), SENTINEL, dtype=np.int32)
    assert m.traverse_draft_tree(nt, ns, dt, rows, 1e-12) is False
    assert rows[0, 0] == 0b101 and rows[-1, 0] == SENTINEL
    assert m.traverse_draft_tree(nt, ns, dt, rows, 60.0) is True
    assert rows[-1, 0] == 0b1000100010
    assert m.accept_token(0)


@pytest.mark.parametrize(
    "nt,ns,dt,rows,match",
    [
        ([7, -1], [-1, -1], [0, 0], 2, "out of bounds"),
        ([1, -1], [-1, 9], [0, 0], 2, "out of bounds"),
        ([1, -1], [1, -1], [0, 0], 2, "root node"),
        ([1, 0], [-1, -1], [0, 0], 2, "root node"),
        ([1, 1], [-1, -1], [0, 0], 2, "cycles or shared"),
        ([1, -1, -1], [-1, 2, 1], [0, 0, 0], 3, "cycles or shared"),
        ([], [], [], 0, "must not be empty"),
        ([1, -1], [-1, -1], [0], 2, "same length"),
        ([1, -1], [-1], [0, 0], 2, "same length"),
        ([1, -1], [-1, -1], [0, 0], 3, "one per node"),
    ],
)
def test_malformed_trees_raise_before_writing(nt, ns, dt, rows, match):
    m = xgr.GrammarMatcher(compiled('root ::= "a"*'))
    bm = np.full((rows, 1), SENTINEL, dtype=np.int32)
    with pytest.raises(RuntimeError, match=match):
        m.traverse_draft_tree(
            np.array(nt, dtype=np.int64),
            np.array(ns, dtype=np.int64),
            np.array(dt, dtype=np.int64),
            bm,
        )
    assert (bm == SENTINEL).all()


def test_bad_dtypes_raise():
    m = xgr.GrammarMatcher(compiled('root ::= "a"*'))
    ok = np.array([-1], dtype=np.int64)
    with pytest.raises(RuntimeError, match="int64"):
        m.traverse_draft_tree(np.array([-1], dtype=np.int32), ok, ok, np.zeros((1, 1), np.int32))
    with pytest.raises(RuntimeError, match="2-D"):
        m.traverse_draft_tree(ok, ok, ok, np.zeros(1, np.int32))
    with pytest.raises(RuntimeError, match="shape"):
        m.traverse_draft_tree(ok, ok, ok, np.zeros((1, 2), np.int32))
    with pytest.raises(RuntimeError, match="float32"):
        m.traverse_draft_tree(ok, ok, ok, np.zeros((1, 1), np.int32), -1.0, np.zeros(1, np.float64))
    with pytest.raises(RuntimeError, match="one per node"):
        m.traverse_draft_tree(ok, ok, ok, np.zeros((1, 1), np.int32), -1.0, np.zeros(2, np.float32))
    with pytest.raises(RuntimeError):
        m.traverse_draft_tree([-1], [-1], [0], np.zeros((1, 1), np.int32))


def test_legacy_testing_wrapper():
    m = xgr.GrammarMatcher(compiled('root ::= "a" "b"*'))
    rows = np.zeros((2, 1), dtype=np.int32)
    assert xgr.testing._traverse_draft_tree(
        np.array([1, -1]), np.array([-1, -1]), np.array([0, 0]), m, rows
    )
    assert rows[:, 0].tolist() == [0b101, 0b1000100010]


# ---------------------------------------------------------------------------------------------
# BatchGrammarMatcher accept / rollback / temperature


def _ops_reference_vs_batch(rng, lib_batch, make):
    """Random batched operations applied with the batch helpers and one by one on twins."""
    n = rng.randint(1, 5)
    batch = [make() for _ in range(n)]
    single = [make() for _ in range(n)]
    for _ in range(60):
        op = rng.choice(["tok", "tok", "str", "rollback"])
        if op == "tok":
            toks = [rng.choice(list(range(len(TOKENS))) + [-1, 99]) for _ in range(n)]
            got = lib_batch.batch_accept_token(batch, toks)
            assert got == [m.accept_token(t) for m, t in zip(single, toks)]
        elif op == "str":
            strs = ["".join(rng.choice("ab()") for _ in range(rng.randint(0, 3))) for _ in range(n)]
            strs = [s.encode() if rng.random() < 0.3 else s for s in strs]
            got = lib_batch.batch_accept_string(batch, strs)
            assert got == [m.accept_string(s) for m, s in zip(single, strs)]
        else:
            counts = [rng.randint(0, 1) for _ in range(n)]
            arg = counts[0] if rng.random() < 0.3 else counts
            if isinstance(arg, int):
                counts = [arg] * n
            try:
                lib_batch.batch_rollback(batch, arg)
                raised = False
            except RuntimeError:
                raised = True
            want_raised = False
            for m, c in zip(single, counts):
                try:
                    m.rollback(c)
                except RuntimeError:
                    want_raised = True
                    break
            assert raised == want_raised
        for a, b in zip(batch, single):
            assert (a.is_completed(), a.is_terminated()) == (b.is_completed(), b.is_terminated())
            assert (
                a._allowed_token_ids() == b._allowed_token_ids() if not a.is_terminated() else True
            )


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_batch_accept_and_rollback_match_one_by_one(grammar):
    cg = compiled(grammar)
    _ops_reference_vs_batch(
        random.Random(grammar), xgr.BatchGrammarMatcher, lambda: xgr.GrammarMatcher(cg)
    )


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_batch_semantics_match_xgrammar(xgrammar, grammar):
    """The same random batched operations on both libraries give the same results and errors."""
    ours = [xgr.GrammarMatcher(compiled(grammar)) for _ in range(3)]
    theirs = [xgrammar.GrammarMatcher(compiled(grammar, xgrammar)) for _ in range(3)]
    rng = random.Random("batch" + grammar)

    def run(fn):
        try:
            return ("ok", fn())
        except RuntimeError:
            return ("raised", None)

    for step in range(80):
        op = rng.choice(["tok", "str", "rollback", "rollback_list"])
        if op == "tok":
            toks = [rng.choice(list(range(len(TOKENS))) + [-1, 99]) for _ in range(3)]
            a = run(lambda: xgr.BatchGrammarMatcher.batch_accept_token(ours, toks))
            b = run(lambda: xgrammar.BatchGrammarMatcher.batch_accept_token(theirs, toks))
        elif op == "str":
            strs = ["".join(rng.choice("ab()") for _ in range(rng.randint(0, 3))) for _ in range(3)]
            a = run(lambda: xgr.BatchGrammarMatcher.batch_accept_string(ours, strs))
            b = run(lambda: xgrammar.BatchGrammarMatcher.batch_accept_string(theirs, strs))
        elif op == "rollback":
            k = rng.randint(0, 2)
            a = run(lambda: xgr.BatchGrammarMatcher.batch_rollback(ours, k))
            b = run(lambda: xgrammar.BatchGrammarMatcher.batch_rollback(theirs, k))
        else:
            ks = [rng.randint(0, 2) for _ in range(3)]
            a = run(lambda: xgr.BatchGrammarMatcher.batch_rollback(ours, ks))
            b = run(lambda: xgrammar.BatchGrammarMatcher.batch_rollback(theirs, ks))
        assert a == b, f"step {step} {op}"
        assert [(m.is_completed(), m.is_terminated()) for m in ours] == [
            (m.is_completed(), m.is_terminated()) for m in theirs
        ]
    for lib, ms in ((xgr, ours), (xgrammar, theirs)):
        with pytest.raises(RuntimeError):
            lib.BatchGrammarMatcher.batch_accept_token(ms, [0])
        with pytest.raises(RuntimeError):
            lib.BatchGrammarMatcher.batch_accept_string(ms, ["a"])
        with pytest.raises(RuntimeError):
            lib.BatchGrammarMatcher.batch_rollback(ms, [0])


def test_batch_rollback_stops_at_the_first_failure():
    cg = compiled('root ::= "a" "b"*')
    ms = [xgr.GrammarMatcher(cg) for _ in range(3)]
    assert xgr.BatchGrammarMatcher.batch_accept_token(ms, [0, 0, 0]) == [True] * 3
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_rollback(ms, [1, 5, 1])
    # matcher 0 was rolled back, 1 failed, 2 untouched
    assert [m.accept_token(1) for m in ms] == [False, True, True]


def test_batch_fill_temperature():
    cg = compiled('root ::= "a"*')
    ms = [xgr.GrammarMatcher(cg), xgr.GrammarMatcher(cg, default_temperature=0.7)]
    t = np.zeros(4, dtype=np.float32)
    xgr.BatchGrammarMatcher.batch_fill_temperature(ms, t, [3, 1])
    assert t.tolist() == [0.0, pytest.approx(0.7), 0.0, -1.0]
    with pytest.raises(RuntimeError, match="out of bounds"):
        xgr.BatchGrammarMatcher.batch_fill_temperature(ms, np.zeros(1, dtype=np.float32))
    with pytest.raises(RuntimeError, match="float32"):
        xgr.BatchGrammarMatcher.batch_fill_temperature(ms, np.zeros(2))


def test_accept_string_rejects_non_text():
    m = xgr.GrammarMatcher(compiled('root ::= "a"*'))
    with pytest.raises(RuntimeError):
        m.accept_string(1)  # bytes(1) would be b"\\x00"
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_accept_string([m], [1])


def test_draft_tree_is_fast_enough():
    """A 64-node tree on a real-size grammar walk takes well under 100 ms."""
    cg = compiled('root ::= ("a" | "(" root ")")*')
    m = xgr.GrammarMatcher(cg)
    rng = random.Random(1)
    nt, ns, parent = random_tree(rng, 8, 4, budget=64)
    draft = draft_tokens_for(rng, cg, nt, ns, parent, len(TOKENS))
    rows = np.zeros((len(nt), 1), dtype=np.int32)
    start = time.perf_counter()
    m.traverse_draft_tree(
        np.array(nt, dtype=np.int64),
        np.array(ns, dtype=np.int64),
        np.array(draft, dtype=np.int64),
        rows,
    )
    assert time.perf_counter() - start < 0.5
