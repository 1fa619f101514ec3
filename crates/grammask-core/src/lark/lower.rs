//! [`LarkAst`] -> [`Grammar`]: terminals become regular rules, rules become CFG rules.
//!
//! Lexemes are what a rule uses directly: string literals, `/regex/`, terminal names, `%regex`,
//! `%json` and `%lark` blocks. With `%ignore`, each lexeme in a rule is followed by `skip`
//! (`ignored*`), so ignored text may appear between any two lexemes and after the last one; before
//! the first only with `%grammar_options {"allow_initial_skip": true}`. Terminals never contain
//! `skip`. Terminal references are resolved depth-first with an explicit in-progress mark
//! (recursion among terminals is an error) and a chain-length bound.

use super::common::COMMON;
use super::rule_options::Stop;
use super::syntax::{err_at, Alts, Atom, Def, Item, LarkAst, Parser};
use super::MAX_LARK_DEPTH;
use crate::error::{Error, ErrorKind, Result};
use crate::fasthash::FastState;
use crate::grammar::{ExprId, Grammar, GrammarBuilder, RuleId};
use std::collections::HashMap;

/// Most chunks of one substring (`%regex {"substring_...": ...}`, `Substring(...)`): one rule each.
pub const MAX_SUBSTRING_CHUNKS: usize = 100_000;

/// Longest chain of terminals referring to terminals (recursion bound of the resolver).
const MAX_TERMINAL_CHAIN: usize = 200;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Terminal,
    Rule,
}

/// Where a definition comes from: the user's text or the built-in common library.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Src {
    User,
    Common,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TermState {
    InProgress,
    Done(RuleId),
}

struct Lowerer<'a> {
    text: &'a str,
    depth: usize,
    b: GrammarBuilder,
    user: HashMap<String, usize, FastState>,
    defs: Vec<Def>,
    common_defs: Vec<Def>,
    common: HashMap<String, usize, FastState>,
    /// Local name -> common name, from `%import`.
    imports: HashMap<String, String, FastState>,
    terms: HashMap<(Src, String), TermState, FastState>,
    chain: usize,
    rule_ids: HashMap<String, RuleId, FastState>,
    skip: Option<ExprId>,
    /// Per user definition: its rule options and `stop`/`suffix` lexeme.
    rule_opts: Vec<(crate::rule_options::RuleOptions, Option<Stop>)>,
}

fn is_terminal(name: &str) -> bool {
    name.trim_start_matches('_').chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

/// Lowers Lark `text` (nested `%lark` blocks at `depth`).
pub(crate) fn lower(text: &str, depth: usize) -> Result<Grammar> {
    let ast = Parser::new(text)?.parse()?;
    let common_ast = Parser::new(COMMON)?.parse()?;
    let lw = Lowerer {
        text,
        depth,
        b: GrammarBuilder::new(),
        user: HashMap::with_hasher(FastState),
        defs: Vec::new(),
        common_defs: Vec::new(),
        common: HashMap::with_hasher(FastState),
        imports: HashMap::with_hasher(FastState),
        terms: HashMap::with_hasher(FastState),
        chain: 0,
        rule_ids: HashMap::with_hasher(FastState),
        skip: None,
        rule_opts: Vec::new(),
    };
    lw.run(ast, common_ast)
}

impl Lowerer<'_> {
    fn err(&self, kind: ErrorKind, pos: usize, msg: impl Into<String>) -> Error {
        err_at(self.text, kind, pos, msg)
    }

    fn run(mut self, ast: LarkAst, common_ast: LarkAst) -> Result<Grammar> {
        for (k, d) in common_ast.defs.into_iter().enumerate() {
            self.common.insert(d.name.clone(), k);
            self.common_defs.push(d);
        }
        for (local, name, pos) in &ast.imports {
            if !self.common.contains_key(name) {
                return Err(self.err(
                    ErrorKind::InvalidGrammar,
                    *pos,
                    format!("'common.{name}' is not a known terminal of common"),
                ));
            }
            if !is_terminal(local) {
                return Err(self.err(
                    ErrorKind::InvalidGrammar,
                    *pos,
                    format!("the imported terminal '{local}' needs an uppercase name"),
                ));
            }
            self.imports.insert(local.clone(), name.clone());
        }
        let mut allow_initial_skip = false;
        for (block, pos) in &ast.options {
            allow_initial_skip |= self.grammar_options(block, *pos)?;
        }
        for (k, d) in ast.defs.into_iter().enumerate() {
            if let Some(&first) = self.user.get(&d.name) {
                let (l, c) = super::syntax::line_col(self.text, self.defs[first].pos);
                return Err(self.err(
                    ErrorKind::InvalidGrammar,
                    d.pos,
                    format!("'{}' is defined more than once (first at line {l}, column {c})", d.name),
                ));
            }
            if self.imports.contains_key(&d.name) {
                return Err(self.err(
                    ErrorKind::InvalidGrammar,
                    d.pos,
                    format!("'{}' is both imported and defined", d.name),
                ));
            }
            let opts = super::rule_options::lark_rule_options(self.text, &d.name, is_terminal(&d.name), &d.options)?;
            self.rule_opts.push(opts);
            self.user.insert(d.name.clone(), k);
            self.defs.push(d);
        }
        let Some(&start) = self.user.get("start") else {
            return Err(self.err(ErrorKind::InvalidGrammar, self.text.len(), "the grammar has no 'start' rule"));
        };
        if is_terminal(&self.defs[start].name) {
            unreachable!("'start' is lowercase");
        }
        // Declare every rule first (forward references), in definition order.
        for d in &self.defs {
            if !is_terminal(&d.name) {
                let id = self.b.rule_id(&d.name);
                self.rule_ids.insert(d.name.clone(), id);
            }
        }
        if !ast.ignores.is_empty() {
            let mut alts = Vec::new();
            for (ig, _) in &ast.ignores {
                alts.push(self.alts(ig, Ctx::Terminal, Src::User)?);
            }
            let ig = self.b.choice(alts);
            let name = self.b.fresh_name("ignored");
            self.b.define(&name, ig, None)?;
            let id = self.b.rule_id(&name);
            let r = self.b.rule_ref(id);
            let star = self.b.repeat(r, 0, None)?;
            let name = self.b.fresh_name("skip");
            self.b.define(&name, star, None)?;
            let id = self.b.rule_id(&name);
            self.skip = Some(self.b.rule_ref(id));
        }
        for k in 0..self.defs.len() {
            if is_terminal(&self.defs[k].name) {
                continue;
            }
            let (name, pos, alts) = (self.defs[k].name.clone(), self.defs[k].pos, self.defs[k].body.clone());
            let mut body = self.alts(&alts, Ctx::Rule, Src::User)?;
            let (opts, stop) = std::mem::take(&mut self.rule_opts[k]);
            match stop {
                Some(Stop::Bytes(stop)) => {
                    let s = self.b.bytes(&stop);
                    body = self.b.seq(vec![body, s]);
                }
                // `name: name_body name_stop`, the shape `capture_hidden_stop_rule` names.
                Some(Stop::Lexeme(atom, at)) => {
                    let (s, _) = self.atom(&atom, at, Ctx::Terminal, Src::User)?;
                    let parts = [("body", body), ("stop", s)].map(|(what, e)| {
                        let n = self.b.fresh_name(&format!("{name}_{what}"));
                        self.b.define(&n, e, None).map(|id| self.b.rule_ref(id))
                    });
                    let [b, s] = parts;
                    body = self.b.seq(vec![b?, s?]);
                }
                None => {}
            }
            let id = self.b.define(&name, body, None).map_err(|e| self.err(e.kind(), pos, e.message().to_owned()))?;
            self.b.set_rule_options(id, opts);
        }
        // Terminals defined but not used still have to be valid.
        for k in 0..self.defs.len() {
            if is_terminal(&self.defs[k].name) {
                let (name, pos) = (self.defs[k].name.clone(), self.defs[k].pos);
                self.terminal(&name, Src::User, pos)?;
            }
        }
        let mut root = "start".to_owned();
        if allow_initial_skip {
            if let Some(skip) = self.skip {
                let s = self.rule_ids["start"];
                let s = self.b.rule_ref(s);
                let body = self.b.seq(vec![skip, s]);
                root = self.b.fresh_name("root");
                self.b.define(&root, body, None)?;
            }
        }
        self.b.build(&root)
    }

    /// Applies a `%grammar_options` block; returns `allow_initial_skip`.
    fn grammar_options(&self, block: &str, pos: usize) -> Result<bool> {
        let v: serde_json::Value = serde_json::from_str(block)
            .map_err(|e| self.err(ErrorKind::InvalidJson, pos, format!("grammar options are not valid JSON: {e}")))?;
        let Some(obj) = v.as_object() else {
            return Err(self.err(ErrorKind::InvalidGrammar, pos, "grammar options must be a JSON object"));
        };
        let mut initial = false;
        for (k, v) in obj {
            match (k.as_str(), v.as_bool()) {
                ("allow_initial_skip", Some(b)) => initial = b,
                // Forcing only changes how masks are used, never the language.
                ("no_forcing", Some(_)) | ("allow_invalid_utf8", Some(false)) => {}
                ("allow_invalid_utf8", Some(true)) => {
                    return Err(self.err(
                        ErrorKind::Unsupported,
                        pos,
                        "the grammar option 'allow_invalid_utf8' is not supported",
                    ))
                }
                (_, None) => {
                    return Err(self.err(
                        ErrorKind::InvalidGrammar,
                        pos,
                        format!("the grammar option '{k}' must be true or false"),
                    ))
                }
                _ => return Err(self.err(ErrorKind::Unsupported, pos, format!("unknown grammar option '{k}'"))),
            }
        }
        Ok(initial)
    }

    fn alts(&mut self, alts: &Alts, ctx: Ctx, src: Src) -> Result<ExprId> {
        let mut choices = Vec::with_capacity(alts.len());
        for seq in alts {
            let mut items = Vec::with_capacity(seq.len());
            for item in seq {
                items.push(self.item(item, ctx, src)?);
            }
            choices.push(if items.is_empty() { self.b.empty() } else { self.b.seq(items) });
        }
        Ok(self.b.choice(choices))
    }

    fn item(&mut self, item: &Item, ctx: Ctx, src: Src) -> Result<ExprId> {
        let (mut e, lexeme) = self.atom(&item.atom, item.pos, ctx, src)?;
        if lexeme && ctx == Ctx::Rule {
            if let Some(skip) = self.skip {
                e = self.b.seq(vec![e, skip]);
            }
        }
        if (item.min, item.max) != (1, Some(1)) {
            e = self
                .b
                .repeat(e, item.min, item.max)
                .map_err(|er| self.err(er.kind(), item.pos, er.message().to_owned()))?;
        }
        Ok(e)
    }

    /// The expression of an atom, and whether it is a lexeme.
    fn atom(&mut self, atom: &Atom, pos: usize, ctx: Ctx, src: Src) -> Result<(ExprId, bool)> {
        let in_rule_only = |this: &Self, what: &str| -> Result<()> {
            if ctx == Ctx::Terminal {
                return Err(this.err(
                    ErrorKind::InvalidGrammar,
                    pos,
                    format!("{what} may not appear inside a terminal"),
                ));
            }
            Ok(())
        };
        Ok(match atom {
            Atom::Str(s, ci) => (self.string(s, *ci), true),
            Atom::Range(a, z) => (self.b.char_class(&[(*a as u32, *z as u32)], false), true),
            Atom::Regex(p, f) => (self.regex(p, f, pos)?, true),
            Atom::Group(alts) => (self.alts(alts, ctx, src)?, false),
            Atom::Name(n) if is_terminal(n) => {
                let id = self.terminal(n, src, pos)?;
                (self.b.rule_ref(id), true)
            }
            Atom::Name(n) => {
                if ctx == Ctx::Terminal {
                    return Err(self.err(
                        ErrorKind::InvalidGrammar,
                        pos,
                        format!("a terminal may not refer to the rule '{n}' (terminals are regular)"),
                    ));
                }
                let Some(&id) = self.rule_ids.get(n.as_str()) else {
                    return Err(self.err(ErrorKind::InvalidGrammar, pos, format!("the rule '{n}' is not defined")));
                };
                (self.b.rule_ref(id), false)
            }
            Atom::Json(block) => {
                in_rule_only(self, "'%json'")?;
                let g =
                    crate::json_schema::json_schema_to_ebnf(block, &crate::json_schema::JsonSchemaOptions::default())
                        .and_then(|t| crate::ebnf::parse_ebnf(&t, "root"))
                        .map_err(|e| self.err(e.kind(), pos, format!("in '%json': {e}")))?;
                let r = self.b.import(&g);
                (self.b.rule_ref(r), true)
            }
            Atom::RegexBlock(block) => (self.substring(block, pos)?, true),
            Atom::Lark(inner) => {
                in_rule_only(self, "'%lark'")?;
                if self.depth + 1 >= MAX_LARK_DEPTH {
                    return Err(self.err(
                        ErrorKind::LimitExceeded,
                        pos,
                        format!("'%lark' blocks nested deeper than {MAX_LARK_DEPTH}"),
                    ));
                }
                let g = lower(inner, self.depth + 1).map_err(|e| {
                    let loc = match e.location() {
                        Some(crate::error::Location::Text { line, column }) => {
                            format!(" (line {line}, column {column} of the block)")
                        }
                        _ => String::new(),
                    };
                    self.err(e.kind(), pos, format!("in '%lark {{...}}'{loc}: {}", e.message()))
                })?;
                let r = self.b.import(&g);
                (self.b.rule_ref(r), true)
            }
            Atom::Special(s) => {
                match in_rule_only(self, "a special token").map(|()| super::tokens::special_expr(&mut self.b, s))? {
                    Ok(e) => (e, true),
                    Err(msg) => return Err(self.err(ErrorKind::InvalidGrammar, pos, msg)),
                }
            }
            Atom::GrammarRef(s) => {
                return Err(self.err(
                    ErrorKind::Unsupported,
                    pos,
                    format!("the grammar reference '@{s}' (named grammars) is not supported"),
                ))
            }
        })
    }

    fn string(&mut self, s: &str, ci: bool) -> ExprId {
        if !ci {
            return self.b.bytes(s.as_bytes());
        }
        let mut items = Vec::new();
        for c in s.chars() {
            let (lo, up) = (c.to_lowercase().collect::<Vec<_>>(), c.to_uppercase().collect::<Vec<_>>());
            let mut set = vec![(c as u32, c as u32)];
            for v in [lo, up] {
                if let [x] = v[..] {
                    set.push((x as u32, x as u32));
                }
            }
            items.push(self.b.char_class(&set, false));
        }
        if items.is_empty() {
            self.b.empty()
        } else {
            self.b.seq(items)
        }
    }

    /// `/pattern/flags`: `.` excludes `\n` unless `s`; `i` folds case; `u` changes nothing.
    fn regex(&mut self, pattern: &str, flags: &str, pos: usize) -> Result<ExprId> {
        let mut f = crate::regex::RegexFlags { ignore_case: false, dot_all: true };
        let mut dot_all = false;
        for c in flags.chars() {
            match c {
                'i' => f.ignore_case = true,
                's' => dot_all = true,
                'u' => {}
                _ => {
                    return Err(self.err(
                        ErrorKind::Unsupported,
                        pos,
                        format!("the regex flag '{c}' is not supported (supported: i, s, u)"),
                    ))
                }
            }
        }
        let pat = if dot_all { pattern.to_owned() } else { dot_without_newline(pattern) };
        let g = crate::regex::regex_to_ebnf_with(&pat, "regex", f)
            .and_then(|t| crate::ebnf::parse_ebnf(&t, "regex"))
            .map_err(|e| self.err(e.kind(), pos, format!("in the regular expression /{pattern}/: {e}")))?;
        let r = self.b.import(&g);
        Ok(self.b.rule_ref(r))
    }

    /// `%regex { "substring_chunks": [...] | "substring_words": "..." | "substring_chars": "..." }`:
    /// `chunks[n..m].concat()` for any `n <= m`, the empty string included.
    fn substring(&mut self, block: &str, pos: usize) -> Result<ExprId> {
        let v: serde_json::Value = serde_json::from_str(block)
            .map_err(|e| self.err(ErrorKind::InvalidJson, pos, format!("'%regex' block is not valid JSON: {e}")))?;
        let obj = v.as_object().filter(|o| o.len() == 1);
        let bad = || {
            self.err(
            ErrorKind::InvalidGrammar,
            pos,
            "'%regex' needs exactly one of \"substring_chunks\" (a list of strings), \"substring_words\" or \"substring_chars\" (a string)",
        )
        };
        let Some((k, v)) = obj.and_then(|o| o.iter().next()) else { return Err(bad()) };
        let chunks: Vec<String> = match (k.as_str(), v) {
            ("substring_chunks", serde_json::Value::Array(xs)) => {
                let mut out = Vec::with_capacity(xs.len());
                for x in xs {
                    out.push(x.as_str().ok_or_else(bad)?.to_owned());
                }
                out
            }
            ("substring_chars", serde_json::Value::String(s)) => s.chars().map(String::from).collect(),
            ("substring_words", serde_json::Value::String(s)) => split_words(s),
            _ => return Err(bad()),
        };
        substring_expr(&mut self.b, &chunks, "substring")
    }

    /// The rule of terminal `name` as seen from a definition of `src`, lowering it on first use.
    fn terminal(&mut self, name: &str, src: Src, pos: usize) -> Result<RuleId> {
        let (tsrc, key) = match src {
            Src::User if self.user.contains_key(name) => (Src::User, name.to_owned()),
            Src::User => match self.imports.get(name) {
                Some(c) => (Src::Common, c.clone()),
                None => {
                    return Err(self.err(
                        ErrorKind::InvalidGrammar,
                        pos,
                        format!("the terminal '{name}' is not defined"),
                    ));
                }
            },
            Src::Common => (Src::Common, name.to_owned()),
        };
        match self.terms.get(&(tsrc, key.clone())) {
            Some(&TermState::Done(id)) => return Ok(id),
            Some(TermState::InProgress) => {
                return Err(self.err(
                    ErrorKind::InvalidGrammar,
                    pos,
                    format!("the terminal '{name}' refers to itself (terminals are regular, not recursive)"),
                ));
            }
            None => {}
        }
        if self.chain >= MAX_TERMINAL_CHAIN {
            return Err(self.err(
                ErrorKind::LimitExceeded,
                pos,
                format!("terminals refer to each other more than {MAX_TERMINAL_CHAIN} deep"),
            ));
        }
        self.terms.insert((tsrc, key.clone()), TermState::InProgress);
        self.chain += 1;
        let body = match tsrc {
            Src::User => {
                let d = self.defs[self.user[&key]].body.clone();
                self.alts(&d, Ctx::Terminal, Src::User)?
            }
            Src::Common => {
                let d = self.common_defs[self.common[&key]].body.clone();
                self.alts(&d, Ctx::Terminal, Src::Common)?
            }
        };
        self.chain -= 1;
        let rule_name =
            if tsrc == Src::User || !self.b.has_rule(name) { name.to_owned() } else { self.b.fresh_name(name) };
        let rule_name = if self.b.has_rule(&rule_name) { self.b.fresh_name(&rule_name) } else { rule_name };
        let id = self.b.define(&rule_name, body, None)?;
        self.terms.insert((tsrc, key), TermState::Done(id));
        Ok(id)
    }
}

/// Any run `chunks[n..m].concat()` (`n <= m`, the empty string included) of whole chunks: rules
/// `S_i ::= c_i S_{i+1}?` (named from `base`) and the expression `(S_0 | ... | S_last)?`; linear in
/// the chunks. Shared by Lark's `%regex {"substring_...": ...}` and EBNF's `Substring(...)`.
pub(crate) fn substring_expr(b: &mut GrammarBuilder, chunks: &[String], base: &str) -> Result<ExprId> {
    if chunks.len() > MAX_SUBSTRING_CHUNKS {
        return Err(Error::limit("substring chunks", MAX_SUBSTRING_CHUNKS));
    }
    if chunks.is_empty() {
        return Ok(b.empty());
    }
    let mut names = Vec::with_capacity(chunks.len());
    let mut ids = Vec::with_capacity(chunks.len());
    for _ in 0..chunks.len() {
        let n = b.fresh_name(base);
        ids.push(b.rule_id(&n));
        names.push(n);
    }
    for i in (0..chunks.len()).rev() {
        let c = b.bytes(chunks[i].as_bytes());
        let body = if i + 1 < chunks.len() {
            let next = b.rule_ref(ids[i + 1]);
            let opt = b.repeat(next, 0, Some(1))?;
            b.seq(vec![c, opt])
        } else {
            c
        };
        b.define(&names[i], body, None)?;
    }
    let refs: Vec<ExprId> = ids.iter().map(|&id| b.rule_ref(id)).collect();
    let any = b.choice(refs);
    b.repeat(any, 0, Some(1))
}

/// Rewrites every `.` outside a class into `[^\n]` (Lark's `.` without the `s` flag).
pub(crate) fn dot_without_newline(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A ']' right after '[' or '[^' is a literal.
                let rest = chars.as_str();
                let skip = if rest.starts_with("^]") { 2 } else { usize::from(rest.starts_with(']')) };
                for _ in 0..skip {
                    out.push(chars.next().unwrap_or(']'));
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '.' if !in_class => out.push_str("[^\\n]"),
            c => out.push(c),
        }
    }
    out
}

/// Words (runs of alphanumerics and `_`) and single other characters, in order.
fn split_words(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_word = false;
    for c in s.chars() {
        let w = c.is_alphanumeric() || c == '_';
        if w && in_word {
            out.last_mut().expect("in a word").push(c);
        } else {
            out.push(c.to_string());
        }
        in_word = w;
    }
    out
}
