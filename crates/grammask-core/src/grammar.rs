//! The grammar IR every front end produces and the compiler consumes.
//!
//! A [`Grammar`] is a list of named rules whose bodies are expressions stored in one arena
//! ([`ExprId`] indexes [`Grammar::exprs`]). Keeping expressions in an arena (not a `Box` tree) means
//! dropping or cloning a grammar never recurses, whatever its depth.
//!
//! Invariants, checked by [`GrammarBuilder::build`]:
//! - every `ExprId` and `RuleId` inside the grammar is in range, and every rule has a body;
//! - an expression only refers to expressions created before it, so the arena is in topological
//!   order (children before parents) and its nesting depth is at most [`crate::limits::MAX_NESTING`];
//! - character classes are sorted, disjoint, non-adjacent, non-empty ranges of Unicode scalar values;
//! - rule names are unique.

use crate::error::{Error, ErrorKind, Result};
use crate::fasthash::FastState;
use crate::limits;
use crate::rule_options::RuleOptions;
use std::collections::HashMap;
use std::sync::Arc;

/// Index of a rule in [`Grammar::rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// Index of an expression in [`Grammar::exprs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

impl RuleId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ExprId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One node of a rule body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// A literal byte string; the empty string matches the empty input.
    Bytes(Box<[u8]>),
    /// One Unicode scalar value (matched as its UTF-8 bytes) from a set of inclusive ranges.
    /// Negation is applied when the class is built, so this is always the positive set.
    CharClass(Box<[(u32, u32)]>),
    /// Each child in order.
    Seq(Box<[ExprId]>),
    /// Any one child. An empty choice matches nothing.
    Choice(Box<[ExprId]>),
    /// `min..=max` repetitions of the child (`max: None` is unbounded).
    Repeat { expr: ExprId, min: u32, max: Option<u32> },
    /// The body of another rule.
    RuleRef(RuleId),
    /// The text between the quotes of a JSON string (every JSON spelling: raw characters, short
    /// and `\u` escapes, surrogate pairs) whose decoded value is one of these strings. The
    /// strings are sorted and distinct (the empty string may be one of them).
    JsonStringIn(Box<[Box<str>]>),
    /// As [`Expr::JsonStringIn`], for the values that are none of the strings.
    JsonStringExcept(Box<[Box<str>]>),
    /// One whole token whose id is in the set (sorted, distinct), matched by id, never by text
    /// (EBNF `Token(id, ...)`; see `crate::token_edges`).
    Token(Box<[u32]>),
    /// One whole token whose id is not in the set (sorted, distinct) and that grammar text could
    /// produce: not special, not a stop token (EBNF `ExcludeToken(id, ...)`).
    ExcludeToken(Box<[u32]>),
}

/// A named rule. `lookahead`, when present, must match a prefix of the input that follows the
/// rule for the rule to complete (a positive lookahead assertion).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    pub name: String,
    pub body: ExprId,
    pub lookahead: Option<ExprId>,
}

/// An immutable grammar. Build one with [`GrammarBuilder`], or parse one with [`crate::ebnf`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grammar {
    rules: Vec<Rule>,
    exprs: Vec<Expr>,
    root: RuleId,
    /// Rule options ([`RuleOptions`]), sorted by rule; empty for most grammars.
    options: Vec<(RuleId, RuleOptions)>,
    /// Rules known to match a string body minus finitely many words (set by the JSON Schema
    /// converter; dropped by every builder, so never stale after a pass).
    excluded_words: Option<Arc<ExcludedWords>>,
    /// Rules the automaton builder never inlines, sorted (set by the JSON Schema converter: the
    /// shared `\u`-escape rule a counted string's positions call; dropped by every builder).
    kept: Arc<[RuleId]>,
    /// Rules the automaton builder never merges with equal rules, sorted (set by the JSON Schema
    /// converter: an any-order object's key-set rules; dropped by every builder).
    own_class: Arc<[RuleId]>,
}

/// Rules that match every JSON string body (the language of `any`, `json_char*`) except
/// finitely many words: the nodes of an open object's excluded-key trie.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExcludedWords {
    /// The rule of every string body.
    pub any: RuleId,
    /// (rule, the words it does not match, none with a `"` or a backslash), sorted by rule.
    pub rules: Vec<(RuleId, Vec<Box<[u8]>>)>,
}

impl Grammar {
    /// The rules known to match a string body minus some words ([`ExcludedWords`]).
    pub fn excluded_words(&self) -> Option<&ExcludedWords> {
        self.excluded_words.as_deref()
    }

    /// [`Self::excluded_words`], shared (the class-body thread reads them after the compile).
    pub(crate) fn excluded_words_shared(&self) -> Option<Arc<ExcludedWords>> {
        self.excluded_words.clone()
    }

    /// This grammar with `words` recorded. The caller vouches for each rule's language.
    pub(crate) fn with_excluded_words(mut self, mut words: ExcludedWords) -> Grammar {
        words.rules.sort_by_key(|e| e.0);
        self.excluded_words = Some(Arc::new(words));
        self
    }

    /// The rules never inlined ([`Self::with_kept`]).
    pub fn kept(&self) -> &[RuleId] {
        &self.kept
    }

    /// This grammar with `rules` kept as rules by the automaton builder (a performance hint: the
    /// language is the same either way).
    #[doc(hidden)]
    #[must_use]
    pub fn with_kept(mut self, mut rules: Vec<RuleId>) -> Grammar {
        rules.sort_unstable();
        rules.dedup();
        self.kept = rules.into();
        self
    }

    /// The rules never merged with equal rules ([`Self::with_own_class`]).
    pub fn own_class(&self) -> &[RuleId] {
        &self.own_class
    }

    /// This grammar with `rules` each a class of its own for the automaton builder's equal-rule
    /// merging (`compiler/equal_rules.rs`; a performance hint: merging only shares automata, so
    /// the language and every mask are the same either way).
    /// PERF: a closed any-order object's key-set rules form a DAG (no tail group), so they were
    /// merge candidates, and the refinement keyed every expression of their bodies (cluster.yml:
    /// 146k expressions, ~20% of the automata build) to merge almost none of them.
    #[doc(hidden)]
    #[must_use]
    pub fn with_own_class(mut self, mut rules: Vec<RuleId>) -> Grammar {
        rules.sort_unstable();
        rules.dedup();
        self.own_class = rules.into();
        self
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    pub fn exprs(&self) -> &[Expr] {
        &self.exprs
    }

    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }

    pub fn root(&self) -> RuleId {
        self.root
    }

    pub fn rule_by_name(&self, name: &str) -> Option<RuleId> {
        self.rules.iter().position(|r| r.name == name).map(|i| RuleId(i as u32))
    }

    /// The options of rule `id`, if it has any.
    pub fn rule_options(&self, id: RuleId) -> Option<&RuleOptions> {
        if self.options.is_empty() {
            return None;
        }
        self.options.binary_search_by_key(&id, |o| o.0).ok().map(|i| &self.options[i].1)
    }

    /// Every rule with options, by rule id.
    pub fn all_rule_options(&self) -> &[(RuleId, RuleOptions)] {
        &self.options
    }

    /// A builder holding a copy of this grammar, for combinators and passes.
    pub fn to_builder(&self) -> GrammarBuilder {
        GrammarBuilder {
            rules: self.rules.iter().map(|r| Some((r.name.clone(), r.body, r.lookahead))).collect(),
            names: self.rules.iter().enumerate().map(|(i, r)| (r.name.clone(), RuleId(i as u32))).collect(),
            exprs: self.exprs.clone(),
            options: self.options.clone(),
        }
    }
}

/// Incremental construction of a [`Grammar`]. Rules may be declared before their body is known
/// (forward references); `build` checks that every declared rule got a body.
#[derive(Clone, Debug, Default)]
pub struct GrammarBuilder {
    rules: Vec<Option<(String, ExprId, Option<ExprId>)>>,
    names: HashMap<String, RuleId, FastState>,
    exprs: Vec<Expr>,
    options: Vec<(RuleId, RuleOptions)>,
}

impl GrammarBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the id of rule `name`, declaring it (without a body) if it is new.
    pub fn rule_id(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(None);
        self.names.insert(name.to_owned(), id);
        id
    }

    /// Names of the declared rules without a body, in no particular order.
    pub(crate) fn undefined_names(&self) -> Vec<String> {
        self.names.iter().filter(|&(_, id)| self.rules[id.index()].is_none()).map(|(n, _)| n.clone()).collect()
    }

    pub fn has_rule(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// True if the rule is declared and has a body.
    pub fn is_defined(&self, id: RuleId) -> bool {
        self.rules.get(id.index()).is_some_and(Option::is_some)
    }

    /// A rule name not used yet, derived from `base` (`base`, `base_1`, `base_2`, ...).
    #[allow(clippy::maybe_infinite_iter)] // finite: only finitely many names are taken
    pub fn fresh_name(&self, base: &str) -> String {
        if !self.names.contains_key(base) {
            return base.to_owned();
        }
        (1..).map(|i| format!("{base}_{i}")).find(|n| !self.names.contains_key(n)).unwrap()
    }

    /// Gives a declared rule its body. Fails if the rule already has one.
    pub fn define(&mut self, name: &str, body: ExprId, lookahead: Option<ExprId>) -> Result<RuleId> {
        let id = self.rule_id(name);
        let slot = &mut self.rules[id.index()];
        if slot.is_some() {
            return Err(Error::new(ErrorKind::InvalidGrammar, format!("rule '{name}' is defined more than once")));
        }
        *slot = Some((name.to_owned(), body, lookahead));
        Ok(id)
    }

    /// Sets the options of rule `id` (replacing earlier ones; empty options remove them).
    pub fn set_rule_options(&mut self, id: RuleId, options: RuleOptions) {
        self.options.retain(|o| o.0 != id);
        if !options.is_empty() {
            self.options.push((id, options));
        }
    }

    /// Makes room for `exprs` more expressions and `rules` more rules (a hint: both grow as
    /// needed anyway).
    pub(crate) fn reserve(&mut self, exprs: usize, rules: usize) {
        self.exprs.reserve(exprs);
        self.rules.reserve(rules);
        self.names.reserve(rules);
    }

    pub fn add(&mut self, expr: Expr) -> ExprId {
        let id = ExprId(self.exprs.len() as u32);
        self.exprs.push(expr);
        id
    }

    pub fn bytes(&mut self, b: &[u8]) -> ExprId {
        self.add(Expr::Bytes(b.into()))
    }

    pub fn empty(&mut self) -> ExprId {
        self.bytes(b"")
    }

    /// A character class from arbitrary ranges (normalized here), optionally negated over all
    /// Unicode scalar values.
    pub fn char_class(&mut self, ranges: &[(u32, u32)], negated: bool) -> ExprId {
        // PERF: parsed classes are mostly already normal (one range, or sorted ranges); then
        // normalizing would only copy them twice.
        if !negated && is_normalized(ranges) {
            return self.add(Expr::CharClass(ranges.into()));
        }
        let set = normalize_ranges(ranges);
        let set = if negated { complement_ranges(&set) } else { set };
        self.add(Expr::CharClass(set.into()))
    }

    pub fn seq(&mut self, items: Vec<ExprId>) -> ExprId {
        if items.len() == 1 {
            return items[0];
        }
        self.add(Expr::Seq(items.into()))
    }

    pub fn choice(&mut self, items: Vec<ExprId>) -> ExprId {
        if items.len() == 1 {
            return items[0];
        }
        self.add(Expr::Choice(items.into()))
    }

    pub fn repeat(&mut self, expr: ExprId, min: u32, max: Option<u32>) -> Result<ExprId> {
        let bound = max.unwrap_or(min);
        if bound > limits::MAX_REPEAT_BOUND || min > limits::MAX_REPEAT_BOUND {
            return Err(Error::limit("repetition bound", limits::MAX_REPEAT_BOUND as usize));
        }
        if max.is_some_and(|m| m < min) {
            return Err(Error::new(
                ErrorKind::InvalidGrammar,
                format!("repetition {{{min},{}}} has its upper bound below its lower bound", max.unwrap()),
            ));
        }
        Ok(self.add(Expr::Repeat { expr, min, max }))
    }

    pub fn rule_ref(&mut self, id: RuleId) -> ExprId {
        self.add(Expr::RuleRef(id))
    }

    /// [`Expr::JsonStringIn`] of `keys` or, with `except`, [`Expr::JsonStringExcept`] (the keys
    /// sorted and deduplicated here).
    pub fn json_string<S: AsRef<str>>(&mut self, keys: &[S], except: bool) -> ExprId {
        let mut keys: Vec<Box<str>> = keys.iter().map(|k| k.as_ref().into()).collect();
        keys.sort_unstable();
        keys.dedup();
        let keys = keys.into();
        self.add(if except { Expr::JsonStringExcept(keys) } else { Expr::JsonStringIn(keys) })
    }

    /// [`Expr::Token`] of `ids` or, with `exclude`, [`Expr::ExcludeToken`] (the ids sorted and
    /// deduplicated here).
    pub fn token(&mut self, ids: &[u32], exclude: bool) -> ExprId {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let ids = ids.into();
        self.add(if exclude { Expr::ExcludeToken(ids) } else { Expr::Token(ids) })
    }

    /// Copies every rule and expression of `other` into this builder, renaming rules that clash.
    /// Returns the id the other grammar's root got here.
    pub fn import(&mut self, other: &Grammar) -> RuleId {
        let offset = self.exprs.len() as u32;
        let mut rule_map = Vec::with_capacity(other.rules.len());
        let mut new_names = Vec::with_capacity(other.rules.len());
        for r in &other.rules {
            let name = self.fresh_name(&r.name);
            rule_map.push(self.rule_id(&name));
            new_names.push(name);
        }
        for e in &other.exprs {
            let shift = |x: &ExprId| ExprId(x.0 + offset);
            let e = match e {
                Expr::Seq(xs) => Expr::Seq(xs.iter().map(shift).collect()),
                Expr::Choice(xs) => Expr::Choice(xs.iter().map(shift).collect()),
                Expr::Repeat { expr, min, max } => Expr::Repeat { expr: shift(expr), min: *min, max: *max },
                Expr::RuleRef(r) => Expr::RuleRef(rule_map[r.index()]),
                other => other.clone(),
            };
            self.exprs.push(e);
        }
        for (r, o) in &other.options {
            self.options.push((rule_map[r.index()], o.clone()));
        }
        for ((r, &id), name) in other.rules.iter().zip(&rule_map).zip(new_names) {
            self.rules[id.index()] = Some((name, ExprId(r.body.0 + offset), r.lookahead.map(|l| ExprId(l.0 + offset))));
        }
        rule_map[other.root.index()]
    }

    /// Checks the invariants and returns the grammar rooted at `root`.
    pub fn build(self, root: &str) -> Result<Grammar> {
        let Some(&root_id) = self.names.get(root) else {
            return Err(Error::new(ErrorKind::InvalidGrammar, format!("the root rule '{root}' is not defined")));
        };
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, r) in self.rules.into_iter().enumerate() {
            let Some((name, body, lookahead)) = r else {
                // PERF: the name is looked up only on this error path (copying every name into an
                // id-indexed table up front cost an allocation per rule).
                let name = self.names.iter().find(|(_, id)| id.index() == i).map_or("", |(n, _)| n.as_str());
                return Err(Error::new(
                    ErrorKind::InvalidGrammar,
                    format!("rule '{name}' is referenced but not defined"),
                ));
            };
            rules.push(Rule { name, body, lookahead });
        }
        let mut options = self.options;
        options.sort_by_key(|o| o.0);
        let g = Grammar {
            rules,
            exprs: self.exprs,
            root: root_id,
            options,
            excluded_words: None,
            kept: Arc::new([]),
            own_class: Arc::new([]),
        };
        g.check()?;
        Ok(g)
    }
}

impl Grammar {
    /// Renumbers the rules: rule `i` becomes rule `new_ids[i]`, and every reference and the root
    /// follow. `new_ids` must be a permutation of the rule ids; expressions keep their ids.
    /// PERF: the EBNF parser used to rebuild the whole grammar (cloning every expression) to put
    /// rules in definition order; this permutes in place.
    pub(crate) fn renumber_rules(&mut self, new_ids: &[RuleId]) {
        debug_assert_eq!(new_ids.len(), self.rules.len());
        for e in &mut self.exprs {
            if let Expr::RuleRef(r) = e {
                *r = new_ids[r.index()];
            }
        }
        let mut slots: Vec<Option<Rule>> = Vec::with_capacity(self.rules.len());
        slots.resize_with(self.rules.len(), || None);
        for (r, &id) in std::mem::take(&mut self.rules).into_iter().zip(new_ids) {
            slots[id.index()] = Some(r);
        }
        self.rules = slots.into_iter().map(|r| r.expect("new_ids is a permutation")).collect();
        self.root = new_ids[self.root.index()];
        for o in &mut self.options {
            o.0 = new_ids[o.0.index()];
        }
        self.options.sort_by_key(|o| o.0);
    }

    /// True if some expression matches a token by id ([`Expr::Token`], [`Expr::ExcludeToken`]).
    pub fn has_token_exprs(&self) -> bool {
        self.exprs.iter().any(|e| matches!(e, Expr::Token(_) | Expr::ExcludeToken(_)))
    }

    /// The grammar with every token expression used inside a rule body moved into a rule of its
    /// own (`Token#N`, one per distinct set, never a writable name) whose body is exactly that
    /// expression, so the compiler can give each set one token-edge automaton. Rule ids of the
    /// existing rules are unchanged; the new rules come last. Returns the grammar unchanged when it
    /// has no token expression.
    pub(crate) fn lift_token_exprs(&self) -> Grammar {
        let mut g = self.clone();
        let mut lifted: HashMap<Expr, RuleId> = HashMap::new();
        let n = g.exprs.len();
        for i in 0..n {
            if !matches!(g.exprs[i], Expr::Token(_) | Expr::ExcludeToken(_)) {
                continue;
            }
            let e = g.exprs[i].clone();
            let r = match lifted.get(&e) {
                Some(&r) => r,
                None => {
                    let r = RuleId(g.rules.len() as u32);
                    let body = ExprId(g.exprs.len() as u32);
                    g.exprs.push(e.clone());
                    g.rules.push(Rule { name: format!("Token#{}", lifted.len()), body, lookahead: None });
                    lifted.insert(e, r);
                    r
                }
            };
            g.exprs[i] = Expr::RuleRef(r);
        }
        g
    }

    /// Releases spare capacity of the expression arena (after [`GrammarBuilder::reserve`]).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.exprs.shrink_to_fit();
    }

    /// Verifies the structural invariants listed in the module doc, without recursion.
    fn check(&self) -> Result<()> {
        let n_exprs = self.exprs.len();
        let n_rules = self.rules.len() as u32;
        let bad = |what: &str| Err(Error::new(ErrorKind::Internal, format!("malformed grammar: {what}")));
        // depth[i] = nesting depth of expression i; children precede parents.
        let mut depth = vec![0u32; n_exprs];
        for (i, e) in self.exprs.iter().enumerate() {
            let children: &[ExprId] = match e {
                Expr::Seq(xs) | Expr::Choice(xs) => xs,
                Expr::Repeat { expr, .. } => std::slice::from_ref(expr),
                Expr::RuleRef(r) => {
                    if r.0 >= n_rules {
                        return bad("rule reference out of range");
                    }
                    &[]
                }
                Expr::CharClass(ranges) => {
                    let ok = ranges.iter().all(|&(lo, hi)| lo <= hi && hi <= 0x10_FFFF)
                        && ranges.windows(2).all(|w| w[0].1 + 1 < w[1].0);
                    if !ok {
                        return bad("character class not normalized");
                    }
                    &[]
                }
                Expr::Bytes(_) => &[],
                Expr::JsonStringIn(keys) | Expr::JsonStringExcept(keys) => {
                    if !keys.windows(2).all(|w| w[0] < w[1]) {
                        return bad("excluded strings not sorted and distinct");
                    }
                    &[]
                }
                Expr::Token(ids) | Expr::ExcludeToken(ids) => {
                    if !ids.windows(2).all(|w| w[0] < w[1]) {
                        return bad("token ids not sorted and distinct");
                    }
                    &[]
                }
            };
            let mut d = 0;
            for c in children {
                if c.index() >= i {
                    return bad("expression refers forward");
                }
                d = d.max(depth[c.index()] + 1);
            }
            if d as usize > limits::MAX_NESTING {
                return Err(Error::limit("expression nesting depth", limits::MAX_NESTING));
            }
            depth[i] = d;
        }
        for r in &self.rules {
            if r.body.index() >= n_exprs || r.lookahead.is_some_and(|l| l.index() >= n_exprs) {
                return bad("rule body out of range");
            }
        }
        Ok(())
    }

    /// The expressions a rule's body and lookahead use, children before parents.
    pub fn children(&self, id: ExprId) -> &[ExprId] {
        match self.expr(id) {
            Expr::Seq(xs) | Expr::Choice(xs) => xs,
            Expr::Repeat { expr, .. } => std::slice::from_ref(expr),
            _ => &[],
        }
    }
}

/// True if `ranges` is already what [`normalize_ranges`] returns for it: sorted, disjoint,
/// non-adjacent, non-empty ranges within the Unicode range.
fn is_normalized(ranges: &[(u32, u32)]) -> bool {
    ranges.iter().all(|&(lo, hi)| lo <= hi && hi <= 0x10_FFFF) && ranges.windows(2).all(|w| w[0].1 + 1 < w[1].0)
}

/// Sorts and merges ranges; drops inverted ones; clamps to the Unicode range.
pub fn normalize_ranges(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> =
        ranges.iter().filter(|r| r.0 <= r.1 && r.0 <= 0x10_FFFF).map(|&(lo, hi)| (lo, hi.min(0x10_FFFF))).collect();
    v.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The complement of normalized ranges within `0..=0x10FFFF`.
pub fn complement_ranges(set: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(set.len() + 1);
    let mut next = 0u32;
    for &(lo, hi) in set {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = hi + 1;
    }
    if next <= 0x10_FFFF {
        out.push((next, 0x10_FFFF));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_normalize_and_complement() {
        assert_eq!(normalize_ranges(&[(5, 9), (0, 3), (4, 4), (20, 10)]), vec![(0, 9)]);
        assert_eq!(complement_ranges(&[(0, 9), (20, 0x10_FFFF)]), vec![(10, 19)]);
        assert_eq!(complement_ranges(&[]), vec![(0, 0x10_FFFF)]);
    }

    #[test]
    fn builder_reports_undefined_and_duplicate_rules() {
        let mut b = GrammarBuilder::new();
        let a = b.rule_id("a");
        let r = b.rule_ref(a);
        b.define("root", r, None).unwrap();
        let err = b.clone().build("root").unwrap_err();
        assert!(err.message().contains("'a' is referenced but not defined"), "{err}");
        let e = b.bytes(b"x");
        b.define("a", e, None).unwrap();
        assert!(b.define("a", e, None).is_err());
        let g = b.build("root").unwrap();
        assert_eq!(g.rules().len(), 2);
    }

    #[test]
    fn renumber_rules_moves_rules_references_and_root() {
        let mut b = GrammarBuilder::new();
        let a = b.rule_id("a");
        let ra = b.rule_ref(a);
        b.define("root", ra, None).unwrap(); // root is rule 1, a is rule 0
        let x = b.bytes(b"x");
        b.define("a", x, None).unwrap();
        let mut g = b.build("root").unwrap();
        assert_eq!(g.rule(g.root()).name, "root");
        g.renumber_rules(&[RuleId(1), RuleId(0)]);
        assert_eq!(g.root(), RuleId(0));
        assert_eq!(g.rules()[0].name, "root");
        assert_eq!(g.rules()[1].name, "a");
        assert_eq!(g.expr(g.rules()[0].body), &Expr::RuleRef(RuleId(1)));
        assert_eq!(g.expr(g.rules()[1].body), &Expr::Bytes(b"x".as_slice().into()));
    }

    #[test]
    fn char_class_stores_the_normal_form_either_way() {
        let mut b = GrammarBuilder::new();
        let cases: [&[(u32, u32)]; 4] =
            [&[(0x41, 0x5A)], &[(0x30, 0x39), (0x41, 0x5A)], &[(0x41, 0x5A), (0x30, 0x39)], &[(5, 9), (10, 12)]];
        for ranges in cases {
            let e = b.char_class(ranges, false);
            assert_eq!(b.exprs[e.index()], Expr::CharClass(normalize_ranges(ranges).into()), "{ranges:?}");
        }
    }

    #[test]
    fn import_renames_clashing_rules() {
        let mut b = GrammarBuilder::new();
        let x = b.bytes(b"x");
        b.define("root", x, None).unwrap();
        let g = b.build("root").unwrap();
        let mut b2 = g.to_builder();
        let r2 = b2.import(&g);
        assert_ne!(r2, g.root());
        let g2 = b2.build("root").unwrap();
        assert_eq!(g2.rules()[r2.index()].name, "root_1");
    }
}
