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
use crate::rule_options::HiddenStop;
use std::collections::{HashMap, HashSet};

/// One captured occurrence: the capture name's rule, and its span in bytes of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub rule: RuleId,
    pub start: usize,
    pub end: usize,
}

/// What a rule's occurrences capture: the capture name of the occurrence (without its
/// `hidden` end) and the name the hidden end is captured under. With `hides` (Lark `stop=`,
/// unlike `suffix=`) the hidden end is left out of every capture around the occurrence too, as
/// in XGrammar (and llguidance, where the stop text is taken back from the output).
#[derive(Clone, Debug, Default)]
pub struct CaptureInfo {
    pub name: Option<String>,
    pub stop_name: Option<String>,
    pub hidden: Option<HiddenStop>,
    pub hides: bool,
}

impl CaptureInfo {
    fn is_captured(&self) -> bool {
        self.name.is_some() || self.stop_name.is_some()
    }
}

/// The [`CaptureInfo`] of each rule; empty when no rule is captured.
pub fn capture_info(g: &Grammar) -> Vec<CaptureInfo> {
    let opts = g.all_rule_options();
    if opts.iter().all(|(_, o)| o.capture.is_none() && o.stop_capture.is_none()) {
        return Vec::new();
    }
    let mut info = vec![CaptureInfo::default(); g.rules().len()];
    for (r, o) in opts {
        info[r.index()] = CaptureInfo {
            name: o.capture.clone(),
            stop_name: o.stop_capture.clone(),
            hidden: o.hidden_suffix.map(|h| h.0),
            hides: o.hidden_suffix.is_some_and(|h| h.1),
        };
    }
    info
}

/// Where the hidden end of occurrence `s` of a rule with `info` begins.
fn hidden_cut(a: &Automata, input: &[u8], s: &Span, info: &CaptureInfo) -> usize {
    match info.hidden {
        None => s.end,
        Some(HiddenStop::Bytes(n)) => s.end - (n as usize).min(s.end - s.start),
        Some(HiddenStop::LastRule) => {
            s.start + a.hidden_stop_cut(s.rule, &input[s.start..s.end]).unwrap_or(s.end - s.start)
        }
    }
}

/// The captures of the live occurrences of captured rules in `input` (see [`live_captures`]), as
/// (name, bytes): per occurrence, its hidden end (under the stop-capture name) then the rest
/// (under the capture name), without the hidden ends of the `stop` occurrences inside it. With
/// `deduplicate`, only the longest occurrence of each rule per start position.
pub fn captures(
    a: &Automata,
    chart: &Chart,
    input: &[u8],
    info: &[CaptureInfo],
    deduplicate: bool,
) -> Vec<(String, Vec<u8>)> {
    let wanted: Vec<bool> = info.iter().map(|i| i.is_captured() || i.hides).collect();
    let mut spans = live_captures(a, chart, input, &wanted);
    // The hidden ends of `stop` occurrences, left out of the captures around them.
    let hidden: Vec<std::ops::Range<usize>> = spans
        .iter()
        .filter(|s| info[s.rule.index()].hides)
        .map(|s| hidden_cut(a, input, s, &info[s.rule.index()])..s.end)
        .filter(|r| !r.is_empty())
        .collect();
    spans.retain(|s| info[s.rule.index()].is_captured());
    if deduplicate {
        let mut best: HashMap<(RuleId, usize), usize, FastState> = HashMap::default();
        for s in &spans {
            let e = best.entry((s.rule, s.start)).or_insert(s.end);
            *e = (*e).max(s.end);
        }
        spans.retain(|s| best.get(&(s.rule, s.start)) == Some(&s.end));
    }
    // `start..end` without the hidden ranges that lie inside it.
    let text = |start: usize, end: usize| -> Vec<u8> {
        let mut out = Vec::with_capacity(end - start);
        let mut at = start;
        let mut inside: Vec<&std::ops::Range<usize>> =
            hidden.iter().filter(|h| start <= h.start && h.end <= end).collect();
        inside.sort_by_key(|h| h.start);
        for h in inside {
            if h.start >= at {
                out.extend_from_slice(&input[at..h.start]);
                at = h.end;
            } else {
                at = at.max(h.end);
            }
        }
        out.extend_from_slice(&input[at..end]);
        out
    };
    let mut out = Vec::new();
    for s in spans {
        let i = &info[s.rule.index()];
        let cut = hidden_cut(a, input, &s, i);
        if let Some(n) = &i.stop_name {
            out.push((n.clone(), input[cut..s.end].to_vec()));
        }
        if let Some(n) = &i.name {
            out.push((n.clone(), text(s.start, cut)));
        }
    }
    out
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
/// be the bytes the chart read (row `k + 1` after `input[k]`). Sorted by end, then by start
/// from the latest (nested occurrences before the ones around them).
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
    let mut rev: HashMap<StateId, Vec<(StateId, RuleId)>, FastState> = HashMap::default();
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
    let mut push = |x: (u32, StateId, u32, bool), work: &mut Vec<_>| {
        if seen.insert(x) {
            work.push(x);
        }
    };
    for it in chart.row(last) {
        push((last as u32, it.state, it.origin, true), &mut work);
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
    // By end; at the same end, inner (later-starting) occurrences first, as they complete first.
    // (Equal spans: the later-defined rule first, usually the inner one.)
    v.sort_by_key(|s| (s.end, std::cmp::Reverse(s.start), std::cmp::Reverse(s.rule)));
    v
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

#[cfg(test)]
mod tests {
    use crate::matcher::{CompiledGrammar, Matcher, MatcherOptions};
    use crate::vocab::{VocabType, Vocabulary, VocabularyOptions};
    use std::sync::Arc;

    fn matcher(text: &str) -> Matcher {
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let opts = VocabularyOptions { stop_token_ids: Some(vec![]), ..Default::default() };
        let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
        let g = crate::ebnf::parse_ebnf(text, "root").unwrap();
        Matcher::new(Arc::new(CompiledGrammar::new(&g, &vocab).unwrap()), MatcherOptions::default()).unwrap()
    }

    fn caps(m: &Matcher, dedup: bool) -> Vec<(String, String)> {
        m.captures(dedup).into_iter().map(|(n, b)| (n, String::from_utf8(b).unwrap())).collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    #[test]
    fn captures_follow_accept_and_rollback() {
        let mut m = matcher("root ::= x \",\" x\nx[capture] ::= \"(\" y \")\" | y\ny[capture=\"in\"] ::= [a-z]+");
        assert!(m.accept_bytes(b"(ab").unwrap());
        assert_eq!(caps(&m, true), pairs(&[("in", "ab")]));
        assert!(m.accept_bytes(b"),").unwrap());
        assert_eq!(caps(&m, true), pairs(&[("in", "ab"), ("x", "(ab)")]));
        assert!(m.accept_bytes(b"cd").unwrap());
        // "cd" is `y` and, ended here, an `x` too; without deduplication the prefixes of `y`
        // that could not end `x` here are gone (they are not on a live derivation).
        assert_eq!(caps(&m, true), pairs(&[("in", "ab"), ("x", "(ab)"), ("in", "cd"), ("x", "cd")]));
        m.rollback(1).unwrap();
        assert_eq!(caps(&m, true), pairs(&[("in", "ab"), ("x", "(ab)")]));
        m.rollback(1).unwrap();
        assert_eq!(caps(&m, true), pairs(&[("in", "ab")]));
        m.reset();
        assert!(caps(&m, true).is_empty());
    }

    #[test]
    fn ambiguous_prefixes_report_every_live_occurrence() {
        // "axbyz": x = "x", "yz" (complete) or x = "xbyz" (waiting for "b" x); x = "xb" is dead.
        let mut m = matcher("root ::= \"a\" x \"b\" x\nx[capture=\"n\"] ::= [a-z]+");
        assert!(m.accept_bytes(b"axbyz").unwrap());
        assert_eq!(caps(&m, false), pairs(&[("n", "x"), ("n", "yz"), ("n", "xbyz")]));
        assert_eq!(caps(&m, true), pairs(&[("n", "yz"), ("n", "xbyz")]));
    }

    #[test]
    fn temperature_is_the_innermost_active_rules() {
        let mut m = matcher(
            "root ::= x | \"q\"\nx[temperature=0.5] ::= \"(\" y \")\"\ny[temperature=0.25] ::= [a-z]+ | z\nz ::= \"0\"",
        );
        assert_eq!(m.rule_temperature(), (Some(0.5), false));
        assert!(m.accept_bytes(b"(").unwrap());
        // y's items (0.25) and... only y can read a byte here.
        assert_eq!(m.rule_temperature(), (Some(0.25), false));
        assert!(m.accept_bytes(b"a").unwrap());
        // y reads more letters (0.25), x reads ")" (0.5): the maximum, flagged.
        assert_eq!(m.rule_temperature(), (Some(0.5), true));
        assert!(m.accept_bytes(b")").unwrap());
        assert_eq!(m.rule_temperature(), (None, false));
        m.rollback(2).unwrap();
        assert_eq!(m.rule_temperature(), (Some(0.25), false));
    }

    /// `lazy` and `max_chars` against their definition, on every string up to length 6 over a
    /// small alphabet: the rule's strings with no proper prefix of at least N characters in the
    /// rule's language (N = 0 for `lazy`).
    #[test]
    fn bounded_rules_match_their_definition() {
        let bodies = ["[ab]+ \"c\"?", "\"a\" | \"ab\" | \"abb\" | \"b\"+", "(\"é\" | \"a\")+", "[ab]* \"c\""];
        let alphabet: [&str; 4] = ["a", "b", "c", "é"];
        for body in bodies {
            let plain = format!("root ::= {body}");
            for opt in ["lazy", "max_chars=0", "max_chars=1", "max_chars=2", "max_chars=4"] {
                let bounded = format!("root ::= x\nx[{opt}] ::= {body}");
                let limit = opt.strip_prefix("max_chars=").map_or(0, |n| n.parse::<usize>().unwrap());
                let mut strings = vec![String::new()];
                for _ in 0..5 {
                    let more: Vec<String> = strings
                        .iter()
                        .filter(|s| s.chars().count() == strings.last().unwrap().chars().count())
                        .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                        .collect();
                    strings.extend(more);
                }
                let mut p = matcher(&plain);
                let mut b = matcher(&bounded);
                let in_lang = |m: &mut Matcher, s: &str| {
                    m.reset();
                    m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed()
                };
                for s in &strings {
                    let chars: Vec<char> = s.chars().collect();
                    let want = in_lang(&mut p, s)
                        && !(limit..chars.len()).any(|k| in_lang(&mut p, &chars[..k].iter().collect::<String>()));
                    assert_eq!(in_lang(&mut b, s), want, "{opt} {body}: {s:?}");
                }
            }
        }
    }

    #[test]
    fn bounded_rules_must_be_regular() {
        use crate::error::ErrorKind;
        let vocab =
            Arc::new(Vocabulary::new(vec![b"a".to_vec()], VocabType::Raw, VocabularyOptions::default()).unwrap());
        for (text, kind, needle) in [
            (
                "root ::= x\nx[lazy] ::= \"a\" x | \"b\"",
                ErrorKind::InvalidGrammar,
                "the lazy rule 'x' uses the recursive rule 'x'",
            ),
            (
                "root ::= x\nx[max_tokens=3] ::= y \"(\" | \"[\" z \"]\" | \"b\"\ny[capture] ::= z \")\" | v \")\" | \"c\"\n\
                 z[capture] ::= y \"+\" | \"d\"\nv[capture] ::= y \"-\" | \"e\"",
                ErrorKind::Unsupported,
                "reaches the rule 'y', left-recursive through other rules, is not supported",
            ),
            (
                "root ::= x\nx[lazy] ::= y | \"a\" x\ny[max_tokens=1] ::= \"a\"+",
                ErrorKind::Unsupported,
                "the rule 'y' with max_tokens is used inside the lazy rule 'x'",
            ),
        ] {
            let g = crate::ebnf::parse_ebnf(text, "root").unwrap();
            let Err(e) = CompiledGrammar::new(&g, &vocab) else { panic!("{text} compiled") };
            assert_eq!(e.kind(), kind, "{e}");
            assert!(e.message().contains(needle), "{e}");
        }
    }
}
