//! The `TagDispatch(("tag", rule), ..., loop_after_dispatch=true, excludes=("s", ...))` macro of
//! the XGrammar EBNF dialect: free text that contains no trigger (and no exclude) until a
//! trigger, then the trigger's rule; with `loop_after_dispatch` (the default) free text again
//! after the rule, and so on. Free text may end anywhere. Lowered to existing constructs:
//! `F (("tag1" r1 | ...) F)*` (without looping `F ("tag1" r1 | ...)?`), where `F` is the language
//! of texts containing none of the strings, built by the regex toolkit as the complement of
//! `.*(s1|...).*` (one automaton, like a `Regex(...)` macro). Without tuples (XGrammar prints an
//! `any_text` so) it is `F` alone.
use super::Parser;
use crate::error::{Error, ErrorKind, Result};
use crate::grammar::{ExprId, Grammar};

/// The grammar (root `text`) of the texts that contain none of `strings` (any text when empty).
fn free_text_grammar(strings: &[String]) -> Result<Grammar> {
    use crate::regex::{Anchoring, CharDfa, Regex, RegexFlags, TextMode};
    let flags = RegexFlags { ignore_case: false, dot_all: true };
    if strings.is_empty() {
        let any = CharDfa::from_regex(&Regex::parse("[\\s\\S]*", flags)?, Anchoring::FullMatch)?;
        return crate::ebnf::parse_ebnf(&any.to_ebnf("text", TextMode::Raw), "text");
    }
    let mut alts = Vec::with_capacity(strings.len());
    for s in strings {
        let mut e = String::with_capacity(s.len() * 2);
        for c in s.chars() {
            if "\\^$.|?*+()[]{}/-".contains(c) {
                e.push('\\');
            }
            e.push(c);
        }
        alts.push(e);
    }
    let pattern = format!("[\\s\\S]*(?:{})[\\s\\S]*", alts.join("|"));
    let re = Regex::parse(&pattern, flags)?;
    let text = CharDfa::from_regex(&re, Anchoring::FullMatch)?.complement().to_ebnf("text", TextMode::Raw);
    crate::ebnf::parse_ebnf(&text, "text")
}

/// A dispatch macro's arguments (see [`Parser::dispatch_args`]).
pub(super) struct DispatchArgs<K> {
    pub tags: Vec<(K, ExprId)>,
    pub excludes: Vec<K>,
    pub looping: bool,
}

impl Parser<'_> {
    /// A string literal argument (the cursor is on `"`).
    fn string_arg(&mut self, what: &str) -> Result<String> {
        if self.cur.peek() != Some(b'"') {
            return Err(self.cur.expected(what));
        }
        let pos = self.cur.pos;
        let s = String::from_utf8(self.cur.string_literal()?).expect("string literals are UTF-8");
        if s.is_empty() {
            return Err(self.cur.error_at(ErrorKind::InvalidGrammar, pos, "TagDispatch strings must not be empty"));
        }
        Ok(s)
    }

    /// Parses a dispatch macro's arguments after `name` (the cursor is on `name`) up to its `)`:
    /// `(key, rule)` tuples, `loop_after_dispatch=true|false` and `excludes=(key, ...)`, where
    /// `key` reads one trigger (a string or a token id) and `excludes_example` shows the tuple.
    pub(super) fn dispatch_args<K>(
        &mut self,
        name: &str,
        excludes_example: &str,
        mut key: impl FnMut(&mut Self) -> Result<K>,
    ) -> Result<DispatchArgs<K>> {
        self.cur.pos += name.len() + 1;
        let mut args = DispatchArgs { tags: Vec::new(), excludes: Vec::new(), looping: true };
        self.macro_args(name, |p| {
            if p.cur.peek() == Some(b'(') {
                p.cur.pos += 1;
                p.skip_ws()?;
                let k = key(p)?;
                p.skip_ws()?;
                if p.cur.peek() != Some(b',') {
                    return Err(p.cur.expected("',' between the trigger and the rule name"));
                }
                p.cur.pos += 1;
                p.skip_ws()?;
                let r = p.macro_rule_ref(name)?;
                p.skip_ws()?;
                if p.cur.peek() != Some(b')') {
                    return Err(p.cur.expected("')' after the rule name"));
                }
                p.cur.pos += 1;
                args.tags.push((k, r));
                return Ok(());
            }
            let arg_pos = p.cur.pos;
            let n = p.cur.name_len_at(arg_pos, false);
            let arg = p.cur.text[arg_pos..arg_pos + n].to_owned();
            p.cur.pos += n;
            p.skip_ws()?;
            if n == 0 || p.cur.peek() != Some(b'=') {
                return Err(p.cur.expected("a (trigger, rule) tuple or a named argument"));
            }
            p.cur.pos += 1;
            p.skip_ws()?;
            match arg.as_str() {
                "loop_after_dispatch" => args.looping = p.bool_arg()?,
                "excludes" => {
                    if p.cur.peek() != Some(b'(') {
                        return Err(p.cur.expected(&format!("a tuple, as in excludes={excludes_example}")));
                    }
                    p.cur.pos += 1;
                    p.macro_args(name, |p| {
                        args.excludes.push(key(p)?);
                        Ok(())
                    })?;
                }
                _ => {
                    return Err(p.cur.error_at(
                        ErrorKind::EbnfSyntax,
                        arg_pos,
                        format!("unknown argument '{arg}' of {name}(...) (expected loop_after_dispatch or excludes)"),
                    ))
                }
            }
            Ok(())
        })?;
        Ok(args)
    }

    /// Parses `TagDispatch(...)` (the cursor is on `TagDispatch`); see the module doc.
    pub(super) fn tag_dispatch_macro(&mut self) -> Result<ExprId> {
        let start = self.cur.pos;
        let DispatchArgs { tags, excludes, looping } =
            self.dispatch_args("TagDispatch", "(\"a\", \"b\")", |p| p.string_arg("a string in TagDispatch(...)"))?;
        if let Some(e) = excludes.iter().find(|e| tags.iter().any(|(t, _)| t.starts_with(e.as_str()))) {
            return Err(self.cur.error_at(
                ErrorKind::InvalidGrammar,
                start,
                format!("TagDispatch: the exclude string {e:?} is a prefix of a trigger"),
            ));
        }
        let mut strings: Vec<String> = tags.iter().map(|t| t.0.clone()).collect();
        strings.extend(excludes);
        let (l, c) = self.cur.line_col(start);
        let g = free_text_grammar(&strings)
            .map_err(|e| Error::new(e.kind(), format!("in TagDispatch(...): {e}")).at_text(l, c))?;
        let placeholder = format!("Regex#{}", self.regexes.len() + 1);
        let id = self.b.rule_id(&placeholder);
        self.regexes.push((placeholder, g));
        let free = self.b.rule_ref(id);
        if tags.is_empty() {
            // No trigger (as XGrammar prints an `any_text` with an end): the free text alone.
            return Ok(free);
        }
        let mut alts = Vec::with_capacity(tags.len());
        for (tag, r) in &tags {
            let t = self.b.bytes(tag.as_bytes());
            alts.push(self.b.seq(vec![t, *r]));
        }
        let arm = self.b.choice(alts);
        Ok(if looping {
            let free2 = self.b.rule_ref(id);
            let step = self.b.seq(vec![arm, free2]);
            let rep = self.b.repeat(step, 0, None)?;
            self.b.seq(vec![free, rep])
        } else {
            let opt = self.b.repeat(arm, 0, Some(1))?;
            self.b.seq(vec![free, opt])
        })
    }
}
