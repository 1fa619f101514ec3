//! Building a grammar's automata: the compiler's driver.
//!
//! Pipeline place: takes a [`Grammar`]; decides which rules to inline (`inline.rs`), builds each
//! remaining rule's Thompson NFA (`nfa.rs`), determinizes it (`determinize.rs`) and minimizes it
//! (`minimize.rs`), on up to [`MAX_BUILD_THREADS`] threads sharing one state budget; then
//! concatenates the rule DFAs into one [`Automata`] and prunes unproductive rules and dead states.
use super::bounded::{bound_dfa, exclude_dfa};
use super::determinize::{determinize, Scratch};
use super::dfa::Dfa;
use super::inline::inline_plan;
use super::key_set_dfa::{Generic, KeySetWriter, Plans};
use super::lists::group_by_key;
use super::lookahead::LaTable;
use super::memo::{DfaMemo, Found, RuleMemo};
use super::minimize::minimize;
use super::nfa::Nfa;
use super::scc::SccScratch;
use super::tail::tail_plan;
use super::token_budget::{exhausted_dfa, RuleBudget, TokenBudgets};
use super::{Automata, ByteEdge, State, StateId};
use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::grammar::{Expr, Grammar, RuleId};
use crate::limits;
use crate::rule_options::HiddenStop;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

impl Automata {
    /// Builds the automata of `grammar`, on as many threads as the machine allows (at most
    /// [`MAX_BUILD_THREADS`]).
    pub fn build(grammar: &Grammar) -> Result<Automata> {
        Self::build_on(grammar, usize::MAX)
    }

    /// [`Self::build`] on at most `max_threads` threads, the calling one included (`1`: no thread
    /// is started).
    pub fn build_on(grammar: &Grammar, max_threads: usize) -> Result<Automata> {
        Self::build_shared(grammar, max_threads, None)
    }

    /// [`Self::build_on`], taking the DFAs of rules built before from `shared` and storing the
    /// new ones there. The automata are those [`Self::build_on`] makes.
    pub fn build_shared(grammar: &Grammar, max_threads: usize, shared: Option<&RuleMemo>) -> Result<Automata> {
        // Token expressions become rules of their own, one token edge each (`token_edges.rs`).
        let lifted;
        let grammar = if grammar.has_token_exprs() {
            lifted = grammar.lift_token_exprs();
            &lifted
        } else {
            grammar
        };
        let (inline, size, deps) = inline_plan(grammar);
        let tail = tail_plan(grammar, &inline, &size);
        // The rules with an automaton of their own. An inlined rule is copied into every
        // automaton that uses it and never named by a rule edge: its own automaton would be
        // unreachable, so it gets an empty one.
        // So does a tail-group member that only its group's tail references use (`tail.rs`).
        // Of a class of equal rules only the representative, which every rule edge names.
        let rep = super::equal_rules::equal_rules(grammar, &inline, &deps, &tail);
        let splice = shared_inlined(grammar, &inline, &rep);
        let todo: Vec<usize> =
            (0..grammar.rules().len()).filter(|&r| !inline[r] && tail.needed[r] && rep[r].index() == r).collect();
        // A `max_tokens` rule that is not regular keeps its rule edges (`RecBudgets`).
        // So does a recursive `max_chars` rule, or one using a `max_tokens` rule (`CharBudgets`).
        let budgeted = grammar.all_rule_options().iter().any(|(_, o)| o.max_tokens.is_some() || o.max_chars.is_some());
        let recursive = if budgeted { reaches_cycle(grammar) } else { Vec::new() };
        let char_leveled: Vec<bool> = if budgeted {
            recursive.iter().zip(reaches_token_budget(grammar)).map(|(&a, b)| a || b).collect()
        } else {
            Vec::new()
        };
        // The `max_tokens` rules that keep their rule edges: recursive ones, and those using
        // another `max_tokens` rule (nested budgets).
        let leveled: Vec<bool> = if budgeted {
            recursive.iter().zip(nests_token_budget(grammar)).map(|(&a, b)| a || b).collect()
        } else {
            Vec::new()
        };
        // Key-set rules (the `own_class` hint) without options: tried by the direct writer first.
        let mut key_set = vec![false; grammar.rules().len()];
        for r in grammar.own_class() {
            key_set[r.index()] = grammar.rule_options(*r).is_none();
        }
        let plans = Plans { inline: &inline, rep: &rep, tail_group: &tail.group };
        let budget = AtomicUsize::new(limits::MAX_AUTOMATON_STATES);
        let workers = build_threads().min(max_threads).min(todo.len() / RULES_PER_THREAD).max(1);
        let next = AtomicUsize::new(0);
        let shared_misses = AtomicUsize::new(0);
        // Each worker takes the next rule until none is left: (rule, its automaton, the
        // exhausted twin of a token-budgeted rule).
        let work = || -> Result<Vec<Built>> {
            let mut nfa =
                Nfa { inline: &inline, rep: &rep, tail_group: &tail.group, splice: &splice, ..Nfa::default() };
            let (mut scratch, mut min_scratch) = (Scratch::default(), SccScratch::default());
            let mut out: Vec<Built> = Vec::new();
            let mut memo = DfaMemo::default();
            let mut writer = KeySetWriter::default();
            let mut written = KeySetWrites::default();
            while let Some(&r) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                let body = grammar.rules()[r].body;
                if let Some(d) = super::token_edges::token_rule_dfa(grammar, body) {
                    out.push((r, d, None));
                    continue;
                }
                if key_set[r] && direct_on() {
                    match writer.write(grammar, RuleId(r as u32), &plans) {
                        Ok((d, charge)) => {
                            if let Err(e) = with_budget(&budget, |b| take_states(b, charge)) {
                                next.store(todo.len(), Ordering::Relaxed);
                                return Err(e);
                            }
                            written.direct += 1;
                            out.push((r, d, None));
                            continue;
                        }
                        Err(Generic::Inlined) => written.inlined += 1,
                        Err(Generic::Shape) => written.shape += 1,
                    }
                }
                let mut limit = bounded_limit(grammar, r);
                let max_tokens = grammar.rule_options(RuleId(r as u32)).and_then(|o| o.max_tokens);
                let rec = keeps_token_edges(grammar, &recursive, &char_leveled, &leveled, r);
                if rec || rec_max_chars(grammar, &recursive, &char_leveled, r).is_some() {
                    limit = None;
                }
                let excludes = grammar.rule_options(RuleId(r as u32)).map_or(&[][..], |o| &o.excludes[..]);
                // Only plain rules are memoized: their DFA is the minimized subset construction.
                let plain = limit.is_none() && excludes.is_empty() && max_tokens.is_none() && memo_on();
                // The memo key this rule's DFA is stored under, and its subset construction's states.
                let mut new_key = None;
                // Ask the shared memo? (Not once this build missed too often: its rules are
                // its own.) Its spliced inlined rules too.
                let asking = shared.is_some() && shared_misses.load(Ordering::Relaxed) < SHARED_MISSES_PER_BUILD;
                nfa.shared = shared.filter(|_| asking && memo_on());
                let dfa = with_budget(&budget, |b| {
                    nfa.clear();
                    if let Some((_, kind, what)) = &limit {
                        nfa.inline_all = true;
                        nfa.keep_token_rules = true;
                        nfa.regular_for = Some((*kind, what.clone()));
                        nfa.inlining.push(RuleId(r as u32));
                    } else if !excludes.is_empty() {
                        nfa.inline_all = true;
                        // Unsupported, not invalid: a recursive rule may still be regular
                        // (the JSON converter writes some pattern automata as right recursion).
                        let what = format!("the rule '{}' with excludes", grammar.rules()[r].name);
                        nfa.regular_for = Some((ErrorKind::Unsupported, what));
                    }
                    let built = nfa.build_rule(grammar, RuleId(r as u32), b);
                    nfa.inline_all = false;
                    nfa.keep_token_rules = false;
                    nfa.regular_for = None;
                    nfa.inlining.clear();
                    let (start, end) = built?;
                    let found = if plain { memo.find(&nfa, start, end, asking) } else { Found::Skip };
                    if let Found::Built(id, at, states) = found {
                        // As subset construction would: its states counted against the budget.
                        take_states(b, states)?;
                        return Ok((memo.renamed(id, &out[at].1), None));
                    }
                    // New to this worker: built by an earlier compile?
                    let shared = shared.filter(|_| asking && matches!(found, Found::New(_) | Found::Unkeyed));
                    if let Some((dfa, states)) = shared.and_then(|m| m.get(memo.key())) {
                        take_states(b, states)?;
                        if let Found::New(id) = found {
                            new_key = Some((id, states));
                        }
                        return Ok((memo.unranked(&dfa), None));
                    }
                    nfa.freeze();
                    let det = determinize(&nfa, start, end, b, &mut scratch)?;
                    #[cfg(test)]
                    SUBSET_BUILDS.with(|n| n.set(n.get() + 1));
                    let states = det.len();
                    if let Found::New(id) = found {
                        new_key = Some((id, states));
                    }
                    let mut dfa = minimize(det, &mut min_scratch);
                    if let Some(m) = shared {
                        shared_misses.fetch_add(1, Ordering::Relaxed);
                        // A plain rule's DFA is its minimized subset construction.
                        m.insert(memo.key(), &dfa, states, |d| memo.ranked(d));
                    }
                    if !excludes.is_empty() {
                        dfa = minimize(exclude_dfa(&dfa, excludes, b)?, &mut min_scratch);
                    }
                    let dfa = match &limit {
                        Some((Some(n), _, _)) => minimize(bound_dfa(&dfa, *n, b)?, &mut min_scratch),
                        _ => dfa,
                    };
                    match max_tokens {
                        // Recursive: twins are added to the whole automata (`add_rec_twins`).
                        Some(_) if rec => Ok((dfa, None)),
                        // A budget of 0 is spent from the start.
                        Some(0) => Ok((minimize(exhausted_dfa(&dfa), &mut min_scratch), None)),
                        Some(_) => {
                            let twin = exhausted_dfa(&dfa);
                            take_states(b, twin.len())?;
                            Ok((dfa, Some(twin)))
                        }
                        None => Ok((dfa, None)),
                    }
                });
                match dfa {
                    Ok((d, twin)) => {
                        if let Some((id, states)) = new_key {
                            memo.store(id, out.len(), states);
                        }
                        out.push((r, d, twin));
                    }
                    Err(e) => {
                        // The other workers stop at their next rule.
                        next.store(todo.len(), Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            written.publish();
            Ok(out)
        };
        let parts: Vec<Result<Vec<Built>>> = if workers == 1 {
            vec![work()]
        } else {
            #[cfg(test)]
            WORKERS_STARTED.with(|n| n.set(n.get() + workers - 1));
            std::thread::scope(|sc| {
                let handles: Vec<_> = (1..workers).map(|_| sc.spawn(work)).collect();
                let mut parts = vec![work()];
                parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
                parts
            })
        };
        let mut built: Vec<Option<Dfa>> = (0..grammar.rules().len()).map(|_| None).collect();
        let mut twins: Vec<(usize, Dfa)> = Vec::new();
        for part in parts {
            for (r, d, twin) in part? {
                built[r] = Some(d);
                twins.extend(twin.map(|t| (r, t)));
            }
        }
        twins.sort_unstable_by_key(|t| t.0);
        // A rule without an automaton (`None`) gets one non-final state without edges (`assemble`).
        let dfas = built;
        let mut budget = budget.into_inner();
        #[cfg(test)]
        BUDGET_USED.with(|n| n.set(limits::MAX_AUTOMATON_STATES - budget));
        let mut nfa = Nfa { inline: &inline, rep: &rep, ..Nfa::default() };
        let (mut scratch, mut min_scratch) = (Scratch::default(), SccScratch::default());
        // Lookaheads must be regular: every rule they use is inlined.
        let mut la_dfas = Vec::new();
        for (r, rule) in grammar.rules().iter().enumerate() {
            if let Some(la) = rule.lookahead {
                nfa.clear();
                nfa.inline_all = true;
                let (start, end) = nfa.build(grammar, la, &mut budget)?;
                nfa.freeze();
                let dfa = minimize(determinize(&nfa, start, end, &mut budget, &mut scratch)?, &mut min_scratch);
                if !dfa.finals[0] {
                    la_dfas.push((r, dfa));
                }
            }
        }
        // The body and stop automata of `capture_hidden_stop_rule` rules, for captures.
        let mut stop_splits = Vec::new();
        for (r, o) in grammar.all_rule_options() {
            if !matches!(o.hidden_suffix, Some((HiddenStop::LastRule, _))) {
                continue;
            }
            let parts = hidden_stop_parts(grammar, *r)?;
            let mut pair = Vec::with_capacity(2);
            for part in parts {
                nfa.clear();
                nfa.inline_all = true;
                nfa.regular_for =
                    Some((ErrorKind::InvalidGrammar, format!("the stop of rule '{}'", grammar.rule(*r).name)));
                let (start, end) = nfa.build(grammar, grammar.rule(part).body, &mut budget)?;
                nfa.freeze();
                pair.push(minimize(determinize(&nfa, start, end, &mut budget, &mut scratch)?, &mut min_scratch));
            }
            let stop = pair.pop().unwrap_or_default();
            let body = pair.pop().unwrap_or_default();
            stop_splits.push((*r, super::automata::StopSplit { body, stop }));
        }
        let mut ranges = Vec::with_capacity(dfas.len());
        let mut at = 0u32;
        for d in &dfas {
            let len = d.as_ref().map_or(1, Dfa::len) as u32;
            ranges.push((at, at + len));
            at += len;
        }
        let mut a = assemble(grammar, dfas, la_dfas, twins);
        a.stop_splits = stop_splits;
        a.tokens = super::token_edges::TokenRules::new(grammar);
        a.prune()?;
        let bounds: Vec<(RuleId, u32)> =
            grammar.all_rule_options().iter().filter_map(|(r, o)| Some((*r, o.max_tokens?))).collect();
        let rec_roots: Vec<RuleId> = bounds
            .iter()
            .filter(|(r, _)| keeps_token_edges(grammar, &recursive, &char_leveled, &leveled, r.index()))
            .map(|b| b.0)
            .collect();
        if !rec_roots.is_empty() {
            // Token edges are one token each, weighing one byte on the twins' shortest ways; with
            // lookahead their completions step the items' obligations too
            // (`Chart::token_resumed_la`).
            // Every budgeted rule moves to its twin by its items' spend points.
            let roots: Vec<RuleId> = bounds.iter().map(|b| b.0).collect();
            super::token_budget::add_rec_twins(&mut a, &roots, &rec_roots, &ranges, &bounds)?;
        }
        let char_rules: Vec<(RuleId, u32)> = (0..grammar.rules().len())
            .filter_map(|r| Some((RuleId(r as u32), rec_max_chars(grammar, &recursive, &char_leveled, r)?)))
            .collect();
        if !char_rules.is_empty() {
            // With recursive `max_tokens` rules or lookahead too, items' fields index triples of
            // spend points, occurrence numbers and obligations ([`crate::earley::Item`]). Token
            // edges count their token's characters (`crate::token_edges`), whatever the budgets.
            a.chars = Some(Box::new(super::char_budget::CharBudgets::new(a.num_rules(), char_rules)));
        }
        Ok(a)
    }
}

/// The `max_chars` of rule `r` when it keeps its rule edges (`leveled[r]`: it reaches a cycle of
/// rule references or a `max_tokens` rule): a budget the chart enforces (`char_budget.rs`), not
/// its automaton. A `lazy` rule is `max_chars=0` there, when it uses a `max_tokens` rule and is
/// not recursive (a recursive one is refused, `nfa.rs`).
fn rec_max_chars(g: &Grammar, recursive: &[bool], leveled: &[bool], r: usize) -> Option<u32> {
    let o = g.rule_options(RuleId(r as u32))?;
    let at = |v: &[bool]| v.get(r).copied().unwrap_or(false);
    if o.lazy {
        return (at(leveled) && !at(recursive)).then_some(0);
    }
    at(leveled).then_some(o.max_chars).flatten()
}

/// Whether rule `r` has a `max_tokens` budget that the chart enforces ([`super::RecBudgets`]):
/// its rule keeps its rule edges, because it is recursive, uses another `max_tokens` rule
/// (`leveled`), or has a chart-enforced `max_chars` or `lazy` too ([`rec_max_chars`]).
fn keeps_token_edges(g: &Grammar, recursive: &[bool], char_leveled: &[bool], leveled: &[bool], r: usize) -> bool {
    let Some(_) = g.rule_options(RuleId(r as u32)).and_then(|o| o.max_tokens) else { return false };
    rec_max_chars(g, recursive, char_leveled, r).is_some()
        || (leveled.get(r).copied().unwrap_or(false) && bounded_limit(g, r).is_some_and(|l| l.0.is_none()))
}

/// Per rule: it reaches a `max_tokens` rule other than itself. Inlined into a `max_chars` rule's
/// automaton, that rule's budget would have no occurrence to count from.
fn reaches_token_budget(g: &Grammar) -> Vec<bool> {
    let deps = rule_deps(g);
    let budgeted = |r: usize| g.rule_options(RuleId(r as u32)).is_some_and(|o| o.max_tokens.is_some());
    (0..g.rules().len())
        .map(|r| {
            let mut seen = vec![false; deps.len()];
            let mut stack = deps[r].clone();
            while let Some(x) = stack.pop() {
                if x != r && budgeted(x) {
                    return true;
                }
                if !std::mem::replace(&mut seen[x], true) {
                    stack.extend_from_slice(&deps[x]);
                }
            }
            false
        })
        .collect()
}

/// Per rule: it reaches a cycle of rule references (its body, with every rule it uses inlined,
/// would not be regular).
fn reaches_cycle(g: &Grammar) -> Vec<bool> {
    let n = g.rules().len();
    let deps = rule_deps(g);
    // A rule reaches a cycle if a depth-first walk from it meets a rule on its own path.
    let mut out = vec![false; n];
    for r in 0..n {
        let mut state = vec![0u8; n]; // 0 new, 1 on path, 2 done
        let mut path: Vec<(usize, usize)> = vec![(r, 0)];
        state[r] = 1;
        'walk: while let Some(&mut (x, ref mut i)) = path.last_mut() {
            if let Some(&y) = deps[x].get(*i) {
                *i += 1;
                match state[y] {
                    0 => {
                        state[y] = 1;
                        path.push((y, 0));
                    }
                    1 => {
                        out[r] = true;
                        break 'walk;
                    }
                    _ => {}
                }
            } else {
                state[x] = 2;
                path.pop();
            }
        }
    }
    out
}

/// Per rule: it has `max_tokens` (not `lazy` nor `max_chars`) and reaches another `max_tokens`
/// rule. Inlined, that rule's budget would be lost: such a rule keeps its rule edges
/// (`RecBudgets`), like a recursive one.
fn nests_token_budget(g: &Grammar) -> Vec<bool> {
    let reaches = reaches_token_budget(g);
    (0..g.rules().len()).map(|r| reaches[r] && bounded_limit(g, r).is_some_and(|l| l.0.is_none())).collect()
}

/// Per rule: the rules its body references.
fn rule_deps(g: &Grammar) -> Vec<Vec<usize>> {
    let n = g.rules().len();
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut seen = vec![usize::MAX; g.exprs().len()];
    for (r, rule) in g.rules().iter().enumerate() {
        let mut stack = vec![rule.body];
        while let Some(e) = stack.pop() {
            if std::mem::replace(&mut seen[e.index()], r) == r {
                continue;
            }
            if let Expr::RuleRef(x) = g.expr(e) {
                deps[r].push(x.index());
            }
            stack.extend_from_slice(g.children(e));
        }
        deps[r].sort_unstable();
        deps[r].dedup();
    }
    deps
}

/// The body rule and the stop rule of a `capture_hidden_stop_rule` rule `r`, whose body must be
/// the two rule references `body stop`.
fn hidden_stop_parts(grammar: &Grammar, r: RuleId) -> Result<[RuleId; 2]> {
    let rule = grammar.rule(r);
    if let Expr::Seq(items) = grammar.expr(rule.body) {
        if let [a, b] = **items {
            if let (Expr::RuleRef(a), Expr::RuleRef(b)) = (grammar.expr(a), grammar.expr(b)) {
                return Ok([*a, *b]);
            }
        }
    }
    Err(Error::new(
        ErrorKind::InvalidGrammar,
        format!("the rule '{}' with capture_hidden_stop_rule must be two rule references: body stop", rule.name),
    ))
}

/// For a `lazy`, `max_chars` or `max_tokens` rule (whose body must be regular): its character
/// limit (0 for `lazy`, `None` for `max_tokens` alone), the error kind of a body that is not
/// regular and the option's description.
fn bounded_limit(grammar: &Grammar, r: usize) -> Option<(Option<u32>, ErrorKind, String)> {
    let rule = &grammar.rules()[r];
    let o = grammar.rule_options(RuleId(r as u32))?;
    if o.lazy {
        Some((Some(0), ErrorKind::InvalidGrammar, format!("the lazy rule '{}'", rule.name)))
    } else if let Some(n) = o.max_chars {
        Some((Some(n), ErrorKind::Unsupported, format!("the rule '{}' with max_chars", rule.name)))
    } else {
        o.max_tokens.map(|_| (None, ErrorKind::Unsupported, format!("the rule '{}' with max_tokens", rule.name)))
    }
}

/// An inlined rule whose class of equal rules this many rules reference is built once and
/// copied into each (`Nfa::splice_inlined`). Measured on the tool-calling tags (`bench/
/// structural_tag_first_compile.py`): with two, the automata built apart cost more than the
/// expansions they saved at 10 tools, and gained nothing more at 50.
const SPLICE_MIN_USES: u32 = 3;

/// Per rule: inlined, and its class of equal rules (`rep`) is referenced by at least
/// [`SPLICE_MIN_USES`] rules.
fn shared_inlined(g: &Grammar, inline: &[bool], rep: &[RuleId]) -> Vec<bool> {
    let n = g.rules().len();
    let class = |x: usize| rep.get(x).map_or(x, |c| c.index());
    let mut refs = vec![0u32; n];
    // Stamped r + 1 once rule r's walk visited the expression / counted the class.
    let mut seen_expr = vec![0u32; g.exprs().len()];
    let mut seen_class = vec![0u32; n];
    let mut stack = Vec::new();
    for (r, rule) in g.rules().iter().enumerate() {
        let stamp = r as u32 + 1;
        stack.push(rule.body);
        while let Some(e) = stack.pop() {
            if std::mem::replace(&mut seen_expr[e.index()], stamp) == stamp {
                continue;
            }
            if let Expr::RuleRef(x) = g.expr(e) {
                let c = class(x.index());
                if std::mem::replace(&mut seen_class[c], stamp) != stamp {
                    refs[c] += 1;
                }
            }
            stack.extend_from_slice(g.children(e));
        }
    }
    (0..n).map(|r| inline[r] && refs[class(r)] >= SPLICE_MIN_USES).collect()
}

/// A built rule: its index, its automaton and the exhausted twin of a token-budgeted rule.
type Built = (usize, Dfa, Option<Dfa>);

/// Key-set rules a worker wrote directly (`key_set_dfa.rs`) and left to the generic path, by
/// [`Generic`] reason.
#[derive(Default)]
struct KeySetWrites {
    direct: usize,
    inlined: usize,
    shape: usize,
}

/// [`KeySetWrites`] of every build of this process, for the figures ([`key_set_writes`]).
static KEY_SET_WRITES: [AtomicUsize; 3] = [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)];

impl KeySetWrites {
    /// Adds these counts to the process's ([`key_set_writes`]) and, in tests, the thread's.
    fn publish(&self) {
        for (total, n) in KEY_SET_WRITES.iter().zip([self.direct, self.inlined, self.shape]) {
            total.fetch_add(n, Ordering::Relaxed);
        }
        #[cfg(test)]
        DIRECT_WRITES.with(|n| n.set(n.get() + self.direct));
    }
}

/// The key-set rules this process's builds wrote directly, and left to the generic path for an
/// inlined entry or another shape ([`Generic`]).
#[doc(hidden)]
pub fn key_set_writes() -> [usize; 3] {
    KEY_SET_WRITES.each_ref().map(|n| n.load(Ordering::Relaxed))
}

/// Whether key-set rules are tried by the direct writer (always, but in tests that turn it off).
fn direct_on() -> bool {
    #[cfg(test)]
    return !NO_DIRECT.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
}

/// Takes `n` states from a rule's share of the state budget.
pub(super) fn take_states(budget: &mut usize, n: usize) -> Result<()> {
    *budget =
        budget.checked_sub(n).ok_or_else(|| Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES))?;
    Ok(())
}

/// A build stops asking the shared [`RuleMemo`] after this many rules it did not find there.
/// PERF: a large schema's rules are mostly its own; past the band its lookups and inserts made
/// its build ~10% slower (45 schemas over 5 ms of a random 300: 886 -> 975 ms).
const SHARED_MISSES_PER_BUILD: usize = 64;

/// Rule automata are built on up to this many threads, one per this many rules.
/// PERF: a typical JSON Schema has dozens of rule automata (properties, key sets, values), built
/// independently; two threads take a third off a sub-millisecond compile.
const MAX_BUILD_THREADS: usize = 4;
const RULES_PER_THREAD: usize = 48;

#[cfg(test)]
thread_local! {
    /// Build workers this thread started besides itself.
    static WORKERS_STARTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Rule automata this thread built by subset construction (not found in a `DfaMemo`).
    static SUBSET_BUILDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Spliced inlined rules this thread built by subset construction (not found in a
    /// `RuleMemo`).
    pub(super) static SPLICE_BUILDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Set by tests: this thread builds every rule by subset construction (no `DfaMemo`).
    static NO_MEMO: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set by tests: this thread's builds leave key-set rules to the generic path.
    pub(crate) static NO_DIRECT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Key-set rules this thread's build workers wrote directly.
    pub(crate) static DIRECT_WRITES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The state budget the last build on this thread used (its rule automata's).
    pub(crate) static BUDGET_USED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether rule automata are looked up in a `DfaMemo` (always, but in tests that turn it off).
fn memo_on() -> bool {
    #[cfg(test)]
    return !NO_MEMO.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
}

/// The threads rule automata may be built on. Looked up once: the standard library reads the
/// cgroup quota files on every call.
fn build_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from).min(MAX_BUILD_THREADS))
}

/// Runs `f` with a share of the grammar's state budget: all that is left when it starts, then
/// takes what it used from `budget`; a budget other rules used up meanwhile is exceeded.
fn with_budget<T>(budget: &AtomicUsize, f: impl FnOnce(&mut usize) -> Result<T>) -> Result<T> {
    let start = budget.load(Ordering::Relaxed);
    let mut left = start;
    let out = f(&mut left)?;
    let used = start - left;
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| cur.checked_sub(used))
        .map_err(|_| Error::limit("automaton size (states)", limits::MAX_AUTOMATON_STATES))?;
    Ok(out)
}

/// Concatenates the rule DFAs, then the lookahead DFAs, then the exhausted twins of the
/// token-budgeted rules (`token_budget.rs`).
/// `dfas[r]`: rule `r`'s automaton, or `None` for a rule without one (inlined, merged into its
/// class or tail group): one non-final state without edges, as an empty DFA would be.
fn assemble(
    grammar: &Grammar,
    dfas: Vec<Option<Dfa>>,
    la_dfas: Vec<(usize, Dfa)>,
    twins: Vec<(usize, Dfa)>,
) -> Automata {
    let mut a = Automata {
        states: Vec::new(),
        byte_edges: Vec::new(),
        rule_edges: Vec::new(),
        rule_start: Vec::new(),
        lookahead_start: vec![None; dfas.len()],
        any_lookahead: false,
        la: Mutex::new(LaTable::new()),
        rule_names: grammar.rules().iter().map(|r| r.name.clone()).collect(),
        root: grammar.root(),
        tokens: super::token_edges::TokenRules::default(),
        budgets: TokenBudgets::default(),
        stop_splits: Vec::new(),
        rec: None,
        chars: None,
    };
    #[derive(PartialEq)]
    enum Part {
        Rule,
        Lookahead,
        Twin,
    }
    let n_rules = dfas.len();
    // PERF: sized once; grown edge by edge, the copies were ~5% of a large schema's build.
    let parts = || dfas.iter().flatten().chain(la_dfas.iter().map(|x| &x.1)).chain(twins.iter().map(|x| &x.1));
    a.states.reserve_exact(parts().map(Dfa::len).sum::<usize>() + dfas.iter().filter(|d| d.is_none()).count());
    a.byte_edges.reserve_exact(parts().map(|d| d.bytes.len()).sum());
    a.rule_edges.reserve_exact(parts().map(|d| d.rules.len()).sum());
    let all = dfas
        .into_iter()
        .enumerate()
        .map(|(r, d)| (r, d, Part::Rule))
        .chain(la_dfas.into_iter().map(|(r, d)| (r, Some(d), Part::Lookahead)))
        .chain(twins.into_iter().map(|(r, d)| (r, Some(d), Part::Twin)));
    for (r, dfa, part) in all {
        let base = a.states.len() as u32;
        let Some(dfa) = dfa else {
            // PERF: an empty DFA per such rule was three allocations and frees.
            a.rule_start.push(StateId(base));
            let (b0, r0) = (a.byte_edges.len() as u32, a.rule_edges.len() as u32);
            a.states.push(State {
                rule: RuleId(r as u32),
                is_final: false,
                byte_edges: (b0, b0),
                rule_edges: (r0, r0),
            });
            continue;
        };
        match part {
            Part::Rule => a.rule_start.push(StateId(base)),
            Part::Lookahead => {
                a.lookahead_start[r] = Some(StateId(base));
                a.any_lookahead = true;
            }
            Part::Twin => {
                let rule = RuleId(r as u32);
                let max_tokens = grammar.rule_options(rule).and_then(|o| o.max_tokens).unwrap_or(0);
                let open = a.rule_start[r].0;
                let b = RuleBudget { max_tokens, open, len: dfa.len() as u32, exhausted: base };
                a.budgets.set(rule, n_rules, b);
            }
        }
        for i in 0..dfa.len() {
            let b0 = a.byte_edges.len() as u32;
            a.byte_edges.extend(dfa.bytes_of(i).iter().map(|e| ByteEdge {
                lo: e.lo,
                hi: e.hi,
                target: StateId(base + e.target),
            }));
            let r0 = a.rule_edges.len() as u32;
            a.rule_edges.extend(dfa.rules_of(i).iter().map(|&(rr, t)| (rr, StateId(base + t))));
            a.states.push(State {
                rule: RuleId(r as u32),
                is_final: dfa.finals[i],
                byte_edges: (b0, a.byte_edges.len() as u32),
                rule_edges: (r0, a.rule_edges.len() as u32),
            });
        }
    }
    a
}

impl Automata {
    /// Removes unproductive rules and dead states (see module invariants).
    fn prune(&mut self) -> Result<()> {
        let n = self.states.len();
        let (live, productive) = self.live_states();
        if !productive[self.root.index()] {
            return Err(Error::new(
                ErrorKind::InvalidGrammar,
                format!("the root rule '{}' matches no string", self.rule_name(self.root)),
            ));
        }
        // Drop edges into dead states or unproductive rules.
        let mut byte_edges = Vec::with_capacity(self.byte_edges.len());
        let mut rule_edges = Vec::with_capacity(self.rule_edges.len());
        for s in 0..n {
            let sid = StateId(s as u32);
            let b0 = byte_edges.len() as u32;
            byte_edges.extend(self.byte_edges(sid).iter().filter(|e| live[e.target.0 as usize]).copied());
            let r0 = rule_edges.len() as u32;
            rule_edges.extend(
                self.rule_edges(sid).iter().filter(|&&(r, t)| productive[r.index()] && live[t.0 as usize]).copied(),
            );
            self.states[s].byte_edges = (b0, byte_edges.len() as u32);
            self.states[s].rule_edges = (r0, rule_edges.len() as u32);
        }
        self.byte_edges = byte_edges;
        self.rule_edges = rule_edges;
        Ok(())
    }

    /// Per state: it reaches a final state of its rule using bytes and productive rules (live);
    /// per rule: productive (its start is live). The least fixpoint, by a worklist walking
    /// edges backwards from the final states (and token edges' sources).
    /// PERF: replaces passes over all states until none changed: one pass per level of rule
    /// nesting (tens of passes over 590k states on the largest MaskBench schemas).
    fn live_states(&self) -> (Vec<bool>, Vec<bool>) {
        let n = self.states.len();
        // Byte-edge sources by target; rule-edge (source, rule) by target; rule-edge (source,
        // target) by rule.
        let byte_src = edge_sources(&self.states, |st| st.byte_edges);
        let rule_src = edge_sources(&self.states, |st| st.rule_edges);
        let bytes = || self.byte_edges.iter().zip(&byte_src);
        let rules = || self.rule_edges.iter().zip(&rule_src);
        let byte_preds = group_by_key(n, bytes().map(|(e, &s)| (e.target.0, s)));
        let rule_preds = group_by_key(n, rules().map(|(&(r, t), &s)| (t.0, (s, r.0))));
        let rule_users = group_by_key(self.rule_start.len(), rules().map(|(&(r, t), &s)| (r.0, (s, t.0))));
        let mut live = vec![false; n];
        let mut productive = vec![false; self.rule_start.len()];
        // Invariant: a state is on the stack at most once, and live from when it is pushed.
        let mut stack: Vec<u32> = (0..n as u32)
            .filter(|&s| self.states[s as usize].is_final || self.tokens.set_of_start(self, StateId(s)).is_some())
            .collect();
        for &s in &stack {
            live[s as usize] = true;
        }
        let mark = |s: u32, live: &mut [bool], stack: &mut Vec<u32>| {
            if !std::mem::replace(&mut live[s as usize], true) {
                stack.push(s);
            }
        };
        while let Some(t) = stack.pop() {
            let r = self.states[t as usize].rule.index();
            if self.rule_start.get(r) == Some(&StateId(t)) && !productive[r] {
                productive[r] = true;
                for &(s, target) in group(&rule_users, r) {
                    if live[target as usize] {
                        mark(s, &mut live, &mut stack);
                    }
                }
            }
            for &s in group(&byte_preds, t as usize) {
                mark(s, &mut live, &mut stack);
            }
            for &(s, rule) in group(&rule_preds, t as usize) {
                if productive[rule as usize] {
                    mark(s, &mut live, &mut stack);
                }
            }
        }
        (live, productive)
    }
}

/// The source state of each edge of a flat edge array that holds the states' edges back to back,
/// in state order (as `assemble` writes them): `range(st)` is a state's part.
/// PERF: lets the groupings of `live_states` sweep the flat arrays; a `flat_map` over the
/// states sliced each state's edges anew, twice per grouping.
fn edge_sources(states: &[State], range: impl Fn(&State) -> (u32, u32)) -> Vec<u32> {
    let mut src = vec![0; states.last().map_or(0, |st| range(st).1 as usize)];
    let mut end = 0;
    for (s, st) in states.iter().enumerate() {
        let (lo, hi) = range(st);
        assert_eq!(lo, end, "edges back to back in state order");
        src[lo as usize..hi as usize].fill(s as u32);
        end = hi;
    }
    src
}

/// Values grouped by key: key `k`'s are `.1[.0[k]..0[k + 1]]`.
type Groups<T> = (Vec<u32>, Vec<T>);

/// The values of key `k` in `g`.
fn group<T>(g: &Groups<T>, k: usize) -> &[T] {
    &g.1[g.0[k] as usize..g.0[k + 1] as usize]
}

#[cfg(test)]
mod thread_tests {
    use super::*;
    use crate::compiler::RuleMemo;
    use std::fmt::Write;

    /// A grammar of `n` distinct recursive rules: none is inlined or merged, so each is built.
    fn many_rules(n: usize) -> Grammar {
        let mut src = String::from("root ::= r0\n");
        for i in 0..n {
            let next = if i + 1 < n { format!(" | r{}", i + 1) } else { String::new() };
            writeln!(src, "r{i} ::= \"a{i}\" r{i} \"b\" | \"c{i}\"{next}").unwrap();
        }
        crate::ebnf::parse_ebnf(&src, "root").unwrap()
    }

    fn started_by(f: impl FnOnce()) -> usize {
        let before = WORKERS_STARTED.with(std::cell::Cell::get);
        f();
        WORKERS_STARTED.with(std::cell::Cell::get) - before
    }

    #[test]
    fn max_threads_bounds_the_build_workers() {
        let g = many_rules(8 * RULES_PER_THREAD);
        let one = Automata::build_on(&g, 1).unwrap();
        assert_eq!(started_by(|| drop(Automata::build_on(&g, 1).unwrap())), 0);
        // Two threads where the machine has them: one started besides the caller.
        assert_eq!(started_by(|| drop(Automata::build_on(&g, 2).unwrap())), build_threads().min(2) - 1);
        assert_eq!(started_by(|| drop(Automata::build(&g).unwrap())), build_threads() - 1);
        assert_eq!(format!("{one:?}"), format!("{:?}", Automata::build_on(&g, 2).unwrap()));
    }

    /// The automata of `g` built on this thread, with `memo` or without, and the rules built by
    /// subset construction (key-set rules too: not written directly).
    fn built(g: &Grammar, memo: bool) -> (String, usize) {
        NO_MEMO.with(|m| m.set(!memo));
        NO_DIRECT.with(|m| m.set(true));
        let before = SUBSET_BUILDS.with(std::cell::Cell::get);
        let a = Automata::build_on(g, 1).unwrap();
        NO_MEMO.with(|m| m.set(false));
        NO_DIRECT.with(|m| m.set(false));
        (format!("{a:?}"), SUBSET_BUILDS.with(std::cell::Cell::get) - before)
    }

    #[test]
    fn rules_of_one_shape_share_one_subset_construction() {
        // `s{i}` are one shape naming two recursive rules; the first `n / 2` name theirs in
        // increasing order, the others in decreasing order: one key (rules are keyed by their
        // first use, and subset construction numbers the states in that order, so a renaming
        // that does not keep the rules' order gives the plain build's automaton too).
        let n = 12;
        let mut src = String::from("root ::= s0");
        for i in 1..n {
            write!(src, " | s{i}").unwrap();
        }
        src.push('\n');
        for i in 0..2 * n {
            writeln!(src, "t{i} ::= \"a{i}\" t{i} \"b\" | \"c{i}\"").unwrap();
        }
        for i in 0..n {
            let (a, b) = if i < n / 2 { (2 * i, 2 * i + 1) } else { (2 * i + 1, 2 * i) };
            writeln!(src, "s{i} ::= \"\" | \",\" (t{a} s{i} | t{b} \"x\")").unwrap();
        }
        let g = crate::ebnf::parse_ebnf(&src, "root").unwrap();
        let (plain, all) = built(&g, false);
        let (memoized, subsets) = built(&g, true);
        assert_eq!(memoized, plain);
        // root, the `t` rules and one `s` rule.
        assert_eq!(all, 1 + 2 * n + n);
        assert_eq!(subsets, 1 + 2 * n + 1);
    }

    #[test]
    fn memoized_schema_automata_equal_plain_ones() {
        // Optional properties: a rule per subset of the properties read so far, few shapes.
        let schema = r#"{"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"},
            "d": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "number"}, "y": {"type": "string", "maxLength": 3}, "z": {"type": "null"}}}},
            "e": {"enum": ["p", "q"]}, "f": {"type": "integer"}, "g": {"type": "string"}}}"#;
        let opts = crate::json_schema::JsonSchemaOptions { strict_mode: false, ..Default::default() };
        let g = crate::json_schema::json_schema_to_grammar(schema, &opts).unwrap();
        let (plain, all) = built(&g, false);
        let (memoized, subsets) = built(&g, true);
        assert_eq!(memoized, plain);
        // Subset rules differ where a property's entry is inlined (the enum's): 126 of 152.
        assert!(subsets < all, "{subsets} of {all} rules by subset construction");
    }

    /// Grammars of one shape as a JSON Schema converter writes them: an open object's value is
    /// any JSON value (`any`, `ws`: the same rules in every grammar), and `pair{i}` names two
    /// value rules in an order that differs between the grammars.
    fn shaped(swap: bool, extra: &str) -> Grammar {
        let (a, b) = if swap { ("v2", "v1") } else { ("v1", "v2") };
        let src = format!(
            "root ::= \"{{\" ws pair0 ws \"}}\" | \"[\" ws pair1 ws \"]\" | any\n\
             pair0 ::= \"\" | \",\" ws ({a} pair0 | {b} \"x\")\n\
             pair1 ::= \"\" | \",\" ws ({b} pair1 | {a} \"y\")\n\
             v1 ::= \"a\" v1 \"b\" | \"c\" any{extra}\n\
             v2 ::= \"d\" v2 \"e\" | \"f\"\n\
             any ::= \"null\" | [0-9]{{1,20}} | \"[\" ws (any (ws \",\" ws any)*)? ws \"]\"\n\
             ws ::= [ \\n\\t]{{0,8}}\n"
        );
        crate::ebnf::parse_ebnf(&src, "root").unwrap()
    }

    #[test]
    fn shared_memo_hits_give_the_automata_of_a_plain_build() {
        let memo = RuleMemo::new(1 << 20);
        let first = shaped(false, "");
        let shared = |g: &Grammar| format!("{:?}", Automata::build_shared(g, 1, Some(&memo)).unwrap());
        assert_eq!(shared(&first), built(&first, false).0);
        let (hits, _) = memo.lookups();
        // Rules named in the other order, and a grammar that differs in one rule: the rules they
        // share hit, the others are built, and the automata are the plain ones.
        for g in [shaped(true, ""), shaped(true, " | \"g\""), first.clone()] {
            let before = memo.lookups().0;
            assert_eq!(shared(&g), built(&g, false).0);
            assert!(memo.lookups().0 > before, "some rule found in the memo");
        }
        assert!(memo.lookups().0 > hits);
        // Without the memo's rules a worker builds every rule by subset construction.
        let before = SUBSET_BUILDS.with(std::cell::Cell::get);
        drop(Automata::build_shared(&first, 1, Some(&memo)).unwrap());
        assert_eq!(SUBSET_BUILDS.with(std::cell::Cell::get), before, "every rule of a grammar built before is found");
    }

    #[test]
    fn spliced_rules_come_from_the_shared_memo() {
        // `w` is inlined and used by three rules (recursive, not by tail calls): spliced, its
        // automaton built once per build.
        let grammar = |k: &str| {
            let src = format!(
                "root ::= a | b | c\n\
                 a ::= \"x{k}\" w a \"!\" | \"1\"\n\
                 b ::= \"y\" w b \"!\" | \"2\"\n\
                 c ::= \"z\" w c \"!\" | \"3\"\n\
                 w ::= [a-z]+ \".\" [0-9]*\n"
            );
            crate::ebnf::parse_ebnf(&src, "root").unwrap()
        };
        let memo = RuleMemo::new(1 << 20);
        let shared = |g: &Grammar| {
            let before = SPLICE_BUILDS.with(std::cell::Cell::get);
            let a = format!("{:?}", Automata::build_shared(g, 1, Some(&memo)).unwrap());
            (a, SPLICE_BUILDS.with(std::cell::Cell::get) - before)
        };
        let (first, second) = (grammar(""), grammar("k"));
        let (a, splices) = shared(&first);
        assert_eq!(a, built(&first, false).0);
        assert_eq!(splices, 1, "`w` is spliced");
        // Another grammar inlining the same `w`: its automaton is the memo's, the automata the
        // plain build's.
        let (a, splices) = shared(&second);
        assert_eq!(a, built(&second, false).0);
        assert_eq!(splices, 0, "the spliced rule is found in the memo");
        // Where its subset construction would pass the state budget, so does the memo's copy.
        let w = RuleId(first.rules().iter().position(|r| r.name == "w").unwrap() as u32);
        let inline = vec![false; first.rules().len()];
        let charge = |budget: usize, memo: Option<&RuleMemo>| {
            let mut child = Nfa { inline: &inline, ..Nfa::default() };
            let (s, e) = child.build(&first, first.rule(w).body, &mut usize::MAX.clone()).unwrap();
            let mut left = budget;
            let mut sc = Box::default();
            Nfa::splice_dfa(&mut child, s, e, memo, &mut left, &mut sc).map(|_| left).map_err(|e| e.to_string())
        };
        for budget in 0..8 {
            assert_eq!(charge(budget, Some(&memo)), charge(budget, None), "budget {budget}");
        }
        assert!(charge(0, Some(&memo)).is_err() && charge(7, Some(&memo)).is_ok());
    }

    #[test]
    fn spliced_rules_built_one_after_another_equal_fresh_builds() {
        // One NFA splices a large rule, then smaller ones: each later one is built in the first
        // one's reused buffers (`Nfa::spare`), and must come out as a fresh NFA builds it.
        let src = "root ::= a b c\n\
                   a ::= \"x\" big a | \"1\"\n\
                   b ::= \"y\" small b | \"2\"\n\
                   c ::= \"z\" tiny c | \"3\"\n\
                   big ::= [a-z]+ \".\" [0-9]* (\"-\" [A-F]{2,5})? \"!\"\n\
                   small ::= \"q\" [0-9]\n\
                   tiny ::= \"t\"\n";
        let g = crate::ebnf::parse_ebnf(src, "root").unwrap();
        let id = |n: &str| RuleId(g.rules().iter().position(|r| r.name == n).unwrap() as u32);
        let spliced = [id("big"), id("small"), id("tiny")];
        let mut inline = vec![false; g.rules().len()];
        for r in spliced {
            inline[r.index()] = true;
        }
        let splice = inline.clone();
        let mut nfa = Nfa { inline: &inline, splice: &splice, ..Nfa::default() };
        for r in ["a", "b", "c"] {
            nfa.clear();
            nfa.build(&g, g.rule(id(r)).body, &mut usize::MAX.clone()).unwrap();
        }
        let mut last = 0;
        for r in spliced {
            let mut child = Nfa { inline: &inline, ..Nfa::default() };
            let (s, e) = child.build(&g, g.rule(r).body, &mut usize::MAX.clone()).unwrap();
            last = child.len();
            let fresh = Nfa::splice_dfa(&mut child, s, e, None, &mut usize::MAX.clone(), &mut Box::default()).unwrap();
            assert_eq!(format!("{:?}", nfa.spliced[&r]), format!("{fresh:?}"), "{}", g.rule(r).name);
        }
        // The kept NFA holds the last spliced rule only (cleared, not grown from splice to splice).
        assert_eq!(nfa.spare.as_ref().map(|c| c.len()), Some(last), "the buffers are kept, the states cleared");
    }
}
