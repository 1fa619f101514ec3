//! Capture spans and per-rule temperatures, read off a matcher's Earley chart
//! (the `capture` and `temperature` rule options, [`crate::rule_options`]).
//!
//! Pipeline place: called by [`crate::matcher::Matcher::captures`] and
//! [`crate::matcher::Matcher::temperature`] on demand; nothing here runs while accepting tokens or
//! filling masks. Rules with options are never inlined, so their occurrences are items of the
//! chart.
//!
//! **Captures.** An occurrence of a captured rule `R` from row `m` to row `k` is reported when it
//! lies on a *live* derivation: one that explains the whole accepted input (every item of the
//! last row stands for such derivations, since the accepted text is a prefix). The live items are
//! found backwards from the last row: an item's predecessors are the item it was scanned from
//! (same origin, one row earlier, the byte in between) and, for an item reached by completing a
//! rule `Q` from row `m`, the waiting item in row `m` together with `Q`'s final item (one such
//! completion is a reported occurrence when `Q` is captured). An item whose occurrence is still
//! open at the last row also keeps alive the items of its origin row that wait on its rule.
//! Rollback pops rows, so the answer always describes the current text. Lookahead obligations
//! are not followed (a grammar with both may report an occurrence a lookahead later rules out).
//!
//! **Temperature.** XGrammar's rule: the temperature of the innermost rule with one around each
//! item of the last row that can read a byte (walking up from an item to the items of its origin
//! row that wait on its rule); the maximum when paths disagree.

use crate::compiler::{Automata, StateId};
use crate::earley::Chart;
use crate::fasthash::FastState;
use crate::grammar::{Grammar, RuleId};
use std::collections::HashSet;

/// One captured occurrence: the capture name's rule, and its span in bytes of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub rule: RuleId,
    pub start: usize,
    pub end: usize,
}

/// The capture name of each rule (`None`: not captured); empty when no rule is captured.
pub fn capture_names(g: &Grammar) -> Vec<Option<String>> {
    let opts = g.all_rule_options();
    if opts.iter().all(|(_, o)| o.capture.is_none()) {
        return Vec::new();
    }
    let mut names = vec![None; g.rules().len()];
    for (r, o) in opts {
        names[r.index()].clone_from(&o.capture);
    }
    names
}

/// The temperature of each rule (`None`: none); empty when no rule has one.
pub fn temperatures(g: &Grammar) -> Vec<Option<f32>> {
    let opts = g.all_rule_options();
    if opts.iter().all(|(_, o)| o.temperature_bits.is_none()) {
        return Vec::new();
    }
    let mut t = vec![None; g.rules().len()];
    for (r, o) in opts {
        t[r.index()] = o.temperature();
    }
    t
}

/// The occurrences of captured rules (`captured[r]`) on live derivations of `input`, which must
/// be the bytes the chart read (row `k + 1` after `input[k]`). Sorted by end, then start.
pub fn live_captures(a: &Automata, chart: &Chart, input: &[u8], captured: &[bool]) -> Vec<Span> {
    let last = chart.last_row_index();
    debug_assert_eq!(input.len(), last);
    if captured.iter().all(|c| !c) {
        return Vec::new();
    }
    // Every item of the chart, for membership tests.
    let mut present: HashSet<(u32, StateId, u32), FastState> = HashSet::default();
    for k in 0..=last {
        for it in chart.row(k) {
            present.insert((k as u32, it.state, it.origin));
        }
    }
    // Reverse rule edges: target -> (source, rule).
    let mut rev: std::collections::HashMap<StateId, Vec<(StateId, RuleId)>, FastState> = Default::default();
    for (s, _) in a.states().iter().enumerate() {
        let sid = StateId(s as u32);
        for &(q, t) in a.rule_edges(sid) {
            rev.entry(t).or_default().push((sid, q));
        }
    }
    // (row, state, origin, open): `open` when the item's occurrence reaches the last row.
    let mut seen: HashSet<(u32, StateId, u32, bool), FastState> = HashSet::default();
    let mut work: Vec<(u32, StateId, u32, bool)> = Vec::new();
    let mut out: HashSet<Span, FastState> = HashSet::default();
    for it in chart.row(last) {
        work.push((last as u32, it.state, it.origin, true));
    }
    let mut push = |x: (u32, StateId, u32, bool), work: &mut Vec<_>| {
        if seen.insert(x) {
            work.push(x);
        }
    };
    let seeds: Vec<_> = std::mem::take(&mut work);
    for x in seeds {
        push(x, &mut work);
    }
    while let Some((k, s, o, open)) = work.pop() {
        let rule = a.state(s).rule;
        // Scanned from row k - 1.
        if k > o {
            let b = input[k as usize - 1];
            for it in chart.row(k as usize - 1) {
                if it.origin == o && a.step(it.state, b) == Some(s) {
                    push((k - 1, it.state, o, open), &mut work);
                }
            }
        }
        // Reached by completing a rule q that ran from row m to row k.
        if let Some(preds) = rev.get(&s) {
            for &(src, q) in preds {
                for it in chart.row(k as usize) {
                    let st = a.state(it.state);
                    if st.rule != q || !st.is_final || it.origin < o || !present.contains(&(it.origin, src, o)) {
                        continue;
                    }
                    let m = it.origin;
                    push((m, src, o, open), &mut work);
                    push((k, it.state, m, false), &mut work);
                    if captured[q.index()] {
                        out.insert(Span { rule: q, start: m as usize, end: k as usize });
                    }
                }
            }
        }
        // An open occurrence keeps its waiting parents alive.
        if open {
            for it in chart.row(o as usize) {
                if a.rule_edges(it.state).iter().any(|&(q, _)| q == rule) {
                    push((o, it.state, it.origin, true), &mut work);
                }
            }
        }
    }
    let mut v: Vec<Span> = out.into_iter().collect();
    v.sort_by_key(|s| (s.end, s.start, s.rule));
    v
}

/// XGrammar's `deduplicate=True`: per (capture name, start), only the longest occurrence; kept in
/// the order of [`live_captures`].
pub fn deduplicate(spans: &[Span], names: &[Option<String>]) -> Vec<Span> {
    let mut best: std::collections::HashMap<(&str, usize), usize, FastState> = Default::default();
    for s in spans {
        let name = names[s.rule.index()].as_deref().unwrap_or("");
        let e = best.entry((name, s.start)).or_insert(s.end);
        *e = (*e).max(s.end);
    }
    spans
        .iter()
        .filter(|s| best.get(&(names[s.rule.index()].as_deref().unwrap_or(""), s.start)) == Some(&s.end))
        .copied()
        .collect()
}

/// The distinct temperatures (as `f32` bits, sorted) of the innermost rules with a temperature
/// around the items of the last row that can read a byte.
pub fn active_temperatures(a: &Automata, chart: &Chart, temps: &[Option<f32>]) -> Vec<u32> {
    let mut found: Vec<u32> = Vec::new();
    if temps.is_empty() {
        return found;
    }
    let last = chart.last_row_index();
    let mut seen: HashSet<(RuleId, u32), FastState> = HashSet::default();
    let mut work: Vec<(RuleId, u32)> = Vec::new();
    for it in chart.row(last) {
        if !a.byte_edges(it.state).is_empty() {
            let x = (a.state(it.state).rule, it.origin);
            if seen.insert(x) {
                work.push(x);
            }
        }
    }
    while let Some((rule, o)) = work.pop() {
        if let Some(t) = temps[rule.index()] {
            found.push(t.to_bits());
            continue;
        }
        for it in chart.row(o as usize) {
            if a.rule_edges(it.state).iter().any(|&(q, _)| q == rule) {
                let x = (a.state(it.state).rule, it.origin);
                if seen.insert(x) {
                    work.push(x);
                }
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}
