//! The rule and expression parser for both dialects, building a [`Grammar`] directly.
//!
//! Expressions are parsed with an explicit stack of open groups ([`Frame`]), never by recursion,
//! so input nesting costs heap, not stack; more than [`limits::MAX_NESTING`] open groups is a
//! `LimitExceeded` error raised as soon as the limit is crossed.

use super::cursor::{Cursor, EscapeContext};
use crate::error::{Error, ErrorKind, Result};
use crate::fasthash::FastState;
use crate::grammar::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits;
use std::collections::HashMap;

mod tag_dispatch;
mod token_macros;

/// "No position" in the per-rule position tables.
const NONE: usize = usize::MAX;

/// The most expressions reserved up front (see [`Parser::parse`]).
const EXPR_RESERVE_CAP: usize = 1 << 18;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dialect {
    /// XGrammar / GBNF: `name ::= expr`, quantifiers, classes, lookahead.
    XGrammar,
    /// ollama / Go `x/exp/ebnf` style: `name = expr .`, `[opt]`, `{rep}`, `"a" … "z"`.
    Iso,
}

/// What opened a frame, and so what closes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FrameKind {
    /// The body of a rule; closed by the end of the rule.
    Body,
    /// `( ... )`.
    Group,
    /// `(= ... )` after an XGrammar rule body.
    Lookahead,
    /// ISO `[ ... ]`.
    Optional,
    /// ISO `{ ... }`.
    Repeat,
}

impl FrameKind {
    fn closer(self) -> &'static str {
        match self {
            FrameKind::Body => "the end of the rule",
            FrameKind::Group | FrameKind::Lookahead => "')'",
            FrameKind::Optional => "']'",
            FrameKind::Repeat => "'}'",
        }
    }
}

/// An open group. Its finished alternatives are `Parser::items[start..seq_start]` and the
/// sequence being read is `Parser::items[seq_start..]` (only the innermost frame grows).
/// PERF: one shared item buffer instead of two vectors per group saves two allocations per `(`.
#[derive(Clone, Copy)]
struct Frame {
    kind: FrameKind,
    open: usize,
    start: usize,
    seq_start: usize,
}

impl Frame {
    fn new(kind: FrameKind, open: usize, start: usize) -> Self {
        Frame { kind, open, start, seq_start: start }
    }
}

/// Whether [`Parser::reduce`] builds a sequence or a choice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compose {
    Seq,
    Choice,
}

/// Macro names (XGrammar's, and grammask's `JsonStringIn` and `JsonStringExcept`); `Name(` with
/// one of these is a macro call, not a reference and a group.
const MACROS: &[&str] = &[
    "Regex",
    "Substring",
    "TagDispatch",
    "Token",
    "ExcludeToken",
    "TokenTagDispatch",
    "JsonStringIn",
    "JsonStringExcept",
];

pub(crate) struct Parser<'a> {
    cur: Cursor<'a>,
    dialect: Dialect,
    b: GrammarBuilder,
    /// Rule ids of the names written in the text. PERF: keys borrow the text, so a reference costs
    /// one lookup and no copy of the name.
    ids: HashMap<&'a str, RuleId, FastState>,
    /// Per rule id: position of the first reference to the rule ([`NONE`] if none), for "not
    /// defined" errors.
    first_ref: Vec<usize>,
    /// Per rule id: position of the rule's definition ([`NONE`] if not defined yet).
    def_pos: Vec<usize>,
    /// Defined rules in text order.
    defs: Vec<(&'a str, RuleId)>,
    /// Nesting depth of each composite expression created so far (absent = leaf, depth 0),
    /// so that a too-deep expression is reported where it is written.
    depth: Vec<u32>,
    /// `Regex(...)` macros: the placeholder rule each one references, and the pattern's grammar,
    /// imported after all rules are read so that its rule names cannot clash with later ones.
    regexes: Vec<(String, Grammar)>,
    /// `Substring(...)` macros read so far (names their rules).
    substrings: usize,
    /// Open groups of the rule being parsed, innermost last, and their items (see [`Frame`]).
    frames: Vec<Frame>,
    items: Vec<ExprId>,
    /// PERF: buffers reused by every string literal and character class.
    lit: Vec<u8>,
    ranges: Vec<(u32, u32)>,
}

impl<'a> Parser<'a> {
    pub fn new(text: &'a str, dialect: Dialect) -> Self {
        Parser {
            cur: Cursor::new(text),
            dialect,
            b: GrammarBuilder::new(),
            ids: HashMap::with_hasher(FastState),
            first_ref: Vec::new(),
            def_pos: Vec::new(),
            defs: Vec::new(),
            depth: Vec::new(),
            regexes: Vec::new(),
            substrings: 0,
            frames: Vec::new(),
            items: Vec::new(),
            lit: Vec::new(),
            ranges: Vec::new(),
        }
    }

    pub fn parse(self, root: &str) -> Result<Grammar> {
        self.parse_with(root, 0, |_| Ok(Vec::new())).map(|(g, _)| g)
    }

    /// [`Self::parse`], with `extra` defining rules in the builder after the text's (they may
    /// be referenced by the text): it returns the ids of the rules it defined, and the grammar
    /// comes with those rules' ids in it (the grammar numbers its rules anew: a builder id is not
    /// a grammar id). `extra_bytes`: about the text those rules would take (reserved for like the
    /// text's).
    pub fn parse_with(
        mut self,
        root: &str,
        extra_bytes: usize,
        extra: impl FnOnce(&mut GrammarBuilder) -> Result<Vec<RuleId>>,
    ) -> Result<(Grammar, Vec<RuleId>)> {
        if self.cur.text.len() > limits::MAX_GRAMMAR_BYTES {
            return Err(Error::limit("grammar text size in bytes", limits::MAX_GRAMMAR_BYTES));
        }
        // PERF: grammars take 4 to 5 bytes of text per expression and rarely under 64 per rule;
        // reserving the arena and the name tables up front saves copying and rehashing them as
        // they grow (capped, so that a long text of comments cannot reserve much). `finish` gives
        // the arena's spare room back.
        let exprs = (self.cur.text.len().saturating_add(extra_bytes) / 4).min(EXPR_RESERVE_CAP);
        let rules = exprs / 16;
        self.b.reserve(exprs, rules);
        self.depth.reserve(exprs);
        self.ids.reserve(rules);
        if self.cur.starts_with("\u{feff}") {
            self.cur.pos += '\u{feff}'.len_utf8(); // a byte-order mark is not part of the grammar
        }
        loop {
            self.skip_ws()?;
            if self.cur.at_end() {
                break;
            }
            let start = self.cur.pos;
            let n = self.cur.name_len_at(start, self.dialect == Dialect::XGrammar);
            if n == 0 {
                let form = if self.dialect == Dialect::XGrammar { "name ::= ..." } else { "name = ... ." };
                return Err(self.cur.expected(&format!("a rule name to start a rule ({form})")));
            }
            let text: &'a str = self.cur.text;
            let name = &text[start..start + n];
            if self.dialect == Dialect::XGrammar && !self.cur.is_line_start(start) {
                return Err(self.cur.error_at(
                    ErrorKind::EbnfSyntax,
                    start,
                    format!("the rule name '{name}' must be the first token on its line (put each rule on a new line)"),
                ));
            }
            self.cur.pos += n;
            let (body, lookahead) = match self.dialect {
                Dialect::XGrammar => {
                    self.cur.skip_blanks();
                    if self.cur.peek() == Some(b'[') {
                        let opts = super::rule_options::parse(&mut self.cur, name)?;
                        let id = self.name_id(name);
                        self.b.set_rule_options(id, opts);
                        self.cur.skip_blanks();
                    }
                    if !self.cur.starts_with("::=") {
                        return Err(self.cur.expected(&format!("'::=' after the rule name '{name}'")));
                    }
                    self.cur.pos += 3;
                    self.body(start)?
                }
                Dialect::Iso => {
                    self.skip_ws()?;
                    if self.cur.peek() != Some(b'=') {
                        return Err(self.cur.expected(&format!("'=' after the rule name '{name}'")));
                    }
                    self.cur.pos += 1;
                    self.body(start)?
                }
            };
            let id = self.name_id(name);
            let first = get(&self.def_pos, id);
            if first != NONE {
                let (l, c) = self.cur.line_col(first);
                return Err(self.cur.error_at(
                    ErrorKind::InvalidGrammar,
                    start,
                    format!("rule '{name}' is defined more than once (first at line {l}, column {c})"),
                ));
            }
            self.b.define(name, body, lookahead).map_err(|e| self.locate(e, start))?;
            *at(&mut self.def_pos, id) = start;
            self.defs.push((name, id));
        }
        // Defined past the text's end (positions only order errors).
        let end = self.cur.bytes.len();
        let extra_ids = extra(&mut self.b)?;
        for &id in &extra_ids {
            *at(&mut self.def_pos, id) = end;
        }
        let (g, new_ids) = self.finish(root)?;
        Ok((g, extra_ids.iter().map(|id| new_ids[id.index()]).collect()))
    }

    /// The rule id of a name written in the text, declaring the rule on first sight.
    fn name_id(&mut self, name: &'a str) -> RuleId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.b.rule_id(name);
        self.ids.insert(name, id);
        id
    }

    fn skip_ws(&mut self) -> Result<()> {
        match self.dialect {
            Dialect::XGrammar => self.cur.skip_ws(true, false),
            Dialect::Iso => self.cur.skip_ws(true, true),
        }
    }

    /// Attaches the text location `pos` to an error from the builder.
    fn locate(&self, e: Error, pos: usize) -> Error {
        let (l, c) = self.cur.line_col(pos);
        e.at_text(l, c)
    }

    /// True if an XGrammar rule definition (`name ::=` or `name[...] ::=`) starts at `pos`.
    fn is_rule_start(&self, pos: usize) -> bool {
        let n = self.cur.name_len_at(pos, true);
        n > 0 && self.is_definition_after_name(pos + n)
    }

    /// True if `::=` (or `[...] ::=`) follows a name that ends at `end`.
    fn is_definition_after_name(&self, end: usize) -> bool {
        let bytes = self.cur.bytes;
        let mut p = end;
        if bytes.get(p) == Some(&b'[') {
            // `name[options] ::=`: the options end on the same line.
            match bytes[p..].iter().position(|&b| b == b']' || b == b'\n') {
                Some(i) if bytes[p + i] == b']' => p += i + 1,
                _ => return false,
            }
        }
        while matches!(bytes.get(p), Some(b' ' | b'\t')) {
            p += 1;
        }
        bytes[p..].starts_with(b"::=")
    }

    /// Parses a rule body (and, for XGrammar, an optional lookahead) up to the end of the rule.
    fn body(&mut self, rule_pos: usize) -> Result<(ExprId, Option<ExprId>)> {
        self.frames.clear();
        self.items.clear();
        self.frames.push(Frame::new(FrameKind::Body, rule_pos, 0));
        let mut body = None;
        loop {
            self.skip_ws()?;
            let pos = self.cur.pos;
            let top = self.top().kind;
            // PERF: the name here (XGrammar), scanned once both to see whether it starts the next
            // rule and to read it as a reference.
            let (name_len, rule_start) = if self.dialect == Dialect::XGrammar {
                let n = self.cur.name_len_at(pos, true);
                (n, n > 0 && self.is_definition_after_name(pos + n))
            } else {
                (self.cur.name_len_at(pos, false), false)
            };
            if self.cur.at_end() || (top != FrameKind::Body && rule_start) {
                if top != FrameKind::Body {
                    return Err(self.unclosed(self.top()));
                }
                if self.dialect == Dialect::Iso {
                    let (l, c) = self.cur.line_col(rule_pos);
                    return Err(self.cur.expected(&format!("'.' to end the rule started at line {l}, column {c}")));
                }
            }
            // The end of the rule: XGrammar, the end of input or the next rule; ISO, its '.'.
            let rule_end = match self.dialect {
                Dialect::XGrammar => self.cur.at_end() || rule_start,
                Dialect::Iso => self.cur.peek() == Some(b'.'),
            };
            if top == FrameKind::Body && rule_end {
                let f = self.pop();
                if self.dialect == Dialect::Iso {
                    self.cur.pos += 1; // the '.'
                    if self.items.len() == f.start {
                        return Ok((self.b.empty(), None)); // `name = .` is the empty production
                    }
                }
                return Ok((self.close(f)?, None));
            }
            let Some(c) = self.cur.peek() else { unreachable!("end of input handled above") };
            match c {
                b'|' => {
                    let seq_start = self.top().seq_start;
                    if self.items.len() == seq_start {
                        // An empty alternative, as llama.cpp's GBNF writes `ws ::= | " "`.
                        let e = self.b.empty();
                        self.items.push(e);
                    }
                    let s = self.reduce(seq_start, Compose::Seq)?;
                    self.items.push(s);
                    self.top_mut().seq_start += 1; // `s` joined the alternatives
                    self.cur.pos += 1;
                }
                b')' | b']' | b'}' if self.dialect == Dialect::Iso || c == b')' => {
                    if let Some(done) = self.close_bracket(c, &mut body)? {
                        return Ok(done);
                    }
                }
                b'(' | b'[' | b'{' if self.dialect == Dialect::Iso || c == b'(' => {
                    self.open_bracket(c, &mut body)?;
                }
                b'"' => {
                    let mut s = std::mem::take(&mut self.lit);
                    self.cur.string_literal_into(&mut s)?;
                    let e = if self.dialect == Dialect::Iso {
                        self.iso_string_or_range(&s, pos)?
                    } else {
                        self.b.bytes(&s)
                    };
                    self.lit = s;
                    self.push_atom(e)?;
                }
                b'`' if self.dialect == Dialect::Iso => {
                    let s = self.raw_string()?;
                    let e = self.iso_string_or_range(&s, pos)?;
                    self.push_atom(e)?;
                }
                b'[' => {
                    let e = self.char_class()?;
                    self.push_atom(e)?;
                }
                b'*' | b'+' | b'?' | b'{' if self.dialect == Dialect::XGrammar => {
                    return Err(self.cur.expected(
                        "an element (a quantifier must follow an element, and quantifiers cannot be stacked)",
                    ));
                }
                _ => self.name_element(pos, name_len, top)?,
            }
        }
    }

    /// Reads the element at `pos` that starts with a name of `n` bytes (0: no name, an error): a
    /// macro call or a rule reference, with its quantifier.
    fn name_element(&mut self, pos: usize, n: usize, top: FrameKind) -> Result<()> {
        if n == 0 {
            let mut what = "an element".to_owned();
            if top != FrameKind::Body {
                what = format!("{what} or {}", top.closer());
            } else if self.dialect == Dialect::Iso {
                what = format!("{what} or '.'");
            }
            return Err(self.cur.expected(&what));
        }
        let text: &'a str = self.cur.text;
        let name = &text[pos..pos + n];
        if self.dialect == Dialect::XGrammar && self.cur.bytes.get(pos + n) == Some(&b'(') && MACROS.contains(&name) {
            if name == "Regex" {
                let e = self.regex_macro()?;
                return self.push_atom(e);
            }
            if name == "Substring" {
                let e = self.substring_macro()?;
                return self.push_atom(e);
            }
            if name == "JsonStringIn" || name == "JsonStringExcept" {
                let e = self.json_string_macro(name)?;
                return self.push_atom(e);
            }
            if name == "Token" || name == "ExcludeToken" {
                let e = self.token_macro(name)?;
                return self.push_atom(e);
            }
            if name == "TagDispatch" {
                let e = self.tag_dispatch_macro()?;
                return self.push_atom(e);
            }
            if name == "TokenTagDispatch" {
                let e = self.token_tag_dispatch_macro()?;
                return self.push_atom(e);
            }
            return Err(self.cur.error_at(
                ErrorKind::Unsupported,
                pos,
                format!("the macro '{name}(...)' is not supported yet"),
            ));
        }
        self.cur.pos += n;
        let id = self.name_id(name);
        let first = at(&mut self.first_ref, id);
        if *first == NONE {
            *first = pos;
        }
        let e = self.b.rule_ref(id);
        self.push_atom(e)
    }

    /// Handles `)`, `]` or `}` at the cursor: closes the innermost frame and appends its
    /// expression to the parent. Returns the finished rule when it closed a lookahead.
    fn close_bracket(&mut self, c: u8, body: &mut Option<ExprId>) -> Result<Option<(ExprId, Option<ExprId>)>> {
        let pos = self.cur.pos;
        let top = self.top().kind;
        let want = match c {
            b')' => [FrameKind::Group, FrameKind::Lookahead],
            b']' => [FrameKind::Optional, FrameKind::Optional],
            _ => [FrameKind::Repeat, FrameKind::Repeat],
        };
        if !want.contains(&top) {
            if top == FrameKind::Body {
                return Err(self.cur.error_at(
                    ErrorKind::EbnfSyntax,
                    pos,
                    format!("expected an element, found '{}' with no open group to close", c as char),
                ));
            }
            return Err(self.unclosed(self.top()));
        }
        let f = self.pop();
        let kind = f.kind;
        let e = if kind == FrameKind::Group && self.items.len() == f.start && self.dialect == Dialect::XGrammar {
            self.reduce(f.start, Compose::Seq)? // `()` is the empty sequence
        } else {
            self.close(f)?
        };
        self.cur.pos += 1;
        match kind {
            FrameKind::Lookahead => {
                self.skip_ws()?;
                if !(self.cur.at_end() || self.is_rule_start(self.cur.pos)) {
                    return Err(self.cur.expected(
                        "the end of the rule after its lookahead assertion (a new rule 'name ::= ...' or end of input)",
                    ));
                }
                return Ok(Some((body.take().expect("lookahead follows a body"), Some(e))));
            }
            FrameKind::Optional => {
                let r = self.repeat(e, 0, Some(1))?;
                self.items.push(r);
            }
            FrameKind::Repeat => {
                let r = self.repeat(e, 0, None)?;
                self.items.push(r);
            }
            _ => self.push_atom(e)?,
        }
        Ok(None)
    }

    /// Handles `(`, `(=` or ISO `[` / `{` at the cursor: opens a frame (the lookahead frame
    /// replaces the finished body frame).
    fn open_bracket(&mut self, c: u8, body: &mut Option<ExprId>) -> Result<()> {
        let pos = self.cur.pos;
        let top = self.top().kind;
        if self.dialect == Dialect::XGrammar && self.cur.peek_at(1) == Some(b'=') {
            if top != FrameKind::Body {
                return Err(self.cur.error_at(
                    ErrorKind::EbnfSyntax,
                    pos,
                    "a lookahead assertion '(= ...)' may only appear once, at the end of a rule body".to_owned(),
                ));
            }
            let f = self.pop();
            if self.items.len() == f.start {
                return Err(self.cur.expected("an element (the rule body) before the lookahead assertion"));
            }
            *body = Some(self.close(f)?);
            self.frames.push(Frame::new(FrameKind::Lookahead, pos, self.items.len()));
            self.cur.pos += 2;
            return Ok(());
        }
        if self.frames.len() > limits::MAX_NESTING {
            return Err(self.cur.error_at(
                ErrorKind::LimitExceeded,
                pos,
                format!("nesting of groups exceeds the limit of {}", limits::MAX_NESTING),
            ));
        }
        let kind = match c {
            b'(' => FrameKind::Group,
            b'[' => FrameKind::Optional,
            _ => FrameKind::Repeat,
        };
        self.frames.push(Frame::new(kind, pos, self.items.len()));
        self.cur.pos += 1;
        Ok(())
    }

    fn top(&self) -> Frame {
        *self.frames.last().expect("a rule body is being parsed")
    }

    fn top_mut(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("a rule body is being parsed")
    }

    fn pop(&mut self) -> Frame {
        self.frames.pop().expect("a rule body is being parsed")
    }

    fn depth_of(&self, id: ExprId) -> u32 {
        self.depth.get(id.index()).copied().unwrap_or(0)
    }

    /// The depth a new composite expression over `children` would have; more than
    /// [`limits::MAX_NESTING`] (the grammar invariant) fails at the cursor.
    fn depth_over(&self, children: &[ExprId]) -> Result<u32> {
        let d = children.iter().map(|&c| self.depth_of(c) + 1).max().unwrap_or(0);
        if d as usize > limits::MAX_NESTING {
            return Err(self.cur.error_at(
                ErrorKind::LimitExceeded,
                self.cur.pos,
                format!("expression nesting depth exceeds the limit of {}", limits::MAX_NESTING),
            ));
        }
        Ok(d)
    }

    fn record_depth(&mut self, id: ExprId, d: u32) -> ExprId {
        if self.depth.len() <= id.index() {
            self.depth.resize(id.index() + 1, 0);
        }
        self.depth[id.index()] = d;
        id
    }

    /// Replaces `items[from..]` by their sequence or choice (one item stands for itself, as in
    /// [`GrammarBuilder::seq`] and [`GrammarBuilder::choice`]) and returns it; the caller places it.
    fn reduce(&mut self, from: usize, how: Compose) -> Result<ExprId> {
        let items = &self.items[from..];
        let id = if items.len() == 1 {
            items[0]
        } else {
            let d = self.depth_over(items)?;
            let boxed: Box<[ExprId]> = items.into();
            let id = self.b.add(if how == Compose::Seq { Expr::Seq(boxed) } else { Expr::Choice(boxed) });
            self.record_depth(id, d)
        };
        self.items.truncate(from);
        Ok(id)
    }

    fn repeat(&mut self, e: ExprId, min: u32, max: Option<u32>) -> Result<ExprId> {
        let d = self.depth_over(&[e])?;
        let id = self.b.repeat(e, min, max)?;
        Ok(self.record_depth(id, d))
    }

    /// "expected ')' to close the group opened at ..., found ...".
    fn unclosed(&self, f: Frame) -> Error {
        let (l, c) = self.cur.line_col(f.open);
        let what = match f.kind {
            FrameKind::Lookahead => "lookahead assertion",
            _ => "group",
        };
        let found = if self.dialect == Dialect::XGrammar && self.is_rule_start(self.cur.pos) {
            format!("the start of a new rule {}", self.cur.describe_here())
        } else {
            self.cur.describe_here()
        };
        self.cur.error_at(
            ErrorKind::EbnfSyntax,
            self.cur.pos,
            format!("expected {} to close the {what} opened at line {l}, column {c}, found {found}", f.kind.closer()),
        )
    }

    /// Turns a finished (popped) frame into one expression, taking its items off the buffer.
    /// Every alternative must have an element.
    fn close(&mut self, f: Frame) -> Result<ExprId> {
        if self.items.len() == f.seq_start {
            if f.seq_start == f.start {
                return Err(self.cur.expected("an element"));
            }
            let e = self.b.empty(); // an empty last alternative (`a ::= "x" |`), as in GBNF
            self.items.push(e);
        }
        let s = self.reduce(f.seq_start, Compose::Seq)?;
        self.items.push(s);
        self.reduce(f.start, Compose::Choice)
    }

    /// Appends an element to the open sequence, applying any XGrammar postfix quantifier.
    fn push_atom(&mut self, e: ExprId) -> Result<()> {
        let mut e = e;
        if self.dialect == Dialect::XGrammar {
            self.skip_ws()?;
            let qpos = self.cur.pos;
            let q = match self.cur.peek() {
                Some(b'*') => Some((0, None)),
                Some(b'+') => Some((1, None)),
                Some(b'?') => Some((0, Some(1))),
                Some(b'{') => Some(self.bounds()?),
                _ => None,
            };
            if let Some((min, max)) = q {
                if self.cur.pos == qpos {
                    self.cur.pos += 1;
                }
                e = self.repeat(e, min, max).map_err(|err| {
                    if err.location().is_some() {
                        err
                    } else {
                        self.locate(err, qpos)
                    }
                })?;
                self.skip_ws()?;
                if matches!(self.cur.peek(), Some(b'*' | b'+' | b'?' | b'{')) {
                    let (l, c) = self.cur.line_col(qpos);
                    return Err(self.cur.error_at(
                        ErrorKind::EbnfSyntax,
                        self.cur.pos,
                        format!(
                            "expected an element, found {}: quantifiers cannot be stacked (the element already has the quantifier at line {l}, column {c}; use parentheses)",
                            self.cur.describe_here()
                        ),
                    ));
                }
            }
        }
        self.items.push(e);
        Ok(())
    }

    /// Parses `{m}`, `{m,}`, `{m,n}` or `{m, -1}` (unbounded); the cursor is on `{`.
    fn bounds(&mut self) -> Result<(u32, Option<u32>)> {
        self.cur.pos += 1;
        self.skip_ws()?;
        let min = self.number()?;
        self.skip_ws()?;
        let max = match self.cur.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.cur.pos += 1;
                self.skip_ws()?;
                match self.cur.peek() {
                    Some(b'}') => None,
                    Some(b'-')
                        if self.cur.peek_at(1) == Some(b'1')
                            && !self.cur.peek_at(2).is_some_and(|b| b.is_ascii_digit()) =>
                    {
                        self.cur.pos += 2;
                        None
                    }
                    _ => Some(self.number()?),
                }
            }
            _ => return Err(self.cur.expected("',' or '}' in the repetition bounds")),
        };
        self.skip_ws()?;
        if self.cur.peek() != Some(b'}') {
            return Err(self.cur.expected("'}' to close the repetition bounds"));
        }
        self.cur.pos += 1;
        Ok((min, max))
    }

    /// A decimal repetition bound; values above [`limits::MAX_REPEAT_BOUND`] are a limit error.
    fn number(&mut self) -> Result<u32> {
        let start = self.cur.pos;
        let digits = self.cur.bytes[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(self.cur.expected("a non-negative integer (write {0,n}, not {,n})"));
        }
        self.cur.pos += digits;
        let text = &self.cur.text[start..start + digits];
        match text.parse::<u32>() {
            Ok(v) if v <= limits::MAX_REPEAT_BOUND => Ok(v),
            _ => Err(self.cur.error_at(
                ErrorKind::LimitExceeded,
                start,
                format!("repetition bound {text} exceeds the limit of {}", limits::MAX_REPEAT_BOUND),
            )),
        }
    }

    /// Parses `[...]` (the cursor is on `[`) into a character class.
    fn char_class(&mut self) -> Result<ExprId> {
        let open = self.cur.pos;
        self.cur.pos += 1;
        let negated = self.cur.peek() == Some(b'^');
        if negated {
            self.cur.pos += 1;
        }
        let mut ranges = std::mem::take(&mut self.ranges);
        ranges.clear();
        loop {
            if self.cur.peek() == Some(b']') {
                self.cur.pos += 1;
                break;
            }
            let lo_pos = self.cur.pos;
            let lo = self.class_char(open)?;
            if self.cur.peek() == Some(b'-') && !matches!(self.cur.peek_at(1), Some(b']') | None) {
                self.cur.pos += 1;
                let hi = self.class_char(open)?;
                if lo > hi {
                    return Err(self.cur.error_at(
                        ErrorKind::EbnfSyntax,
                        lo_pos,
                        format!(
                            "invalid range '{}' in a character class: its lower bound U+{:04X} is above its upper bound U+{:04X}",
                            &self.cur.text[lo_pos..self.cur.pos],
                            lo as u32,
                            hi as u32
                        ),
                    ));
                }
                ranges.push((lo as u32, hi as u32));
            } else {
                ranges.push((lo as u32, lo as u32));
            }
        }
        let e = self.b.char_class(&ranges, negated);
        self.ranges = ranges;
        Ok(e)
    }

    fn class_char(&mut self, open: usize) -> Result<char> {
        match self.cur.peek() {
            None | Some(b'\n' | b'\r') => {
                let (l, c) = self.cur.line_col(open);
                Err(self.cur.expected(&format!("']' to close the character class opened at line {l}, column {c}")))
            }
            Some(b'\\') => self.cur.escape(EscapeContext::Class),
            Some(b) if b.is_ascii() => {
                self.cur.pos += 1; // PERF: no UTF-8 decoding for ASCII
                Ok(char::from(b))
            }
            Some(_) => Ok(self.cur.bump_char().expect("not at end")),
        }
    }

    /// ISO: a string, or a range `"a" … "z"` when an ellipsis follows.
    fn iso_string_or_range(&mut self, s: &[u8], pos: usize) -> Result<ExprId> {
        let save = self.cur.pos;
        self.skip_ws()?;
        if !self.cur.starts_with("…") {
            self.cur.pos = save;
            return Ok(self.b.bytes(s));
        }
        let lo = single_char(s).ok_or_else(|| {
            self.cur.error_at(
                ErrorKind::EbnfSyntax,
                pos,
                "expected a single character before '…' in a range \"a\" … \"z\"",
            )
        })?;
        self.cur.pos += "…".len();
        self.skip_ws()?;
        let hi_pos = self.cur.pos;
        let hi = match self.cur.peek() {
            Some(b'"') => self.cur.string_literal()?,
            Some(b'`') => self.raw_string()?,
            _ => return Err(self.cur.expected("a one-character string after '…'")),
        };
        let hi = single_char(&hi).ok_or_else(|| {
            self.cur.error_at(
                ErrorKind::EbnfSyntax,
                hi_pos,
                "expected a single character after '…' in a range \"a\" … \"z\"",
            )
        })?;
        if lo > hi {
            return Err(self.cur.error_at(
                ErrorKind::EbnfSyntax,
                pos,
                format!(
                    "invalid range: its lower bound U+{:04X} is above its upper bound U+{:04X}",
                    lo as u32, hi as u32
                ),
            ));
        }
        Ok(self.b.char_class(&[(lo as u32, hi as u32)], false))
    }

    /// ISO: a Go raw string `` `...` `` (no escapes, line breaks allowed).
    fn raw_string(&mut self) -> Result<Vec<u8>> {
        let open = self.cur.pos;
        self.cur.pos += 1;
        let Some(i) = self.cur.text[self.cur.pos..].find('`') else {
            let (l, c) = self.cur.line_col(open);
            self.cur.pos = self.cur.bytes.len();
            return Err(self.cur.expected(&format!("'`' to close the raw string opened at line {l}, column {c}")));
        };
        let s = self.cur.bytes[self.cur.pos..self.cur.pos + i].to_vec();
        self.cur.pos += i + 1;
        Ok(s)
    }

    /// Checks references and the root, then builds the grammar with rules in definition order.
    /// The grammar, and each builder rule id's id in it (rules numbered in definition order).
    fn finish(self, root: &str) -> Result<(Grammar, Vec<RuleId>)> {
        // The undefined rule referenced first (first positions are distinct).
        let undefined = self
            .ids
            .iter()
            .map(|(&name, &id)| (name, get(&self.first_ref, id), get(&self.def_pos, id)))
            .filter(|&(_, first, def)| first != NONE && def == NONE)
            .min_by_key(|&(_, first, _)| first);
        if let Some((name, pos, _)) = undefined {
            return Err(self.cur.error_at(
                ErrorKind::InvalidGrammar,
                pos,
                format!("rule '{name}' is referenced but not defined"),
            ));
        }
        let root_pos = self.ids.get(root).map_or(NONE, |&id| get(&self.def_pos, id));
        if root_pos == NONE {
            let names: Vec<&str> = self.defs.iter().take(10).map(|&(n, _)| n).collect();
            let have = if names.is_empty() {
                "the grammar defines no rules".to_owned()
            } else {
                format!("defined rules: {}", names.join(", "))
            };
            return Err(self.cur.error_at(
                ErrorKind::InvalidGrammar,
                self.cur.bytes.len(),
                format!("the root rule '{root}' is not defined ({have})"),
            ));
        }
        let mut b = self.b;
        for (placeholder, g) in &self.regexes {
            let r = b.import(g);
            let body = b.rule_ref(r);
            b.define(placeholder, body, None)?;
        }
        let mut g = b.build(root)?;
        // Number the rules in definition order, then the rules not written in the text (from
        // macros) in their existing order.
        let mut new_ids = vec![NONE; g.rules().len()];
        for (k, &(_, id)) in self.defs.iter().enumerate() {
            new_ids[id.index()] = k;
        }
        let mut next = self.defs.len();
        let new_ids: Vec<RuleId> = new_ids
            .into_iter()
            .map(|k| {
                let k = if k == NONE {
                    next += 1;
                    next - 1
                } else {
                    k
                };
                RuleId(u32::try_from(k).expect("rule ids fit in u32"))
            })
            .collect();
        g.renumber_rules(&new_ids);
        g.shrink_to_fit();
        Ok((g, new_ids))
    }

    /// Parses `JsonStringIn("a", "b", ...)` or `JsonStringExcept(...)` (the cursor is on `name`):
    /// the text between the quotes of a JSON string whose decoded value is one (none) of the
    /// arguments, zero or more string literals; see [`crate::grammar::Expr::JsonStringIn`].
    fn json_string_macro(&mut self, name: &str) -> Result<ExprId> {
        self.cur.pos += name.len() + 1;
        let mut keys = Vec::new();
        self.macro_args(name, |p| {
            if p.cur.peek() != Some(b'"') {
                let what = if keys.is_empty() { "a string literal or ')'" } else { "a string literal" };
                return Err(p.cur.expected(&format!("{what} in {name}(...)")));
            }
            keys.push(String::from_utf8(p.cur.string_literal()?).expect("string literals are UTF-8"));
            Ok(())
        })?;
        Ok(self.b.json_string(&keys, name == "JsonStringExcept"))
    }

    /// Reads a macro's comma-separated arguments up to and including its `)` (the cursor is
    /// just after the `(`): `arg` reads one argument, called with the cursor on it.
    fn macro_args(&mut self, name: &str, mut arg: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.skip_ws()?;
        if self.cur.peek() == Some(b')') {
            self.cur.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws()?;
            arg(self)?;
            if self.macro_list_end(name)? {
                return Ok(());
            }
        }
    }

    /// After a macro argument: true at the closing `)` (consumed), false at a `,` (consumed).
    fn macro_list_end(&mut self, name: &str) -> Result<bool> {
        self.skip_ws()?;
        match self.cur.peek() {
            Some(b')') => {
                self.cur.pos += 1;
                Ok(true)
            }
            Some(b',') => {
                self.cur.pos += 1;
                Ok(false)
            }
            _ => Err(self.cur.expected(&format!("',' or ')' in {name}(...)"))),
        }
    }

    /// Parses `Substring("chunk", ...)` (the cursor is on `Substring`): any run of whole
    /// consecutive chunks, the empty one included (rules `Substring#N...`, never written names).
    fn substring_macro(&mut self) -> Result<ExprId> {
        self.cur.pos += "Substring(".len();
        let mut chunks = Vec::new();
        self.macro_args("Substring", |p| {
            if p.cur.peek() != Some(b'"') {
                return Err(p.cur.expected("a string literal in Substring(...)"));
            }
            chunks.push(String::from_utf8(p.cur.string_literal()?).expect("string literals are UTF-8"));
            Ok(())
        })?;
        self.substrings += 1;
        let base = format!("Substring#{}", self.substrings);
        crate::lark::substring_expr(&mut self.b, &chunks, &base)
    }

    /// Parses `Regex("pattern", flags="...", json_string=false)` (the cursor is on `Regex`) and
    /// returns a reference to a placeholder rule for the pattern's full-match language, built by
    /// [`crate::regex`]. As in XGrammar, `.` matches every character; the flags `s` and `u`
    /// change nothing; `i` is not supported yet; `json_string=true` keeps only the strings
    /// without `"`, `\` and U+0000..U+001F.
    fn regex_macro(&mut self) -> Result<ExprId> {
        let start = self.cur.pos;
        self.cur.pos += "Regex(".len();
        self.skip_ws()?;
        if self.cur.peek() != Some(b'"') {
            return Err(self.cur.expected("the pattern as a string literal, as in Regex(\"[a-z]+\")"));
        }
        let pattern = String::from_utf8(self.cur.string_literal()?).expect("string literals are UTF-8");
        let mut json_string = false;
        // `None` without a flags argument (`.` matches everything, as in `from_regex`); with one,
        // (ignore_case, dot_all) as XGrammar reads Lark flags.
        let mut flags: Option<(bool, bool)> = None;
        loop {
            if self.macro_list_end("Regex")? {
                break;
            }
            self.skip_ws()?;
            let arg_pos = self.cur.pos;
            let n = self.cur.name_len_at(arg_pos, false);
            if n == 0 {
                return Err(self.cur.expected("a named argument (flags=\"...\" or json_string=...) of Regex(...)"));
            }
            let arg = self.cur.text[arg_pos..arg_pos + n].to_owned();
            self.cur.pos += n;
            self.skip_ws()?;
            if self.cur.peek() != Some(b'=') {
                return Err(self.cur.expected(&format!("'=' after the argument name '{arg}'")));
            }
            self.cur.pos += 1;
            self.skip_ws()?;
            match arg.as_str() {
                "flags" => {
                    if self.cur.peek() != Some(b'"') {
                        return Err(self.cur.expected("a string literal of flags, as in flags=\"s\""));
                    }
                    let flags_pos = self.cur.pos;
                    let (mut ignore_case, mut dot_all) = (false, false);
                    for f in String::from_utf8(self.cur.string_literal()?).expect("UTF-8").chars() {
                        match f {
                            'u' | ' ' => {} // `u` is a no-op
                            's' => dot_all = true,
                            'i' => ignore_case = true,
                            f => {
                                return Err(self.cur.error_at(
                                    ErrorKind::EbnfSyntax,
                                    flags_pos,
                                    format!("unknown Regex flag '{f}' (expected 'i', 's' or 'u')"),
                                ))
                            }
                        }
                    }
                    flags = Some((ignore_case, dot_all));
                }
                "json_string" => {
                    if self.cur.starts_with("true") {
                        json_string = true;
                        self.cur.pos += "true".len();
                    } else if self.cur.starts_with("false") {
                        json_string = false;
                        self.cur.pos += "false".len();
                    } else {
                        return Err(self.cur.expected("true or false"));
                    }
                }
                _ => {
                    return Err(self.cur.error_at(
                        ErrorKind::EbnfSyntax,
                        arg_pos,
                        format!("unknown argument '{arg}' of Regex(...) (expected flags or json_string)"),
                    ))
                }
            }
        }
        let (l, c) = self.cur.line_col(start);
        let g = regex_grammar(&pattern, json_string, flags)
            .map_err(|e| Error::new(e.kind(), format!("in the pattern of Regex(...): {e}")).at_text(l, c))?;
        // '#' cannot appear in a written rule name, so the placeholder never clashes; the printer
        // spells it as a valid fresh name.
        let placeholder = format!("Regex#{}", self.regexes.len() + 1);
        let id = self.b.rule_id(&placeholder);
        self.regexes.push((placeholder, g));
        Ok(self.b.rule_ref(id))
    }
}

/// The full-match grammar of a `Regex(...)` pattern, with root rule `regex`. `flags` (when the
/// macro has a flags argument) is (ignore case, dot-all); without dot-all `.` excludes `\n`.
fn regex_grammar(pattern: &str, json_string: bool, flags: Option<(bool, bool)>) -> Result<Grammar> {
    use crate::regex::{Anchoring, CharDfa, CharSet, Regex, RegexFlags, TextMode};
    let (ignore_case, dot_all) = flags.unwrap_or((false, true));
    let rewritten;
    let pattern = if dot_all {
        pattern
    } else {
        rewritten = crate::lark::dot_without_newline(pattern);
        rewritten.as_str()
    };
    let re_flags = RegexFlags { ignore_case, dot_all: true };
    let text = if json_string {
        let re = Regex::parse(pattern, re_flags)?;
        let dfa = CharDfa::from_regex(&re, Anchoring::FullMatch)?;
        // Characters a JSON string may hold unescaped.
        let unescaped = CharSet::from_ranges([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10_FFFF)]);
        dfa.intersect(&CharDfa::star_of(&unescaped))?.to_ebnf("regex", TextMode::Raw)
    } else {
        crate::regex::regex_to_ebnf_with(pattern, "regex", re_flags)?
    };
    crate::ebnf::parse_ebnf(&text, "regex")
}

/// `v[id]`, or [`NONE`] beyond the end of `v`.
fn get(v: &[usize], id: RuleId) -> usize {
    v.get(id.index()).copied().unwrap_or(NONE)
}

/// `v[id]`, growing `v` with [`NONE`] as needed (tables indexed by rule id).
fn at(v: &mut Vec<usize>, id: RuleId) -> &mut usize {
    if v.len() <= id.index() {
        v.resize(id.index() + 1, NONE);
    }
    &mut v[id.index()]
}

fn single_char(s: &[u8]) -> Option<char> {
    let s = std::str::from_utf8(s).ok()?;
    let mut it = s.chars();
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

#[cfg(test)]
mod tests {
    use crate::ebnf::parse_ebnf;
    use crate::error::Location;

    #[test]
    fn rules_in_definition_order_then_macro_rules() {
        let g = parse_ebnf("root ::= b Regex(\"x+\") a\na ::= \"a\"\nb ::= Regex(\"y\") a", "root").unwrap();
        let names: Vec<&str> = g.rules().iter().map(|r| r.name.as_str()).collect();
        assert_eq!(&names[..5], ["root", "a", "b", "Regex#1", "Regex#2"]);
        assert_eq!(g.root().index(), 0);
    }

    #[test]
    fn first_undefined_reference_is_reported() {
        let err = parse_ebnf("root ::= b z y\nb ::= y x", "root").unwrap_err();
        assert!(err.message().contains("rule 'z' is referenced but not defined"), "{err}");
        assert_eq!(err.location(), Some(&Location::Text { line: 1, column: 12 }));
    }
}
