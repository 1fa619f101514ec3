//! The token-level macros of the XGrammar EBNF dialect: `Token(id, ...)`,
//! `ExcludeToken(id, ...)` and `TokenTagDispatch((id, rule), ..., loop_after_dispatch=true,
//! excludes=(id, ...))`. They become [`crate::grammar::Expr::Token`] and
//! [`crate::grammar::Expr::ExcludeToken`] elements (`TokenTagDispatch` is lowered to them, see
//! [`Parser::token_tag_dispatch_macro`]).
use super::tag_dispatch::DispatchArgs;
use super::{at, Parser, NONE};
use crate::error::{ErrorKind, Result};
use crate::grammar::ExprId;

impl<'a> Parser<'a> {
    /// A token id: a decimal integer that fits in `u32`.
    fn token_id(&mut self, macro_name: &str) -> Result<u32> {
        let start = self.cur.pos;
        let digits = self.cur.bytes[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(self.cur.expected(&format!("a token id (a non-negative integer) in {macro_name}(...)")));
        }
        self.cur.pos += digits;
        let text = &self.cur.text[start..start + digits];
        text.parse::<u32>().map_err(|_| {
            self.cur.error_at(ErrorKind::InvalidGrammar, start, format!("token id {text} is out of range"))
        })
    }

    /// `(id, ...)`: a parenthesized list of token ids (the cursor is on `(`).
    fn token_id_tuple(&mut self, macro_name: &str) -> Result<Vec<u32>> {
        self.cur.pos += 1;
        let mut ids = Vec::new();
        self.macro_args(macro_name, |p| {
            ids.push(p.token_id(macro_name)?);
            Ok(())
        })?;
        Ok(ids)
    }

    /// Parses `Token(id, ...)` or `ExcludeToken(id, ...)` (the cursor is on `name`).
    pub(super) fn token_macro(&mut self, name: &str) -> Result<ExprId> {
        self.cur.pos += name.len();
        let ids = self.token_id_tuple(name)?;
        let exclude = name == "ExcludeToken";
        if ids.is_empty() && !exclude {
            return Err(self.cur.expected("at least one token id in Token(...)"));
        }
        Ok(self.b.token(&ids, exclude))
    }

    /// A rule name argument of a macro, as a reference (the cursor is on the name).
    pub(super) fn macro_rule_ref(&mut self, macro_name: &str) -> Result<ExprId> {
        let pos = self.cur.pos;
        let n = self.cur.name_len_at(pos, true);
        if n == 0 {
            return Err(self.cur.expected(&format!("a rule name in {macro_name}(...)")));
        }
        let text: &'a str = self.cur.text;
        let rule = &text[pos..pos + n];
        self.cur.pos += n;
        let rid = self.name_id(rule);
        let first = at(&mut self.first_ref, rid);
        if *first == NONE {
            *first = pos;
        }
        Ok(self.b.rule_ref(rid))
    }

    /// `true` or `false`.
    pub(super) fn bool_arg(&mut self) -> Result<bool> {
        if self.cur.starts_with("true") {
            self.cur.pos += 4;
            Ok(true)
        } else if self.cur.starts_with("false") {
            self.cur.pos += 5;
            Ok(false)
        } else {
            Err(self.cur.expected("true or false"))
        }
    }

    /// Parses `TokenTagDispatch((id, rule), ..., loop_after_dispatch=true, excludes=(id, ...))`
    /// (the cursor is on `TokenTagDispatch`): any tokens but the triggers and the excludes, until
    /// a trigger token, then its rule; with `loop_after_dispatch` (the default) free tokens again
    /// after the rule, and so on. Every free position may end. Lowered to
    /// `(ExcludeToken(T ∪ E) | Token(t1) r1 | ...)*`, or without looping to
    /// `ExcludeToken(T ∪ E)* (Token(t1) r1 | ...)?`, as XGrammar's dispatch reads them.
    pub(super) fn token_tag_dispatch_macro(&mut self) -> Result<ExprId> {
        const NAME: &str = "TokenTagDispatch";
        let start = self.cur.pos;
        let DispatchArgs { tags, excludes, looping } = self.dispatch_args(NAME, "(1, 2)", |p| p.token_id(NAME))?;
        if tags.is_empty() {
            return Err(self.cur.expected("at least one (token id, rule) tuple in TokenTagDispatch(...)"));
        }
        if let Some(&(id, _)) = tags.iter().find(|t| excludes.contains(&t.0)) {
            return Err(self.cur.error_at(
                ErrorKind::InvalidGrammar,
                start,
                format!("TokenTagDispatch: trigger token id {id} must not overlap with the exclude token ids"),
            ));
        }
        let mut free_ids: Vec<u32> = tags.iter().map(|t| t.0).collect();
        free_ids.extend_from_slice(&excludes);
        let free = self.b.token(&free_ids, true);
        let mut alts = Vec::with_capacity(tags.len());
        for &(id, r) in &tags {
            let t = self.b.token(&[id], false);
            alts.push(self.b.seq(vec![t, r]));
        }
        Ok(if looping {
            alts.insert(0, free);
            let c = self.b.choice(alts);
            self.b.repeat(c, 0, None)?
        } else {
            let free_star = self.b.repeat(free, 0, None)?;
            let c = self.b.choice(alts);
            let opt = self.b.repeat(c, 0, Some(1))?;
            self.b.seq(vec![free_star, opt])
        })
    }
}
