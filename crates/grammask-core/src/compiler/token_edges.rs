//! Token edges: automaton edges that read one whole token by id rather than bytes.
//!
//! Pipeline place: [`Grammar::lift_token_exprs`](crate::grammar::Grammar) gives every distinct
//! token expression (`Token(...)`, `ExcludeToken(...)`) a rule of its own; here such a *token
//! rule* gets a two-state automaton: a start state with no byte or rule edge (so no text ever
//! moves through it) and a final state no edge reaches. An item in a token rule's start state
//! stands for a token edge labelled with the rule's id set: masks OR the set into the allowed
//! tokens, and accepting a token of the set completes the rule in one step (`crate::token_edges`).
//! Everything that walks bytes (kernel walks, FOLLOW sets, jump-forward, `accept_string`) sees a
//! state that reads nothing, which is exactly right: text never matches a token element.
use super::dfa::Dfa;
use super::{Automata, StateId};
use crate::grammar::{Expr, ExprId, Grammar, RuleId};

/// The id set of a token edge.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenSet {
    /// Sorted, distinct ids.
    pub ids: Box<[u32]>,
    /// `ExcludeToken`: the set is every text token (not special, not stop) except `ids`.
    pub exclude: bool,
}

impl TokenSet {
    /// Whether the set names `id` (before the vocabulary's special and stop tokens are applied).
    #[inline]
    pub fn names(&self, id: u32) -> bool {
        self.ids.binary_search(&id).is_ok() != self.exclude
    }
}

/// The token rules of a grammar's automata. Empty (and free) for grammars without token
/// expressions.
#[derive(Clone, Debug, Default)]
pub struct TokenRules {
    /// Per rule: the index of its set in `sets`, or `u32::MAX` for an ordinary rule. Empty when
    /// there is no token rule.
    of_rule: Vec<u32>,
    sets: Vec<TokenSet>,
}

impl TokenRules {
    pub(super) fn new(g: &Grammar) -> TokenRules {
        let mut t = TokenRules::default();
        for (r, rule) in g.rules().iter().enumerate() {
            let set = match g.expr(rule.body) {
                Expr::Token(ids) => TokenSet { ids: ids.clone(), exclude: false },
                Expr::ExcludeToken(ids) => TokenSet { ids: ids.clone(), exclude: true },
                _ => continue,
            };
            if t.of_rule.is_empty() {
                t.of_rule = vec![u32::MAX; g.rules().len()];
            }
            t.of_rule[r] = t.sets.len() as u32;
            t.sets.push(set);
        }
        t
    }

    /// True if the grammar has no token edge.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The distinct id sets, indexed as [`TokenRules::set_of`] returns them.
    pub fn sets(&self) -> &[TokenSet] {
        &self.sets
    }

    /// The set index of token rule `r`, `None` for an ordinary rule.
    #[inline]
    pub fn set_of_rule(&self, r: RuleId) -> Option<u32> {
        self.of_rule.get(r.index()).copied().filter(|&k| k != u32::MAX)
    }

    /// The set index of the token edge at `s`: `Some` when `s` is the start of a token rule.
    #[inline]
    pub fn set_of(&self, a: &Automata, s: StateId) -> Option<u32> {
        if self.sets.is_empty() {
            return None;
        }
        let r = a.state(s).rule;
        self.set_of_rule(r).filter(|_| a.rule_start(r) == s)
    }

    /// The final state of the token rule whose token edge starts at `s` (for shortest-completion
    /// costs: the edge costs one token).
    pub fn edge_target(&self, a: &Automata, s: StateId) -> Option<StateId> {
        // `token_rule_dfa`: the final state comes right after the start.
        self.set_of(a, s).map(|_| StateId(s.0 + 1))
    }

    /// Like [`TokenRules::set_of`], for use while `a` is being assembled.
    pub(super) fn set_of_start(&self, a: &Automata, s: StateId) -> Option<u32> {
        self.set_of(a, s)
    }
}

/// The automaton of a token rule (whose body is exactly a token expression), `None` for any
/// other rule: state 0 (the token edge's source, not final) and state 1 (final), no edges.
pub(super) fn token_rule_dfa(g: &Grammar, body: ExprId) -> Option<Dfa> {
    if !matches!(g.expr(body), Expr::Token(_) | Expr::ExcludeToken(_)) {
        return None;
    }
    let mut d = Dfa::default();
    d.end_state(false);
    d.end_state(true);
    Some(d)
}

impl Automata {
    /// The grammar's token rules (empty without token expressions).
    #[inline]
    pub fn tokens(&self) -> &TokenRules {
        &self.tokens
    }

    /// True if some rule is a token edge.
    #[inline]
    pub fn has_token_edges(&self) -> bool {
        !self.tokens.is_empty()
    }
}
