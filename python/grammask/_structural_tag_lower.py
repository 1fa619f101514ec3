"""Lowering of a :class:`~grammask.structural_tag.StructuralTag` to grammask EBNF.

Takes a validated format tree, produces EBNF text (root rule ``root``) that the Rust core parses and
compiles like any other grammar, so masks of structural tags are cached and memoized per parser
state like those of any grammar.

- Leaves: ``const_string`` is a literal; ``json_schema`` is the JSON Schema converter's EBNF with its
  rules renamed; ``regex`` is the ``Regex("...")`` macro; ``grammar`` is the user's EBNF, renamed.
- Free text (``any_text``, the text between triggered tags, ``dispatch``) is the regular language
  of texts that contain none of a set of strings (the excludes, the triggers, and the end of the
  enclosing tag): an Aho–Corasick automaton over those strings, with the states where a string is
  complete removed, written as one rule per automaton state. Every such region can end at any point
  (each state accepts), so a tag around free text can always close.
- "Unlimited" formats inside a tag stop at the tag's end: the end strings are passed down as
  ``stop`` and added to the strings free text may not contain.
- Token-level formats lower to the token macros of the EBNF dialect: ``token`` is ``Token(id)``,
  ``exclude_token`` ``ExcludeToken(ids)``, ``any_tokens`` ``ExcludeToken(ids)*``,
  ``token_triggered_tags`` and ``token_dispatch`` free tokens (``ExcludeToken`` of the triggers and
  excludes) between tags or arms that begin with their trigger's ``Token``; a ``TokenFormat``
  begin/end of a tag is its ``Token``. A token given by its text needs the tokenizer
  (``GrammarCompiler.compile_structural_tag``); ``Grammar.from_structural_tag`` takes ids only.
- With a tokenizer, a tag begin/end string that is exactly one added/special token (Qwen2.5's
  ``<tool_call>``) is matched as that token or as text: ``("<tool_call>" | Token(151657))``, so the
  model's own token works although added tokens are never text (see tokenizer_info.py).
- ``any_text.max_chars`` with excludes is the free-text rule with the ``max_chars`` rule option
  (a character counter in the rule's automaton), without it ``[^]{0,N}``.
- ``any_text.max_tokens`` is the free-text rule with the ``max_tokens`` rule option (a
  per-occurrence token budget): free text can end anywhere, so once ``N`` tokens are read it
  ends at once; a token read across its start counts as its first.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core
from . import structural_tag as st
from .exception import InvalidStructuralTagError, UnsupportedFeatureError
from .grammar import schema_options

__all__ = ["ebnf_class_char", "ebnf_literal", "lower_structural_tag"]

# Coefficients of the free-text elimination longer than this become helper rules.
_COEF_LIMIT = 160


def ebnf_literal(text: str) -> str:
    """``text`` as an EBNF string literal."""
    if _PLAIN_LITERAL_RE.fullmatch(text):
        return f'"{text}"'
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append(
                f"\\x{o:02x}" if o not in (10, 13, 9) else {10: "\\n", 13: "\\r", 9: "\\t"}[o]
            )
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def ebnf_class_char(ch: str) -> str:
    """``ch`` escaped for use inside an EBNF character class."""
    o = ord(ch)
    if ch in "\\]-^[":
        return "\\" + ch
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    return ch


# Identifiers in printed/user EBNF (rule names, macro names, named macro arguments): for
# `findall`, each match a run of other text (literals, classes and comments whole, a lone `"`
# or `[` that opens neither) and the identifier after it (empty at the end). Matches are back
# to back, so the pairs spell the whole text.
# PERF: literals and classes as unrolled loops (a run of plain characters per step rather
# than an alternation per character); one match per identifier, not per literal.
_IDENT_RE = re.compile(
    r'((?:"[^"\\]*(?:\\.[^"\\]*)*"|\[[^\]\\]*(?:\\.[^\]\\]*)*\]|#[^\n]*|[^A-Za-z_"\[#]+|["\[])*)'
    r"([A-Za-z_][A-Za-z0-9_.\-]*)?",
    re.DOTALL,
)
_NAMED_ARG_RE = re.compile(r"[ \t]*=(?!=)")
_PLAIN_LITERAL_RE = re.compile(r'[^"\\\x00-\x1f\x7f]*')
_MACROS = {
    "Regex",
    "Substring",
    "TagDispatch",
    "Token",
    "ExcludeToken",
    "TokenTagDispatch",
    "JsonStringIn",
    "JsonStringExcept",
}


_RULE_OPTIONS_RE = re.compile(r"(?m)^([ \t]*)([A-Za-z_][A-Za-z0-9_.-]*)\[([^\]\n]*)\]")
_BARE_CAPTURE_RE = re.compile(r"(?<![\w\"])capture(?![\w\"])(?!\s*=)")


def _name_bare_captures(ebnf: str) -> str:
    """``name[capture]`` -> ``name[capture="name"]``, so renaming the rule keeps the capture's
    name."""

    def sub(m: "re.Match[str]") -> str:
        opts = _BARE_CAPTURE_RE.sub(f'capture="{m.group(2)}"', m.group(3))
        return f"{m.group(1)}{m.group(2)}[{opts}]"

    return _RULE_OPTIONS_RE.sub(sub, ebnf)


# A rule line whose body names no rule or macro: no identifier outside literals, classes and
# comments (every character is in one of them or starts none of the three nor an identifier).
# PERF: one match per line, not a scan of the body's tokens in Python (~2 ms of a 50-tool
# lowering).
_LEAF_RULE_RE = re.compile(
    r"([A-Za-z_][A-Za-z0-9_.\-]*) ::= "
    r'((?:"[^"\\]*(?:\\.[^"\\]*)*"|\[[^\]\\]*(?:\\.[^\]\\]*)*\]|#[^\n]*|[^A-Za-z_"\[#\n])+)'
)


@functools.lru_cache(maxsize=256)
def _leaf_lines(ebnf: str) -> Tuple[Tuple[str, Optional[str], str], ...]:
    """The lines of a converter's EBNF text, each with its rule's name and body when the rule
    is a leaf that may be shared (a rule other than ``root`` whose body names no rule), else
    ``None`` and ``""``. Cached by text: the tools of a request repeat argument shapes, and a
    server lowers the same tools again."""
    out = []
    for line in ebnf.split("\n"):
        m = _LEAF_RULE_RE.fullmatch(line)
        if m is None or m.group(1) == "root":
            out.append((line, None, ""))
        else:
            out.append((line, m.group(1), m.group(2)))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _rename_rules_cached(
    ebnf: str, prefix: str, shared: Optional[Tuple[Tuple[str, str], ...]]
) -> str:
    """``_rename_rules``, cached by its arguments: a server lowering the same tools again names
    their rules alike (the names count up from the start of each lowering)."""
    return _rename_rules(ebnf, prefix, None if shared is None else dict(shared))


def _rename_rules(ebnf: str, prefix: str, shared: Optional[Dict[str, str]] = None) -> str:
    """Prefix every rule name of an EBNF text (macro names and named arguments kept); the names
    in ``shared`` become their value instead."""
    # PERF: (text, identifier) pairs renamed in a plain loop (no callback and match object per
    # identifier): about a quarter less than a `re.sub` callback.
    pairs = _IDENT_RE.findall(_name_bare_captures(ebnf) if "capture" in ebnf else ebnf)
    out: List[str] = []
    last = len(pairs) - 1
    for k, (text, name) in enumerate(pairs):
        out.append(text)
        if not name:
            continue
        after = pairs[k + 1][0] if k < last else ""
        if (
            (name in _MACROS and after.startswith("("))
            or name in ("true", "false")
            or (after and _NAMED_ARG_RE.match(after))  # a named macro argument
        ):
            out.append(name)
        elif shared is not None and name in shared:
            out.append(shared[name])
        else:
            out.append(prefix + name)
    return "".join(out)


# Characters JSON text has outside string bodies: whitespace, punctuation, numbers, literals.
_JSON_STRUCTURE_CHARS = frozenset(" \t\n\r{}[],:0123456789+-.eEtruefalsn\"")
_BODY_TOKEN_RE = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # string literal
    r"|\[(?:[^\]\\]|\\.)*\]"  # character class
    r"|[()|]"
    r"|[^\s\"\[()|]+",
    re.DOTALL,
)


def _literal_has_quote(lit: str) -> bool:
    """Whether the EBNF string literal ``lit`` denotes text with a ``"``."""
    body, i = lit[1:-1], 0
    while i < len(body):
        if body[i] == "\\":
            esc = body[i + 1 : i + 6].lower()
            if esc.startswith(('"', "x22", "u0022")):
                return True
            i += 2
        else:
            i += 1
    return False


def exclude_in_json_strings(ebnf: str, excludes: Sequence[str], fresh: Callable[[], str]) -> str:
    """The converter's JSON grammar ``ebnf`` (one rule a line) whose string bodies (values and
    keys) contain none of ``excludes``: each body between a pair of ``"\\""`` in a sequence
    becomes a rule with the ``excludes`` option. Exact when no exclude contains ``"`` and each
    has a character JSON text has only inside strings (checked by the caller): an occurrence
    then lies inside one string body. A body this pairing cannot find is refused."""
    opt = ", ".join(ebnf_literal(e).replace("[", "\\x5b").replace("]", "\\x5d") for e in excludes)
    out: List[str] = []
    extra: List[str] = []

    def refuse(why: str) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"json_schema 'excludes' with style 'json': {why} (string bodies could not be isolated)"
        )

    for line in ebnf.split("\n"):
        if not line.strip():
            continue
        head, sep, body = line.partition(" ::= ")
        if not sep:
            raise refuse(f"unexpected grammar line {line[:60]!r}")
        toks = _BODY_TOKEN_RE.findall(body)
        depth = []
        d = 0
        for t in toks:
            if t == ")":
                d -= 1
            depth.append(d)
            if t == "(":
                d += 1
        new: List[str] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            if t.startswith('"') and t != '"\\""' and _literal_has_quote(t):
                raise refuse(f"a literal with a quote in rule {head}")
            if t != '"\\""':
                new.append(t)
                i += 1
                continue
            j = i + 1
            while j < len(toks) and toks[j] != '"\\""':
                if depth[j] < depth[i] or (toks[j] == "|" and depth[j] == depth[i]):
                    break
                j += 1
            if j >= len(toks) or toks[j] != '"\\""' or depth[j] != depth[i]:
                raise refuse(f"an unpaired quote in rule {head}")
            seg = toks[i + 1 : j]
            lits = [x for x in seg if x.startswith('"')]
            plain = len(lits) == len(seg) and all("\\" not in x for x in lits)
            literal = "".join(x[1:-1] for x in lits)
            if seg and not (plain and not any(e in literal for e in excludes)):
                name = fresh()
                extra.append(f"{name}[excludes=({opt})] ::= {' '.join(seg)}")
                seg = [name]
            new.extend(['"\\""', *seg, '"\\""'])
            i = j + 1
        out.append(f"{head} ::= {' '.join(new)}")
    return "\n".join(out + extra) + "\n"


class _TextAutomaton:
    """Aho–Corasick automaton of a set of non-empty strings: ``goto`` over trie nodes, with the
    nodes where some string ends (a suffix of the path is one of the strings) marked ``dead``."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.children: List[Dict[str, int]] = [{}]
        self.dead: List[bool] = [False]
        for p in patterns:
            node = 0
            for ch in p:
                nxt = self.children[node].get(ch)
                if nxt is None:
                    nxt = len(self.children)
                    self.children[node][ch] = nxt
                    self.children.append({})
                    self.dead.append(False)
                node = nxt
            self.dead[node] = True
        self.alphabet = sorted({ch for p in patterns for ch in p})
        # Breadth-first failure links; goto is completed for the alphabet.
        n = len(self.children)
        self.fail = [0] * n
        self.goto: List[Dict[str, int]] = [dict() for _ in range(n)]
        order = [0]
        for ch in self.alphabet:
            self.goto[0][ch] = self.children[0].get(ch, 0)
        queue = [c for c in self.children[0].values()]
        for c in queue:
            self.fail[c] = 0
        i = 0
        while i < len(queue):
            node = queue[i]
            i += 1
            order.append(node)
            self.dead[node] = self.dead[node] or self.dead[self.fail[node]]
            for ch in self.alphabet:
                child = self.children[node].get(ch)
                if child is not None:
                    self.fail[child] = self.goto[self.fail[node]][ch] if node != 0 else 0
                    self.goto[node][ch] = child
                    queue.append(child)
                else:
                    self.goto[node][ch] = self.goto[self.fail[node]][ch]
        self.order = order

    def live_states(self) -> List[int]:
        return [q for q in self.order if not self.dead[q]]

    def edges(self, q: int) -> List[Tuple[str, int]]:
        """The outgoing edges of ``q`` to live states as (character-class text, target)."""
        by_target: Dict[int, List[str]] = {}
        to_non_root: List[str] = []
        for ch in self.alphabet:
            t = self.goto[q][ch]
            if t != 0:
                to_non_root.append(ch)
            if t != 0 and not self.dead[t]:
                by_target.setdefault(t, []).append(ch)
        out: List[Tuple[str, int]] = []
        # Every character not sent elsewhere returns to the root.
        if not self.dead[0]:
            neg = "".join(ebnf_class_char(c) for c in to_non_root)
            out.append((f"[^{neg}]", 0))
        for t, chars in by_target.items():
            out.append(("[" + "".join(ebnf_class_char(c) for c in chars) + "]", t))
        return out


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


class _Tokens:
    """Token lookups of a vocabulary for the token-level formats: token ids by text, and the
    texts of the added/special tokens (begin/end strings equal to one are matched by id too)."""

    def __init__(self, info: Any) -> None:
        self.info = info
        self.vocab_size: int = info.vocab_size
        h = info._handle
        stops = set(info.stop_token_ids)
        self.special: Dict[bytes, int] = {}
        for i in info.special_token_ids:
            if i in stops or i >= self.vocab_size:
                continue
            data = bytes(h.token_bytes(i))
            if data and data not in self.special:
                self.special[data] = i
        self._by_text: Optional[Dict[bytes, int]] = None
        texts = sorted(
            {t.decode("utf-8") for t in self.special if _decodes(t)}, key=len, reverse=True
        )
        # Leftmost-longest matching of these texts (what a regex alternation of them, longest
        # first, finds), without compiling a regex of hundreds of alternatives (~150 ms for
        # Llama 3's 256 special tokens): candidates by first character, longest first.
        self.by_first: Dict[str, List[str]] = {}
        for t in texts:
            self.by_first.setdefault(t[0], []).append(t)

    def find_special(self, text: str) -> List[Tuple[int, int]]:
        """The (start, end) spans of the special-token texts in ``text``: leftmost, longest,
        non-overlapping."""
        out: List[Tuple[int, int]] = []
        by_first = self.by_first
        if not by_first:
            return out
        pos, n = 0, len(text)
        while pos < n:
            cands = by_first.get(text[pos])
            if cands is not None:
                for t in cands:
                    if text.startswith(t, pos):
                        out.append((pos, pos + len(t)))
                        pos += len(t)
                        break
                else:
                    pos += 1
            else:
                pos += 1
        return out

    def id_of_text(self, text: str) -> Optional[int]:
        data = text.encode("utf-8")
        if data in self.special:
            return self.special[data]
        if self._by_text is None:
            self._by_text = {}
            for i, t in enumerate(self.info.decoded_vocab):
                if t and t not in self._by_text:
                    self._by_text[t] = i
        return self._by_text.get(data)


@functools.lru_cache(maxsize=1024)
def _schema_ebnf(schema: str, max_whitespace_cnt: Optional[int], any_order: bool) -> str:
    """The JSON Schema converter's EBNF for a tool's arguments (cached by content: a server
    lowers the same tools for every request)."""
    opts = schema_options(True, None, None, True, max_whitespace_cnt, any_order)
    return _core.Grammar.json_schema_to_ebnf(schema, opts)


# The token lookups of each tokenizer (its special tokens read once, not once per lowering).
_TOKENS: "weakref.WeakKeyDictionary[Any, _Tokens]" = weakref.WeakKeyDictionary()


def _tokens_of(info: Any) -> "_Tokens":
    try:
        return _TOKENS[info]
    except KeyError:
        tokens = _TOKENS[info] = _Tokens(info)
        return tokens
    except TypeError:  # not weakly referenceable or hashable
        return _Tokens(info)


class _Lowerer:
    def __init__(self, tokens: Optional[_Tokens] = None) -> None:
        self.rules: List[Tuple[str, str]] = []
        self.count = 0
        self.text_cache: Dict[Tuple[Tuple[str, ...], Optional[int]], str] = {}
        self.leaf_rules: Dict[str, str] = {}
        self.tokens = tokens

    # ---- tokens ----

    def token_id(self, ref: Any) -> int:
        """The id of a token reference (an id, or a token's text with a tokenizer)."""
        if isinstance(ref, bool):
            raise InvalidStructuralTagError(f"invalid token reference {ref!r}")
        if isinstance(ref, int):
            if ref < 0 or (self.tokens is not None and ref >= self.tokens.vocab_size):
                raise InvalidStructuralTagError(f"token id {ref} is out of range")
            return ref
        if self.tokens is None:
            raise UnsupportedFeatureError(
                f"a token given by its text ({ref!r}) needs the tokenizer: use "
                "GrammarCompiler.compile_structural_tag, or give the token id"
            )
        i = self.tokens.id_of_text(ref)
        if i is None:
            raise InvalidStructuralTagError(f"{ref!r} is not one token of the vocabulary")
        return i

    def literal(self, text: str) -> str:
        """A string of the format (begin/end, const_string): its text, where each piece that is
        one added/special token of the tokenizer (``<tool_call>`` in ``"<tool_call>\n"``) may
        also be that token: ``("<tool_call>" | Token(151657)) "\n"``."""
        if self.tokens is None or not self.tokens.by_first or not text:
            return ebnf_literal(text)
        parts: List[str] = []
        pos = 0
        for start, end in self.tokens.find_special(text):
            if start > pos:
                parts.append(ebnf_literal(text[pos:start]))
            piece = text[start:end]
            i = self.tokens.special[piece.encode("utf-8")]
            parts.append(f"({ebnf_literal(piece)} | Token({i}))")
            pos = end
        if not parts:
            return ebnf_literal(text)
        if pos < len(text):
            parts.append(ebnf_literal(text[pos:]))
        return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"

    def stop_token_ids(self, stop: Tuple[str, ...]) -> List[int]:
        """The ids of the end strings that are one added/special token (free tokens exclude
        them so an unlimited region cannot swallow its tag's end)."""
        if self.tokens is None:
            return []
        return [self.tokens.special[e.encode()] for e in stop if e.encode() in self.tokens.special]

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"st{self.count}_{hint}"

    def add(self, hint: str, body: str) -> str:
        name = self.fresh(hint)
        self.rules.append((name, body))
        return name

    def add_ebnf(self, ebnf: str, hint: str, share_leaves: bool = False) -> str:
        """Import a whole grammar (root ``root``) under fresh names; returns its root's name.

        With ``share_leaves`` (for the converter's one-rule-a-line output), a rule whose body
        names no rule (the JSON strings, numbers and whitespace every tool's schema repeats) is
        defined once per lowering and shared by every import with the same body: the same
        body is the same language, and the core compiles it once instead of once per tool."""
        prefix = self.fresh(hint) + "_"
        shared: Optional[Dict[str, str]] = None
        if share_leaves:
            shared = {}
            kept: List[str] = []
            for line, rule, body in _leaf_lines(ebnf):
                if rule is None:
                    kept.append(line)
                    continue
                name = self.leaf_rules.get(body)
                if name is None:
                    name = self.add("j_" + rule.replace(".", "_"), body)
                    self.leaf_rules[body] = name
                shared[rule] = name
            ebnf = "\n".join(kept)
        shared_key = None if shared is None else tuple(shared.items())
        self.rules.append(("", _rename_rules_cached(ebnf, prefix, shared_key)))
        return prefix + "root"

    # ---- free text ----

    def text(
        self,
        forbidden: Sequence[str],
        max_chars: Optional[int] = None,
        max_tokens: Optional[int] = None,
    ) -> str:
        """A rule for the texts that contain none of ``forbidden``."""
        pats = tuple(sorted({p for p in forbidden if p}))
        key = (pats, max_chars, max_tokens)
        if key in self.text_cache:
            return self.text_cache[key]
        if max_tokens is not None:
            # The `max_tokens` rule option: a budget per occurrence, so the rule keeps its own
            # automaton; free text can end anywhere, so a spent budget ends it at once.
            body = "[^]*" if not pats else self._text_expr(_TextAutomaton(pats))
            options = [f"max_tokens={max_tokens}"]
            if max_chars is not None:
                options.append(f"max_chars={max_chars}")
            name = self.fresh("ttext")
            self.rules.append((f"{name}[{', '.join(options)}]", body))
        elif not pats:
            body = "[^]*" if max_chars is None else f"[^]{{0,{max_chars}}}"
            name = self.add("text", body)
        elif max_chars is None:
            name = self.add("text", self._text_expr(_TextAutomaton(pats)))
        else:
            # The `max_chars` rule option: free text can end anywhere, so the rule's relaxed
            # bound ("end at the first chance after N characters") is exactly "at most N".
            name = self.fresh("ctext")
            self.rules.append((f"{name}[max_chars={max_chars}]", self._text_expr(_TextAutomaton(pats))))
        self.text_cache[key] = name
        return name

    def _coef(self, expr: str) -> str:
        """A coefficient of the elimination, named by a (non-recursive) rule once it is long."""
        if len(expr) > _COEF_LIMIT:
            return self.add("tx", expr)
        return expr

    def _text_expr(self, auto: "_TextAutomaton") -> str:
        """One regular expression (the body of a single rule, so the core compiles it to one
        minimized DFA with no rule edges) for the texts accepted from the automaton's root, by
        state elimination, deepest states first. Long coefficients become rules of their own;
        they are never recursive, so the region keeps one Earley item per automaton state."""
        live = auto.live_states()
        # X_q = F_q | sum_t E[q][t] X_t; every state accepts, so F_q starts as the empty string.
        final: Dict[int, str] = {q: '""' for q in live}
        coef: Dict[int, Dict[int, List[str]]] = {q: {} for q in live}
        for q in live:
            for cls, t in auto.edges(q):
                coef[q].setdefault(t, []).append(cls)

        def alt(parts: List[str]) -> str:
            return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"

        for q in reversed(live[1:]):
            loop = coef[q].pop(q, None)
            star = f"({' | '.join(loop)})*" if loop else ""
            f_q = f"{star} {final[q]}".strip() if star else final[q]
            terms = {
                t: self._coef(f"{star} {alt(es)}".strip() if star else alt(es))
                for t, es in coef[q].items()
            }
            f_q = self._coef(f_q)
            for p in coef:
                if p == q or q not in coef[p]:
                    continue
                into = self._coef(alt(coef[p].pop(q)))
                final[p] = f"({final[p]} | {into} {f_q})"
                for t, e in terms.items():
                    coef[p].setdefault(t, []).append(f"{into} {e}")
            del coef[q]
        loop = coef[0].pop(0, None)
        assert not coef[0], "every other state was eliminated"
        return f"({' | '.join(loop)})* {final[0]}" if loop else final[0]

    # ---- formats ----

    def lower(self, fmt: Any, stop: Tuple[str, ...]) -> str:
        """An EBNF expression for ``fmt``; ``stop`` holds the end strings of the enclosing tag when
        ``fmt`` is in tail position (unlimited formats may not contain them)."""
        kind = fmt.type
        method = getattr(self, "lower_" + kind, None)
        if method is None:  # pragma: no cover - every model type has a method
            raise InvalidStructuralTagError(f"Format type not recognized: {kind}")
        return method(fmt, stop)

    def lower_const_string(self, fmt: st.ConstStringFormat, stop: Tuple[str, ...]) -> str:
        return self.literal(fmt.value)

    def lower_json_schema(self, fmt: st.JSONSchemaFormat, stop: Tuple[str, ...]) -> str:
        if any(not e for e in fmt.excludes):
            raise InvalidStructuralTagError(
                "JSONSchema format's excludes must be an array of non-empty strings"
            )
        if fmt.excludes and fmt.style == "json":
            for e in fmt.excludes:
                if '"' in e or set(e) <= _JSON_STRUCTURE_CHARS:
                    raise UnsupportedFeatureError(
                        f"json_schema 'excludes' with style 'json': the exclude {e!r} could occur"
                        " outside a JSON string (it has a quote, or only characters of JSON"
                        " punctuation, whitespace, numbers and literals); only excludes that can"
                        " occur inside strings alone are supported"
                    )
        # The XML styles' module is imported only for them (at the first compile, importing it
        # took a quarter of the lowering where bytecode is not cached).
        if fmt.style != "json":
            from ._structural_tag_xml import NESTED_STYLES, xml_style_ebnf

            if fmt.excludes and fmt.style in NESTED_STYLES:
                raise InvalidStructuralTagError(
                    f"JSONSchemaFormat.excludes is not supported for the {fmt.style} style"
                )
        if any(e[0] in " \n\r\t" or e[-1] in " \n\r\t" for e in fmt.excludes):
            raise InvalidStructuralTagError(
                "the excludes of an XML json_schema style may not start or end with whitespace"
            )
        if fmt.style == "json":
            schema = json.dumps(fmt.json_schema)
            ebnf = _schema_ebnf(schema, fmt.max_whitespace_cnt, fmt.any_order)
            if fmt.excludes:
                names = (f"xstr.{k}" for k in itertools.count() if f"xstr.{k}" not in ebnf)
                ebnf = exclude_in_json_strings(ebnf, sorted(set(fmt.excludes)), lambda: next(names))
            return self.add_ebnf(ebnf, "json", share_leaves=True)
        ebnf = xml_style_ebnf(
            fmt.json_schema, fmt.style, fmt.any_order, fmt.max_whitespace_cnt, fmt.excludes
        )
        return self.add_ebnf(ebnf, fmt.style)

    def lower_qwen_xml_parameter(
        self, fmt: st.QwenXMLParameterFormat, stop: Tuple[str, ...]
    ) -> str:
        return self.lower_json_schema(
            st.JSONSchemaFormat(json_schema=fmt.json_schema, style="qwen_xml"), stop
        )

    def lower_any_text(self, fmt: st.AnyTextFormat, stop: Tuple[str, ...]) -> str:
        for e in fmt.excludes:
            if not e:
                raise InvalidStructuralTagError(
                    "any_text excludes may not contain the empty string"
                )
        return self.text(list(fmt.excludes) + list(stop), fmt.max_chars, fmt.max_tokens)

    def lower_grammar(self, fmt: st.GrammarFormat, stop: Tuple[str, ...]) -> str:
        # Parse once on its own so that errors point into the user's text.
        _core.Grammar.from_ebnf(fmt.grammar, "root")
        return self.add_ebnf(fmt.grammar, "grammar")

    def lower_regex(self, fmt: st.RegexFormat, stop: Tuple[str, ...]) -> str:
        _core.Grammar.from_regex(fmt.pattern)
        return self.add("regex", f"Regex({ebnf_literal(fmt.pattern)})")

    def lower_sequence(self, fmt: st.SequenceFormat, stop: Tuple[str, ...]) -> str:
        if not fmt.elements:
            raise InvalidStructuralTagError("Sequence format must have at least one element")
        parts = []
        last = len(fmt.elements) - 1
        for i, e in enumerate(fmt.elements):
            parts.append(self.lower(e, stop if i == last else ()))
        return self.add("seq", " ".join(parts))

    def lower_or(self, fmt: st.OrFormat, stop: Tuple[str, ...]) -> str:
        if not fmt.elements:
            raise InvalidStructuralTagError("Or format must have at least one element")
        return self.add("or", " | ".join(self.lower(e, stop) for e in fmt.elements))

    def lower_optional(self, fmt: st.OptionalFormat, stop: Tuple[str, ...]) -> str:
        return self.add("opt", f"({self.lower(fmt.content, stop)})?")

    def lower_plus(self, fmt: st.PlusFormat, stop: Tuple[str, ...]) -> str:
        return self.add("plus", f"({self.lower(fmt.content, ())})+")

    def lower_star(self, fmt: st.StarFormat, stop: Tuple[str, ...]) -> str:
        return self.add("star", f"({self.lower(fmt.content, ())})*")

    def lower_repeat(self, fmt: st.RepeatFormat, stop: Tuple[str, ...]) -> str:
        if fmt.min < 0 or (fmt.max != -1 and fmt.max < fmt.min):
            raise InvalidStructuralTagError(
                f"Repeat format has invalid bounds: min={fmt.min}, max={fmt.max}"
            )
        inner = self.lower(fmt.content, ())
        hi = "" if fmt.max == -1 else str(fmt.max)
        return self.add(
            "rep",
            f"({inner}){{{fmt.min},{hi}}}" if hi != str(fmt.min) else f"({inner}){{{fmt.min}}}",
        )

    def _ends(self, end: Any) -> Tuple[str, ...]:
        if isinstance(end, str):
            return (end,)
        if not end:
            raise InvalidStructuralTagError("Tag end list must not be empty")
        return tuple(end)

    def _token_text(self, i: int) -> Optional[str]:
        """The text of token ``i`` when it is an ordinary text token (so free text inside a tag
        it ends must not contain it), else None."""
        if self.tokens is None or i >= self.tokens.vocab_size:
            return None
        h = self.tokens.info._handle
        if h.is_special(i):
            return None
        try:
            return bytes(h.token_bytes(i)).decode("utf-8") or None
        except UnicodeDecodeError:
            return None

    def lower_tag(self, fmt: st.TagFormat, stop: Tuple[str, ...]) -> str:
        if isinstance(fmt.begin, st.TokenFormat):
            begin = f"Token({self.token_id(fmt.begin.token)})"
        else:
            begin = self.literal(fmt.begin)
        if isinstance(fmt.end, st.TokenFormat):
            end_id = self.token_id(fmt.end.token)
            text = self._token_text(end_id)
            self.pending_end_ids.append(end_id)
            try:
                content = self.lower(fmt.content, (text,) if text else ())
            finally:
                self.pending_end_ids.pop()
            return self.add("tag", f"{begin} {content} Token({end_id})")
        ends = self._ends(fmt.end)
        inner_stop = tuple(e for e in ends if e)
        content = self.lower(fmt.content, inner_stop)
        end_expr = " | ".join(self.literal(e) for e in ends)
        return self.add("tag", f"{begin} {content} ({end_expr})")

    def _tag_alts(self, tags: List[st.TagFormat]) -> str:
        return self.add("tags", " | ".join(self.lower_tag(t, ()) for t in tags))

    def lower_triggered_tags(self, fmt: st.TriggeredTagsFormat, stop: Tuple[str, ...]) -> str:
        if not fmt.triggers:
            raise InvalidStructuralTagError("Triggered tags format must have at least one trigger")
        if not fmt.tags:
            raise InvalidStructuralTagError("Triggered tags format must have at least one tag")
        for t in fmt.tags:
            if isinstance(t.begin, st.TokenFormat):
                raise InvalidStructuralTagError(
                    "Triggered tags must use string begins; use token_triggered_tags for tokens"
                )
            hits = [tr for tr in fmt.triggers if t.begin.startswith(tr)]
            if len(hits) != 1:
                raise InvalidStructuralTagError(
                    f"Tag begin {t.begin!r} must match exactly one trigger, matched {len(hits)}"
                )
        for tr in fmt.triggers:
            if not tr:
                raise InvalidStructuralTagError("Triggers must be non-empty strings")
        for e in fmt.excludes:
            if not e:
                raise InvalidStructuralTagError("Excludes must be non-empty strings")
        text = self.text(list(fmt.triggers) + list(fmt.excludes) + list(stop))
        tags = self._tag_alts(fmt.tags)
        # As XGrammar: with at_least_one the output starts with a tag (no text before it).
        if fmt.stop_after_first:
            body = tags if fmt.at_least_one else f"{text} ({tags})?"
        elif fmt.at_least_one:
            body = f"{tags} ({text} {tags})* {text}"
        else:
            body = f"{text} ({tags} {text})*"
        return self.add("triggered", body)

    def lower_tags_with_separator(
        self, fmt: st.TagsWithSeparatorFormat, stop: Tuple[str, ...]
    ) -> str:
        if not fmt.tags:
            raise InvalidStructuralTagError("Tags with separator format must have at least one tag")
        tags = self._tag_alts(fmt.tags)
        if fmt.stop_after_first:
            body = tags if fmt.at_least_one else f"({tags})?"
        else:
            sep = ebnf_literal(fmt.separator)
            many = f"{tags} ({sep} {tags})*"
            body = many if fmt.at_least_one else f"({many})?"
        return self.add("tagsep", body)

    def lower_dispatch(self, fmt: st.DispatchFormat, stop: Tuple[str, ...]) -> str:
        if not fmt.rules:
            raise InvalidStructuralTagError("Dispatch format must have at least one rule")
        pats = [p for p, _ in fmt.rules]
        if any(not p for p in pats) or any(not e for e in fmt.excludes):
            raise InvalidStructuralTagError(
                "Dispatch patterns and excludes must be non-empty strings"
            )
        text = self.text(pats + list(fmt.excludes) + list(stop))
        alts = " | ".join(f"{ebnf_literal(p)} {self.lower(f, ())}" for p, f in fmt.rules)
        arm = self.add("arm", alts)
        body = f"{text} ({arm} {text})*" if fmt.loop else f"{text} ({arm})?"
        return self.add("dispatch", body)

    # ---- token-level formats (the EBNF token macros) ----

    @property
    def pending_end_ids(self) -> List[int]:
        """Ids of the token ends of the enclosing tags (innermost last)."""
        if not hasattr(self, "_pending_end_ids"):
            self._pending_end_ids: List[int] = []
        return self._pending_end_ids

    def _free_tokens(self, excluded: List[int], stop: Tuple[str, ...]) -> str:
        """``ExcludeToken`` of ``excluded``, the token ends of the enclosing tag and the end
        strings that are one token."""
        ids = set(excluded) | set(self.stop_token_ids(stop)) | set(self.pending_end_ids[-1:])
        return f"ExcludeToken({', '.join(str(i) for i in sorted(ids))})"

    def lower_token(self, fmt: st.TokenFormat, stop: Tuple[str, ...]) -> str:
        return f"Token({self.token_id(fmt.token)})"

    def lower_exclude_token(self, fmt: st.ExcludeTokenFormat, stop: Tuple[str, ...]) -> str:
        ids = sorted({self.token_id(t) for t in fmt.exclude_tokens})
        return f"ExcludeToken({', '.join(str(i) for i in ids)})"

    def lower_any_tokens(self, fmt: st.AnyTokensFormat, stop: Tuple[str, ...]) -> str:
        free = self._free_tokens([self.token_id(t) for t in fmt.exclude_tokens], stop)
        rep = "*" if fmt.max_tokens is None else f"{{0,{fmt.max_tokens}}}"
        return self.add("anytok", f"{free}{rep}")

    def lower_token_triggered_tags(
        self, fmt: st.TokenTriggeredTagsFormat, stop: Tuple[str, ...]
    ) -> str:
        if not fmt.trigger_tokens:
            raise InvalidStructuralTagError(
                "Token triggered tags format must have at least one trigger token"
            )
        if not fmt.tags:
            raise InvalidStructuralTagError("Token triggered tags format must have at least one tag")
        triggers = [self.token_id(t) for t in fmt.trigger_tokens]
        for t in fmt.tags:
            if not isinstance(t.begin, st.TokenFormat):
                raise InvalidStructuralTagError(
                    "Token triggered tags must begin with a token (TokenFormat) that is a trigger"
                )
            if self.token_id(t.begin.token) not in triggers:
                raise InvalidStructuralTagError(
                    f"Tag begin token {t.begin.token!r} is not one of the trigger tokens"
                )
        excluded = triggers + [self.token_id(t) for t in fmt.exclude_tokens]
        free = self.add("freetok", f"{self._free_tokens(excluded, stop)}*")
        tags = self._tag_alts(fmt.tags)
        if fmt.stop_after_first:
            body = tags if fmt.at_least_one else f"{free} ({tags})?"
        elif fmt.at_least_one:
            body = f"{tags} ({free} {tags})* {free}"
        else:
            body = f"{free} ({tags} {free})*"
        return self.add("toktriggered", body)

    def lower_token_dispatch(self, fmt: st.TokenDispatchFormat, stop: Tuple[str, ...]) -> str:
        if not fmt.rules:
            raise InvalidStructuralTagError("Token dispatch format must have at least one rule")
        triggers = [self.token_id(t) for t, _ in fmt.rules]
        excluded = triggers + [self.token_id(t) for t in fmt.exclude_tokens]
        free = self.add("freetok", f"{self._free_tokens(excluded, stop)}*")
        alts = " | ".join(f"Token({i}) {self.lower(f, ())}" for i, (_, f) in zip(triggers, fmt.rules))
        arm = self.add("arm", alts)
        body = f"{free} ({arm} {free})*" if fmt.loop else f"{free} ({arm})?"
        return self.add("tokdispatch", body)


def lower_structural_tag(tag: "st.StructuralTag", tokenizer_info: Any = None) -> str:
    """EBNF text (root ``root``) for a validated structural tag; ``tokenizer_info`` (optional)
    resolves tokens given by text and matches begin/end strings that are one added token."""
    lw = _Lowerer(_tokens_of(tokenizer_info) if tokenizer_info is not None else None)
    top = lw.lower(tag.format, ())
    lines = [f"root ::= {top}"]
    for name, body in lw.rules:
        lines.append(body if not name else f"{name} ::= {body}")
    return "\n".join(lines) + "\n"


def parse_structural_tag(value: Any) -> "st.StructuralTag":
    """A StructuralTag from a model, JSON text or dict, with XGrammar's error classes."""
    from pydantic import ValidationError

    from .exception import InvalidJSONError

    if isinstance(value, st.StructuralTag):
        return value
    if isinstance(value, dict):
        data = value
    elif isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError as e:
            raise InvalidJSONError(f"Invalid JSON: {e}") from None
    else:
        raise ValueError("Invalid instance type")
    if not isinstance(data, dict):
        raise InvalidStructuralTagError("Structural tag must be a JSON object")
    if data.get("type", "structural_tag") != "structural_tag":
        raise InvalidStructuralTagError(
            f"Structural tag type must be 'structural_tag', got {data.get('type')!r}"
        )
    fmt = data.get("format")
    if isinstance(fmt, dict) and "type" in fmt:
        _check_types(fmt)
    try:
        return st.StructuralTag.model_validate(data)
    except ValidationError as e:
        raise InvalidStructuralTagError(f"Invalid structural tag: {e}") from None


_KNOWN_TYPES = {
    "const_string", "json_schema", "qwen_xml_parameter", "any_text", "grammar", "regex", "token",
    "exclude_token", "any_tokens", "sequence", "or", "optional", "plus", "star", "repeat", "tag",
    "triggered_tags", "token_triggered_tags", "tags_with_separator", "dispatch", "token_dispatch",
}  # fmt: skip


def _check_types(node: Any) -> None:
    """XGrammar's message for an unknown ``type``, found before pydantic's longer report. Walks the
    format tree only (not JSON Schemas)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
            continue
        if not isinstance(n, dict):
            continue
        t = n.get("type")
        if isinstance(t, str) and t not in _KNOWN_TYPES:
            raise InvalidStructuralTagError(f"Format type not recognized: {t}")
        for key in ("content", "elements", "tags", "begin", "end"):
            if isinstance(n.get(key), (dict, list)):
                stack.append(n[key])
        if isinstance(n.get("rules"), list):
            stack.extend(r[1] for r in n["rules"] if isinstance(r, (list, tuple)) and len(r) == 2)


def structural_tag_ebnf(
    args: Sequence[Any], kwargs: Dict[str, Any], tokenizer_info: Any = None
) -> str:
    """The EBNF of ``from_structural_tag(*args, **kwargs)`` in either call form (with the
    compiler's ``tokenizer_info`` for ``compile_structural_tag``)."""
    if len(args) == 1 and not kwargs:
        tag = (
            parse_structural_tag(args[0])
            if isinstance(args[0], (str, dict, st.StructuralTag))
            else None
        )
        if tag is None:
            raise TypeError("Invalid argument type for from_structural_tag")
    elif len(args) == 2 and isinstance(args[0], list) and isinstance(args[1], list):
        tag = st.StructuralTag.from_legacy_structural_tag(args[0], args[1])
    elif not args and "structural_tag" in kwargs:
        tag = parse_structural_tag(kwargs["structural_tag"])
    elif not args and "tags" in kwargs and "triggers" in kwargs:
        tag = st.StructuralTag.from_legacy_structural_tag(kwargs["tags"], kwargs["triggers"])
    else:
        raise TypeError("Invalid arguments for from_structural_tag")
    return lower_structural_tag(tag, tokenizer_info)
