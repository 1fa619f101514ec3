//! The converter's rules of fixed text (`json_char`, `json_integer`, `json_number`, the key
//! tries' shared deviation rules) defined as grammar IR from a parse of their text kept per
//! thread, instead of parsing that text again for every schema.
//!
//! Pipeline place: [`super::emit::Ebnf::define_fixed`] keeps them out of the text when the
//! converter runs for [`super::json_schema_to_grammar`]; [`build`] defines them in the builder
//! after the text's rules ([`crate::ebnf::parse_ebnf_with`]). [`super::json_schema_to_ebnf`]
//! still writes them as text.
//!
//! PERF: these bodies (~0.9 KB of escapes and classes under canonical spelling) were about a
//! third of the text parsed per band schema, the same text every time.
//!
//! Invariant: a rule defined here has the expression tree that parsing `name ::= body` gives
//! (same node kinds, children and order; references by name), so the grammar is the text's but
//! for rule numbering (these rules come after the text's).
use std::cell::RefCell;

use crate::error::Result;
use crate::fasthash::FastMap;
use crate::grammar::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};

/// Parsed templates kept per thread (a handful of distinct fixed rules exist; the bound only
/// guards against misuse).
const MAX_TEMPLATES: usize = 64;

thread_local! {
    /// `(name, body)` -> the grammar of `name ::= body` (other names it references defined as
    /// placeholders).
    static TEMPLATES: RefCell<FastMap<(&'static str, &'static str), Grammar>> = RefCell::new(FastMap::default());
}

#[cfg(test)]
thread_local! {
    /// Fixed rules [`build`] defined on this thread.
    pub(super) static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Defines the rules `fixed` (name, body) in `b`; returns their ids.
pub(crate) fn build(fixed: &[(&'static str, &'static str)], b: &mut GrammarBuilder) -> Result<Vec<RuleId>> {
    #[cfg(test)]
    BUILT.with(|n| n.set(n.get() + fixed.len()));
    TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        let mut ids = Vec::with_capacity(fixed.len());
        for &(name, body) in fixed {
            if !t.contains_key(&(name, body)) {
                if t.len() >= MAX_TEMPLATES {
                    t.clear();
                }
                let g = template(name, body)?;
                t.insert((name, body), g);
            }
            let g = &t[&(name, body)];
            let src = g.rule(g.root());
            let e = copy(g, src.body, b);
            let lookahead = src.lookahead.map(|l| copy(g, l, b));
            ids.push(b.define(name, e, lookahead)?);
        }
        Ok(ids)
    })
}

/// The grammar of the text `name ::= body`, the rules it references but does not define
/// given an empty body (never copied: [`copy`] maps references by name).
fn template(name: &str, body: &str) -> Result<Grammar> {
    crate::ebnf::parse_ebnf_with(&format!("{name} ::= {body}\n"), name, 0, |b| {
        let mut ids = Vec::new();
        for n in b.undefined_names() {
            let e = b.empty();
            ids.push(b.define(&n, e, None)?);
        }
        Ok(ids)
    })
    .map(|(g, _)| g)
}

/// Adds to `b` the expression `e` of `g` (children first, in order, as the parser adds them);
/// a rule reference names the rule of `b` of the same name.
fn copy(g: &Grammar, e: ExprId, b: &mut GrammarBuilder) -> ExprId {
    match g.expr(e) {
        Expr::Seq(xs) => {
            let items: Vec<ExprId> = xs.iter().map(|&x| copy(g, x, b)).collect();
            b.add(Expr::Seq(items.into()))
        }
        Expr::Choice(xs) => {
            let items: Vec<ExprId> = xs.iter().map(|&x| copy(g, x, b)).collect();
            b.add(Expr::Choice(items.into()))
        }
        &Expr::Repeat { expr, min, max } => {
            let expr = copy(g, expr, b);
            b.add(Expr::Repeat { expr, min, max })
        }
        Expr::RuleRef(r) => {
            let id = b.rule_id(&g.rule(*r).name);
            b.rule_ref(id)
        }
        leaf => b.add(leaf.clone()),
    }
}
