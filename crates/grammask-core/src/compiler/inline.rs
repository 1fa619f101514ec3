//! Inlining: which rules are copied into their callers' automata instead of being referenced.
//!
//! Pipeline place: the first step of [`Automata::build`](super::Automata::build); its plan
//! tells the NFA construction (`nfa.rs`) which rule references to expand in place.
use super::lists::Lists;
use crate::grammar::{Expr, ExprId, Grammar};

/// Rules small enough to be copied into their callers' automata instead of being referenced.
/// PERF: inlining leaf rules (`char`, `escape`, `digit`, ...) leaves terminal-like rules such as a
/// JSON string with no rule edges, so kernel walks step them without the Earley machinery and
/// their classification is shared wherever the rule is used.
/// A rule referenced from one place is inlined up to this size; a shared rule (e.g. `string`
/// used by every property) only when tiny, so its states, and their cached masks, stay shared.
const INLINE_MAX_STATES: usize = 4096;
const INLINE_SHARED_MAX_STATES: usize = 32;
/// ... and while its copies add up to at most this many states. PERF: an any-order object's
/// entries (`"key" ws ":" ws value`, under the shared limit for keys up to ~20 bytes) are used by
/// up to 2^(n-1) of its key-set rules; copied into each they made most of the automata's states
/// (o44208: 496k states, 322k with this bound; TTFM 323 -> 252 ms). Referenced instead, each
/// key-set rule holds one rule edge per entry. Ordinary schemas' shared rules stay under it.
const INLINE_SHARED_TOTAL_STATES: usize = 4096;
/// A shared rule that references no other (non-inlined) rule, like `json_char`, is inlined up to
/// this size: plain regions walk fast, and equal copies hash alike for the shared kernel cache.
const INLINE_LEXICAL_MAX_STATES: usize = 512;
/// ... and, when it uses other rules, while its copies add up to at most this many states: the
/// property rules of an open object are used by each of its up to 2^n subset rules, and copying
/// them into every one multiplied the automata's build time. Leaf rules (`json_char`, `ws`) are
/// always copied: string bodies without rule edges are what the kernel shortcuts of `slice/`
/// recognise.
const INLINE_LEXICAL_TOTAL_STATES: usize = 1024;
/// Inlined rules may nest at most this deep (bounds the automaton builder's recursion).
pub(super) const INLINE_MAX_DEPTH: u32 = 8;

/// Which rules to inline: non-recursive rules (every rule they reach is decided before them,
/// Kahn's order) whose estimated automaton is small. The root is never inlined. Also each rule's
/// estimated NFA states with inlined rules expanded (for `tail.rs`), and the rules each rule's
/// body references, sorted, each once (for `equal_rules.rs`).
pub(crate) fn inline_plan(g: &Grammar) -> (Vec<bool>, Vec<usize>, Lists) {
    let n = g.rules().len();
    let mut deps = Lists::with_capacity(n, 0);
    let mut refs = vec![0usize; n];
    // seen[e] == r + 1: expression e was visited for rule r.
    let mut seen = vec![0u32; g.exprs().len()];
    let mut stack = Vec::new();
    // PERF: collected in one buffer, then copied at their final size (growing each rule's
    // vector was a fifth of the plan on band schemas).
    let mut found = Vec::new();
    for (r, rule) in g.rules().iter().enumerate() {
        stack.push(rule.body);
        while let Some(e) = stack.pop() {
            if seen[e.index()] == r as u32 + 1 {
                continue;
            }
            seen[e.index()] = r as u32 + 1;
            if let Expr::RuleRef(x) = g.expr(e) {
                found.push(x.0);
                refs[x.index()] += 1;
            }
            stack.extend_from_slice(g.children(e));
        }
        found.sort_unstable();
        found.dedup();
        deps.push(found.drain(..));
    }
    // Rules on a cycle are never inlined (their copies would nest forever), so they are decided
    // from the start: a rule that only uses one (a tool's tag calling a recursive JSON value) is
    // decided like any other. Before, such rules were never ready and never inlined, which left
    // e.g. every tag of a tool with a free-form parameter as a rule of its own, one more item in
    // every row of the tags' dispatch.
    let cyclic = on_cycle(&deps);
    let users = Lists::from_pairs(n, deps.pairs().map(|(r, d)| (d, r)));
    let mut pending: Vec<usize> =
        (0..n).map(|r| deps.get(r).iter().filter(|&&d| !cyclic[d as usize]).count()).collect();
    let kept = kept_rules(g, &users);
    let mut inline = vec![false; n];
    let mut size = vec![usize::MAX; n];
    let mut depth = vec![0u32; n];
    // lexical[r]: r's expansion (with inlined rules) references no rule.
    let mut lexical = vec![false; n];
    let mut ready: Vec<usize> = (0..n).filter(|&r| pending[r] == 0 && !cyclic[r]).collect();
    let mut memo = vec![None; g.exprs().len()];
    let mut walk = Vec::new();
    while let Some(r) = ready.pop() {
        let (sz, dp) = estimate(g, g.rules()[r].body, &inline, &size, &depth, &mut memo, &mut walk);
        size[r] = sz;
        depth[r] = dp;
        lexical[r] = deps.get(r).iter().all(|&d| inline[d as usize] && lexical[d as usize]);
        let limit = if refs[r] <= 1 {
            INLINE_MAX_STATES
        } else if lexical[r] && (deps.get(r).is_empty() || sz.saturating_mul(refs[r]) <= INLINE_LEXICAL_TOTAL_STATES) {
            INLINE_LEXICAL_MAX_STATES
        } else if sz.saturating_mul(refs[r]) <= INLINE_SHARED_TOTAL_STATES {
            INLINE_SHARED_MAX_STATES
        } else {
            0
        };
        // A rule with a lookahead keeps its identity: its completion carries the assertion.
        // So does a rule with options (captures, temperatures and bounds are per occurrence).
        inline[r] = r != g.root().index()
            && !kept[r]
            && g.rules()[r].lookahead.is_none()
            && g.rule_options(crate::grammar::RuleId(r as u32)).is_none()
            && sz <= limit
            && dp < INLINE_MAX_DEPTH;
        for u in users.get(r).iter().map(|&u| u as usize).filter(|&u| !cyclic[u]) {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
    // Rules on a cycle were never ready: their own estimate (references to them count 2).
    for r in 0..n {
        if size[r] == usize::MAX {
            size[r] = estimate(g, g.rules()[r].body, &inline, &size, &depth, &mut memo, &mut walk).0;
        }
    }
    (inline, size, deps)
}

/// Per rule: the grammar keeps it ([`Grammar::kept`]: the shared `\u`-escape rule a counted
/// string's positions call), or it is the first node of an open object's excluded-key trie (a rule of
/// [`crate::grammar::ExcludedWords`] with some words, used by a rule that is none): kept a rule,
/// so that the extra-key entry's state after its `"` calls it, and its kernel is composed from the
/// string body's (`CompiledGrammar::excluded_kernel_in`) instead of a walk of the inlined trie.
/// PERF: inlined (a trie under `INLINE_MAX_DEPTH` levels: short keys), each object's first key
/// start walked the trie's cover search and the `"` subtrees (~0.85 M instructions on Llama 3,
/// MaskBench `Github_easy---o85180`), the largest group of the mask p99 band.
fn kept_rules(g: &Grammar, users: &Lists) -> Vec<bool> {
    let mut kept = vec![false; g.rules().len()];
    for r in g.kept() {
        kept[r.index()] = true;
    }
    let Some(excluded) = g.excluded_words() else { return kept };
    let listed = |r: usize| excluded.rules.binary_search_by_key(&r, |e| e.0.index()).is_ok();
    for (r, words) in &excluded.rules {
        let r = r.index();
        kept[r] = !words.is_empty() && users.get(r).iter().any(|&u| !listed(u as usize));
    }
    kept
}

/// Per rule: it is on a cycle of rule references (`deps.get(r)`: the rules `r` references), i.e. in
/// a strongly connected component of more than one rule, or one that references itself.
fn on_cycle(deps: &Lists) -> Vec<bool> {
    let comp = super::tail::sccs(deps);
    let mut size = vec![0u32; deps.len()];
    for &c in &comp {
        size[c as usize] += 1;
    }
    (0..deps.len()).map(|r| size[comp[r] as usize] > 1 || deps.get(r).contains(&(r as u32))).collect()
}

/// Estimated NFA states of `e` with inlined rules expanded, and the inline nesting depth.
/// `memo` (indexed by expression) is shared by all calls: an expression's estimate only depends
/// on the rules it references, which are all decided before any rule using it (Kahn's order).
/// `stack`: a buffer, empty between calls.
fn estimate(
    g: &Grammar,
    e: ExprId,
    inline: &[bool],
    size: &[usize],
    depth: &[u32],
    memo: &mut [Option<(usize, u32)>],
    stack: &mut Vec<(ExprId, bool)>,
) -> (usize, u32) {
    stack.push((e, false));
    while let Some((x, expanded)) = stack.pop() {
        if memo[x.index()].is_some() {
            continue;
        }
        if !expanded {
            stack.push((x, true));
            stack.extend(g.children(x).iter().map(|&c| (c, false)));
            continue;
        }
        let kids = |memo: &[Option<(usize, u32)>]| {
            g.children(x).iter().fold((0usize, 0u32), |(s, d), c| {
                let (cs, cd) = memo[c.index()].unwrap_or((0, 0));
                (s.saturating_add(cs), d.max(cd))
            })
        };
        let v = match g.expr(x) {
            Expr::Bytes(b) => (b.len() + 1, 0),
            Expr::CharClass(r) => (2 + 3 * r.len(), 0),
            Expr::Seq(_) | Expr::Choice(_) => {
                let (s, d) = kids(memo);
                (s + 2, d)
            }
            &Expr::Repeat { min, max, .. } => {
                let (s, d) = kids(memo);
                // The copies `Nfa::build` makes: `min` and a loop when unbounded, else `max`
                // (`x?` is one copy: counting two doubled each level of nested optionals).
                let copies = match max {
                    None => min as usize + 1,
                    Some(max) => max.max(min) as usize,
                };
                (s.saturating_mul(copies).saturating_add(2), d)
            }
            Expr::RuleRef(r) if inline[r.index()] => (size[r.index()], depth[r.index()] + 1),
            Expr::RuleRef(_) => (2, 0),
            // About six states per key character (raw, `\`, `\u` and three hex digits).
            // A token expression is its own rule (`Grammar::lift_token_exprs`), never inlined.
            Expr::Token(_) | Expr::ExcludeToken(_) => (usize::MAX / 4, 0),
            Expr::JsonStringIn(keys) | Expr::JsonStringExcept(keys) => {
                (24 + 6 * keys.iter().map(|k| k.len()).sum::<usize>(), 0)
            }
        };
        memo[x.index()] = Some(v);
    }
    memo[e.index()].unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebnf::parse_ebnf;

    fn inlined(src: &str) -> Vec<(String, bool)> {
        let g = parse_ebnf(src, "root").unwrap();
        let (inline, _, _) = inline_plan(&g);
        g.rules().iter().zip(inline).map(|(r, i)| (r.name.clone(), i)).collect()
    }

    #[test]
    fn rules_using_a_recursive_rule_are_inlined() {
        // `tag` uses the recursive `value` but is on no cycle itself: inlined into `tags`.
        let plan = inlined(
            r#"root ::= tags
tags ::= tag | "x"
tag ::= "{" value "}"
value ::= "[" value "]" | "0"
"#,
        );
        let get = |n: &str| plan.iter().find(|(r, _)| r == n).unwrap().1;
        assert!(get("tag"));
        assert!(!get("value"));
        assert!(!get("root"));
    }

    #[test]
    fn nested_optionals_are_estimated_once_each() {
        // `x?` builds one copy of `x`: twelve nested optionals cost twelve letters, not 2^12
        // (which kept the state rules of an unanchored pattern's DFA out of one tail group).
        let mut body = String::from("\"z\"");
        for c in 'a'..='l' {
            body = format!("\"{c}\" ({body})?");
        }
        let g = parse_ebnf(&format!("root ::= x x\nx ::= {body}\n"), "root").unwrap();
        let (_, size, _) = inline_plan(&g);
        let x = g.rules().iter().position(|r| r.name == "x").unwrap();
        assert!(size[x] < 200, "estimate {}", size[x]);
    }

    #[test]
    fn entries_of_many_key_set_rules_stay_rules() {
        use std::fmt::Write as _;
        // An entry (`"key" ":" value`, value a rule of its own) within the shared limit is
        // copied into a few callers, but not into the hundreds of key-set rules of an
        // any-order object, whose copies would add up past `INLINE_SHARED_TOTAL_STATES`.
        let mut src = String::from("root ::= s0 t0\n");
        src.push_str("value ::= \"[\" value \"]\" | \"0\"\n");
        src.push_str("e ::= \"\\\"\" \"namedVariables\" \"\\\"\" \":\" value\n");
        src.push_str("f ::= \"\\\"\" \"namedVariables\" \"\\\"\" \":\" value \"x\"\n");
        for i in 0..300 {
            let _ = writeln!(src, "s{i} ::= \"\" | \",\" e s{}", i + 1);
        }
        src.push_str("s300 ::= \"\"\n");
        for i in 0..3 {
            let _ = writeln!(src, "t{i} ::= \"\" | \",\" f t{}", i + 1);
        }
        src.push_str("t3 ::= \"\"\n");
        let plan = inlined(&src);
        let get = |n: &str| plan.iter().find(|(r, _)| r == n).unwrap().1;
        assert!(!get("e"));
        assert!(get("f"));
    }

    #[test]
    fn excluded_key_tries_stay_rules_below_their_entry() {
        use crate::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
        // A short key trie (`config`, `content`) is one rule (its nodes written in its body,
        // `jstr::not_in_ascii_trie`), kept a rule and called by the extra-key entry; the trie of
        // no words (an object without properties) is inlined as before.
        let schema =
            r#"{"type": "object", "properties": {"config": {"type": "object"}, "content": {"type": "integer"}}}"#;
        let g =
            json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
        let (inline, _, _) = inline_plan(&g);
        let excluded = g.excluded_words().unwrap();
        let name = |r: crate::grammar::RuleId| g.rule(r).name.as_str();
        let (mut kept, mut copied) = (Vec::new(), Vec::new());
        for (r, words) in &excluded.rules {
            if inline[r.index()] {
                copied.push(name(*r));
            } else {
                kept.push((name(*r), words.len()));
            }
        }
        assert!(kept.len() == 1 && kept[0].1 == 2, "kept {kept:?}, inlined {copied:?}");
        let first = kept[0].0;
        assert!(g.rule_by_name(&format!("{first}.1")).is_none() && copied.len() == 1, "{copied:?}");
    }

    #[test]
    fn cycles_are_found() {
        // a -> b -> a, c -> c, d -> a (d reaches a cycle but is on none).
        let mut deps = Lists::default();
        for list in [&[1][..], &[0], &[2], &[0], &[]] {
            deps.push(list.iter().copied());
        }
        assert_eq!(on_cycle(&deps), vec![true, true, true, false, false]);
    }
}
