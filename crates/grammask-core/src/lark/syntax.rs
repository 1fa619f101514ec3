//! Lark text -> [`LarkAst`]: the lexer and the recursive-descent parser of the Lark dialect.
//!
//! The lexer turns the text into [`Tok`]s (names, string literals, `/regex/flags`, numbers,
//! punctuation, `%directives`, special tokens `<...>` and the balanced `{...}` blocks of `%json`,
//! `%regex`, `%lark`, `%grammar_options`). The parser reads definitions (`name: ...`,
//! `NAME: ...`, with `?`/`!` prefixes, `.priority` and `[options]`), alternatives, sequences,
//! groups and quantifiers into a small AST. Group nesting is bounded by [`MAX_LARK_NESTING`], so
//! the recursion here and in the lowering pass is bounded; every error carries a line and column.

use crate::error::{Error, ErrorKind, Result};

/// Deepest nesting of `( )` / `[ ]` groups in one Lark definition (recursion bound).
pub const MAX_LARK_NESTING: usize = 200;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TokKind {
    Name(String),
    /// A string literal's bytes (UTF-8 text) and its `i` flag.
    Str(String, bool),
    /// `/pattern/flags`.
    Regex(String, String),
    Number(u32),
    /// `%name`
    Directive(String),
    /// The text of a balanced `{ ... }` block (braces included) after `%json`, `%regex`, `%lark`,
    /// `%grammar_options` or `%llguidance`.
    Block(String),
    /// `<...>`: a special token by name (`<|x|>`) or by ids (`<[1,2-5]>`).
    Special(String),
    /// `@name`
    GrammarRef(String),
    Punct(&'static str),
}

#[derive(Clone, Debug)]
pub(crate) struct Tok {
    pub kind: TokKind,
    pub pos: usize,
    /// True if the token is the first on its line.
    pub line_start: bool,
}

/// One element of a sequence, with its repetition bounds.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub atom: Atom,
    pub pos: usize,
    pub min: u32,
    pub max: Option<u32>,
}

pub(crate) type Seq = Vec<Item>;
pub(crate) type Alts = Vec<Seq>;

#[derive(Clone, Debug)]
pub(crate) enum Atom {
    Str(String, bool),
    Range(char, char),
    Regex(String, String),
    Name(String),
    Group(Alts),
    Json(String),
    RegexBlock(String),
    Lark(String),
    Special(String),
    GrammarRef(String),
}

#[derive(Clone, Debug)]
pub(crate) struct RuleOption {
    pub name: String,
    pub value: Option<String>,
    pub pos: usize,
    /// The value was a string literal (not a number, name or regex).
    pub value_is_str: bool,
    /// The value as a lexeme when it is a string literal, `/regex/flags` or a name (for `stop=`
    /// and `suffix=`).
    pub atom: Option<Atom>,
}

#[derive(Clone, Debug)]
pub(crate) struct Def {
    pub name: String,
    pub pos: usize,
    pub options: Vec<RuleOption>,
    pub body: Alts,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct LarkAst {
    pub defs: Vec<Def>,
    /// `%ignore` expansions with their positions.
    pub ignores: Vec<(Alts, usize)>,
    /// `%import common.X [-> Y]`: (local name, common name, position).
    pub imports: Vec<(String, String, usize)>,
    /// `%grammar_options` / `%llguidance` JSON blocks with their positions.
    pub options: Vec<(String, usize)>,
}

/// 1-based line and column (characters) of byte offset `pos` in `text`.
pub(crate) fn line_col(text: &str, pos: usize) -> (u32, u32) {
    let mut pos = pos.min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &text[..pos];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[start..].chars().count() + 1;
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(col).unwrap_or(u32::MAX))
}

/// A Lark error of `kind` at byte offset `pos`.
pub(crate) fn err_at(text: &str, kind: ErrorKind, pos: usize, msg: impl Into<String>) -> Error {
    let (l, c) = line_col(text, pos);
    Error::new(kind, format!("Lark: {}", msg.into())).at_text(l, c)
}

fn syntax(text: &str, pos: usize, msg: impl Into<String>) -> Error {
    err_at(text, ErrorKind::EbnfSyntax, pos, msg)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

const PUNCTS: &[&str] = &["->", "..", ":", "|", "(", ")", "[", "]", "?", "*", "+", "~", "{", "}", ",", "=", ".", "!"];

/// Splits Lark text into tokens.
pub(crate) fn lex(text: &str) -> Result<Vec<Tok>> {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let kind = if is_name_start(c) {
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            // A trailing '-' belongs to '->' (as in `common.X->Y`), not to the name.
            while b[i - 1] == b'-' {
                i -= 1;
            }
            TokKind::Name(text[start..i].to_owned())
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let n = text[start..i].parse::<u32>().map_err(|_| syntax(text, start, "number too large"))?;
            TokKind::Number(n)
        } else if c == b'"' {
            let (s, end) = string_literal(text, i)?;
            i = end;
            let ci = b.get(i) == Some(&b'i') && !b.get(i + 1).is_some_and(|&x| is_name_char(x));
            if ci {
                i += 1;
            }
            TokKind::Str(s, ci)
        } else if c == b'/' {
            let (pat, end) = regex_literal(text, i)?;
            i = end;
            let fs = i;
            while i < b.len() && b[i].is_ascii_alphabetic() {
                i += 1;
            }
            TokKind::Regex(pat, text[fs..i].to_owned())
        } else if c == b'%' {
            i += 1;
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            let name = text[start + 1..i].to_owned();
            if name.is_empty() {
                return Err(syntax(text, start, "expected a directive name after '%'"));
            }
            let takes_block = matches!(name.as_str(), "json" | "regex" | "lark" | "grammar_options" | "llguidance");
            toks.push(Tok { kind: TokKind::Directive(name), pos: start, line_start });
            line_start = false;
            if takes_block {
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if b.get(i) != Some(&b'{') {
                    return Err(syntax(text, i, "expected '{' to open the directive's block"));
                }
                let end = block_end(text, i)?;
                toks.push(Tok { kind: TokKind::Block(text[i..end].to_owned()), pos: i, line_start: false });
                i = end;
            }
            continue;
        } else if c == b'<' {
            let close = match b.get(i + 1) {
                Some(b'|') => "|>",
                Some(b'[') => "]>",
                _ => ">",
            };
            let Some(n) = text[i + 1..].find(close) else {
                return Err(syntax(text, i, format!("unterminated special token (expected '{close}')")));
            };
            let inner = &text[i..i + 1 + n + close.len()];
            if inner.contains('\n') {
                return Err(syntax(text, i, "unterminated special token (a newline inside '<...>')"));
            }
            i += inner.len();
            TokKind::Special(inner.to_owned())
        } else if c == b'@' {
            i += 1;
            while i < b.len() && is_name_char(b[i]) {
                i += 1;
            }
            if i == start + 1 {
                return Err(syntax(text, start, "expected a grammar name after '@'"));
            }
            TokKind::GrammarRef(text[start + 1..i].to_owned())
        } else if let Some(p) = PUNCTS.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            TokKind::Punct(p)
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(syntax(text, i, format!("unexpected character {ch:?}")));
        };
        toks.push(Tok { kind, pos: start, line_start });
        line_start = false;
    }
    Ok(toks)
}

/// Reads the string literal starting at the `"` at `start`; returns its value and end offset.
fn string_literal(text: &str, start: usize) -> Result<(String, usize)> {
    let mut out = String::new();
    let mut it = text[start + 1..].char_indices();
    while let Some((k, c)) = it.next() {
        let at = start + 1 + k;
        match c {
            '"' => return Ok((out, at + 1)),
            '\n' => return Err(syntax(text, start, "unterminated string literal")),
            '\\' => {
                let Some((_, e)) = it.next() else { break };
                let hex = |it: &mut std::str::CharIndices<'_>, n: usize| -> Result<char> {
                    let mut v = 0u32;
                    for _ in 0..n {
                        let d = it.next().and_then(|(_, h)| h.to_digit(16));
                        let Some(d) = d else {
                            return Err(syntax(text, at, format!("expected {n} hex digits in the escape")));
                        };
                        v = v * 16 + d;
                    }
                    char::from_u32(v).ok_or_else(|| syntax(text, at, "the escape is not a Unicode scalar value"))
                };
                let ch = match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    'a' => '\u{7}',
                    '0' => '\0',
                    '\\' | '"' | '\'' | '/' => e,
                    'x' => hex(&mut it, 2)?,
                    'u' => hex(&mut it, 4)?,
                    'U' => hex(&mut it, 8)?,
                    _ => return Err(syntax(text, at, format!("unknown escape '\\{e}' in a string literal"))),
                };
                out.push(ch);
            }
            c => out.push(c),
        }
    }
    Err(syntax(text, start, "unterminated string literal"))
}

/// Reads `/.../` starting at `start`; `\/` is a slash inside the pattern (kept as `\/`, which the
/// regex front end reads as `/`). Returns the pattern and the offset after the closing `/`.
fn regex_literal(text: &str, start: usize) -> Result<(String, usize)> {
    let b = text.as_bytes();
    let mut i = start + 1;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\n' => break,
            b'[' => {
                in_class = true;
                i += 1;
            }
            b']' => {
                in_class = false;
                i += 1;
            }
            b'/' if !in_class => return Ok((text[start + 1..i].to_owned(), i + 1)),
            _ => i += 1,
        }
    }
    Err(syntax(text, start, "unterminated regular expression (expected a closing '/')"))
}

/// The end (exclusive) of the balanced `{...}` block opening at `start`, skipping string literals.
fn block_end(text: &str, start: usize) -> Result<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(syntax(text, start, "unbalanced '{': the block is not closed"))
}

/// Recursive-descent parser over the tokens.
pub(crate) struct Parser<'a> {
    text: &'a str,
    toks: Vec<Tok>,
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    pub fn new(text: &'a str) -> Result<Self> {
        Ok(Parser { text, toks: lex(text)?, i: 0, depth: 0 })
    }

    fn peek(&self) -> Option<&TokKind> {
        self.toks.get(self.i).map(|t| &t.kind)
    }

    fn peek_at(&self, k: usize) -> Option<&TokKind> {
        self.toks.get(self.i + k).map(|t| &t.kind)
    }

    fn pos(&self) -> usize {
        self.toks.get(self.i).map_or(self.text.len(), |t| t.pos)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(TokKind::Punct(q)) if *q == p)
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the grammar".to_owned(),
            Some(TokKind::Name(n)) => format!("'{n}'"),
            Some(TokKind::Punct(p)) => format!("'{p}'"),
            Some(TokKind::Str(..)) => "a string literal".to_owned(),
            Some(TokKind::Regex(..)) => "a regular expression".to_owned(),
            Some(TokKind::Number(n)) => format!("the number {n}"),
            Some(TokKind::Directive(d)) => format!("'%{d}'"),
            Some(TokKind::Block(_)) => "a '{...}' block".to_owned(),
            Some(TokKind::Special(s)) => format!("'{s}'"),
            Some(TokKind::GrammarRef(s)) => format!("'@{s}'"),
        }
    }

    fn expected(&self, what: &str) -> Error {
        syntax(self.text, self.pos(), format!("expected {what}, found {}", self.describe()))
    }

    fn expect_punct(&mut self, p: &str) -> Result<()> {
        if self.is_punct(p) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.expected(&format!("'{p}'")))
        }
    }

    /// True if a definition (`[?!]name [.N] [[...]] :`) starts at token `k` from here.
    fn definition_at(&self, k: usize) -> bool {
        let mut k = k;
        if matches!(self.peek_at(k), Some(TokKind::Punct("?" | "!"))) {
            if !self.toks.get(self.i + k).is_some_and(|t| t.line_start) {
                return false;
            }
            k += 1;
        }
        if !matches!(self.peek_at(k), Some(TokKind::Name(_))) {
            return false;
        }
        k += 1;
        if matches!(self.peek_at(k), Some(TokKind::Punct(".")))
            && matches!(self.peek_at(k + 1), Some(TokKind::Number(_)))
        {
            k += 2;
        }
        if matches!(self.peek_at(k), Some(TokKind::Punct("["))) {
            // Options end at the matching ']' on a list of names, '=', values and ','.
            k += 1;
            loop {
                match self.peek_at(k) {
                    Some(TokKind::Punct("]")) => {
                        k += 1;
                        break;
                    }
                    Some(
                        TokKind::Name(_)
                        | TokKind::Str(..)
                        | TokKind::Number(_)
                        | TokKind::Regex(..)
                        | TokKind::Punct("=" | "," | "."),
                    ) => k += 1,
                    _ => return false,
                }
            }
        }
        matches!(self.peek_at(k), Some(TokKind::Punct(":")))
    }

    /// Parses the whole grammar.
    pub fn parse(mut self) -> Result<LarkAst> {
        let mut ast = LarkAst::default();
        while self.i < self.toks.len() {
            let pos = self.pos();
            match self.peek().cloned() {
                Some(TokKind::Directive(d)) => self.directive(&d, pos, &mut ast)?,
                Some(TokKind::Punct("?" | "!") | TokKind::Name(_)) if self.definition_at(0) => {
                    let def = self.definition()?;
                    ast.defs.push(def);
                }
                _ => return Err(self.expected("a rule or terminal definition ('name: ...') or a '%' directive")),
            }
        }
        Ok(ast)
    }

    fn directive(&mut self, d: &str, pos: usize, ast: &mut LarkAst) -> Result<()> {
        self.i += 1;
        match d {
            "ignore" => {
                if self.at_def_end() {
                    return Err(self.expected("what to ignore after '%ignore'"));
                }
                let alts = self.alternatives()?;
                ast.ignores.push((alts, pos));
            }
            "import" => self.import(ast)?,
            "grammar_options" | "llguidance" => {
                let Some(TokKind::Block(b)) = self.peek().cloned() else { return Err(self.expected("a JSON object")) };
                ast.options.push((b, self.pos()));
                self.i += 1;
            }
            "declare" | "override" | "extend" => {
                return Err(err_at(
                    self.text,
                    ErrorKind::Unsupported,
                    pos,
                    format!("the directive '%{d}' is not supported"),
                ));
            }
            "json" | "regex" | "lark" => {
                return Err(syntax(self.text, pos, format!("'%{d} {{...}}' may only appear inside a rule body")));
            }
            _ => return Err(syntax(self.text, pos, format!("unknown directive '%{d}'"))),
        }
        Ok(())
    }

    /// `%import common.X`, `%import common.X -> Y`, `%import common (X, Y)`.
    fn import(&mut self, ast: &mut LarkAst) -> Result<()> {
        let pos = self.pos();
        let Some(TokKind::Name(module)) = self.peek().cloned() else { return Err(self.expected("a module name")) };
        self.i += 1;
        if module != "common" {
            return Err(err_at(
                self.text,
                ErrorKind::Unsupported,
                pos,
                format!("only '%import common...' is supported, not module '{module}'"),
            ));
        }
        if self.is_punct("(") {
            self.i += 1;
            loop {
                let p = self.pos();
                let Some(TokKind::Name(n)) = self.peek().cloned() else {
                    return Err(self.expected("a name to import"));
                };
                self.i += 1;
                ast.imports.push((n.clone(), n, p));
                if self.is_punct(",") {
                    self.i += 1;
                    continue;
                }
                self.expect_punct(")")?;
                return Ok(());
            }
        }
        self.expect_punct(".")?;
        let p = self.pos();
        let Some(TokKind::Name(n)) = self.peek().cloned() else { return Err(self.expected("a name to import")) };
        self.i += 1;
        let mut local = n.clone();
        if self.is_punct("->") {
            self.i += 1;
            let Some(TokKind::Name(l)) = self.peek().cloned() else {
                return Err(self.expected("a local name after '->'"));
            };
            self.i += 1;
            local = l;
        }
        ast.imports.push((local, n, p));
        Ok(())
    }

    fn definition(&mut self) -> Result<Def> {
        if matches!(self.peek(), Some(TokKind::Punct("?" | "!"))) {
            self.i += 1; // tree-shaping prefixes do not change the language
        }
        let pos = self.pos();
        let Some(TokKind::Name(name)) = self.peek().cloned() else { return Err(self.expected("a name")) };
        self.i += 1;
        if self.is_punct(".") {
            // Lark priorities choose between lexings; here (as in XGrammar and llguidance) there
            // is no priority-driven lexer, so they are refused rather than ignored.
            return Err(err_at(
                self.text,
                ErrorKind::Unsupported,
                self.pos(),
                format!("priorities ('{name}.N') are not supported"),
            ));
        }
        let mut options = Vec::new();
        if self.is_punct("[") {
            self.i += 1;
            while !self.is_punct("]") {
                let p = self.pos();
                let Some(TokKind::Name(o)) = self.peek().cloned() else {
                    return Err(self.expected("a rule option name"));
                };
                self.i += 1;
                let mut value = None;
                let value_is_str = matches!(self.peek_at(1), Some(TokKind::Str(..))) && self.is_punct("=");
                let mut atom = None;
                if self.is_punct("=") {
                    self.i += 1;
                    let v = match self.peek().cloned() {
                        Some(TokKind::Str(s, ci)) => {
                            atom = Some(Atom::Str(s.clone(), ci));
                            s
                        }
                        Some(TokKind::Number(n)) => {
                            let mut v = n.to_string();
                            if self.peek_at(1) == Some(&TokKind::Punct(".")) {
                                if let Some(TokKind::Number(f)) = self.peek_at(2) {
                                    v = format!("{v}.{f}");
                                    self.i += 2;
                                }
                            }
                            v
                        }
                        Some(TokKind::Name(n)) => {
                            atom = Some(Atom::Name(n.clone()));
                            n
                        }
                        Some(TokKind::Regex(r, flags)) => {
                            atom = Some(Atom::Regex(r.clone(), flags));
                            r
                        }
                        _ => return Err(self.expected("an option value")),
                    };
                    self.i += 1;
                    value = Some(v);
                }
                options.push(RuleOption { name: o, value, pos: p, value_is_str, atom });
                if self.is_punct(",") {
                    self.i += 1;
                } else if !self.is_punct("]") {
                    return Err(self.expected("',' or ']'"));
                }
            }
            self.i += 1;
        }
        self.expect_punct(":")?;
        let body = self.alternatives()?;
        Ok(Def { name, pos, options, body })
    }

    /// True at a token that ends the current definition.
    fn at_def_end(&self) -> bool {
        match self.peek() {
            None => true,
            Some(TokKind::Directive(d)) => !matches!(d.as_str(), "json" | "regex" | "lark"),
            Some(TokKind::Punct("?" | "!" | "." | "[") | TokKind::Name(_)) => self.definition_at(0),
            _ => false,
        }
    }

    fn alternatives(&mut self) -> Result<Alts> {
        let mut alts = vec![self.sequence()?];
        while self.is_punct("|") {
            self.i += 1;
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    fn sequence(&mut self) -> Result<Seq> {
        let mut seq = Vec::new();
        loop {
            if self.at_def_end() {
                break;
            }
            match self.peek() {
                Some(TokKind::Punct("|" | ")" | "]")) => break,
                Some(TokKind::Punct("->")) => {
                    // `-> alias` names a tree node in Lark; it does not change the language.
                    self.i += 1;
                    if matches!(self.peek(), Some(TokKind::Name(_))) {
                        self.i += 1;
                    }
                    break;
                }
                _ => {}
            }
            let item = self.item()?;
            seq.push(item);
        }
        Ok(seq)
    }

    fn item(&mut self) -> Result<Item> {
        let pos = self.pos();
        let atom = self.atom()?;
        let (mut min, mut max) = (1, Some(1));
        let mut quantified = false;
        loop {
            let qpos = self.pos();
            let (lo, hi) = match self.peek() {
                // `?name:` on a new line starts the next definition, not a quantifier.
                Some(TokKind::Punct("?")) if self.definition_at(0) => break,
                Some(TokKind::Punct("?")) => {
                    self.i += 1;
                    (0, Some(1))
                }
                Some(TokKind::Punct("*")) => {
                    self.i += 1;
                    (0, None)
                }
                Some(TokKind::Punct("+")) => {
                    self.i += 1;
                    (1, None)
                }
                Some(TokKind::Punct("~")) => {
                    self.i += 1;
                    let lo = self.number()?;
                    if self.is_punct("..") {
                        self.i += 1;
                        let hi = self.number()?;
                        (lo, Some(hi))
                    } else {
                        (lo, Some(lo))
                    }
                }
                Some(TokKind::Punct("{")) => {
                    self.i += 1;
                    let lo = if matches!(self.peek(), Some(TokKind::Number(_))) { Some(self.number()?) } else { None };
                    let r = if self.is_punct(",") {
                        self.i += 1;
                        let hi =
                            if matches!(self.peek(), Some(TokKind::Number(_))) { Some(self.number()?) } else { None };
                        (lo.unwrap_or(0), hi)
                    } else {
                        let Some(lo) = lo else { return Err(self.expected("a repetition count")) };
                        (lo, Some(lo))
                    };
                    self.expect_punct("}")?;
                    r
                }
                _ => break,
            };
            if quantified {
                return Err(syntax(self.text, qpos, "quantifiers cannot be stacked; use a group: (x*)?"));
            }
            quantified = true;
            if hi.is_some_and(|h| h < lo) {
                return Err(syntax(
                    self.text,
                    qpos,
                    format!("repetition upper bound {} is below the lower bound {lo}", hi.unwrap_or(0)),
                ));
            }
            min = lo;
            max = hi;
        }
        Ok(Item { atom, pos, min, max })
    }

    fn number(&mut self) -> Result<u32> {
        match self.peek() {
            Some(&TokKind::Number(n)) => {
                self.i += 1;
                Ok(n)
            }
            _ => Err(self.expected("a number")),
        }
    }

    fn atom(&mut self) -> Result<Atom> {
        let pos = self.pos();
        let Some(tok) = self.peek().cloned() else { return Err(self.expected("an element")) };
        self.i += 1;
        Ok(match tok {
            TokKind::Str(s, ci) => {
                if self.is_punct("..") {
                    self.i += 1;
                    let Some(TokKind::Str(hi, _)) = self.peek().cloned() else {
                        return Err(self.expected("a one-character string after '..'"));
                    };
                    self.i += 1;
                    let one = |s: &str| {
                        let mut it = s.chars();
                        match (it.next(), it.next()) {
                            (Some(c), None) => Some(c),
                            _ => None,
                        }
                    };
                    let (Some(a), Some(z)) = (one(&s), one(&hi)) else {
                        return Err(syntax(self.text, pos, "a range \"a\"..\"z\" needs one-character strings"));
                    };
                    if a > z {
                        return Err(syntax(self.text, pos, format!("the range {a:?}..{z:?} is empty")));
                    }
                    Atom::Range(a, z)
                } else {
                    Atom::Str(s, ci)
                }
            }
            TokKind::Regex(p, f) => Atom::Regex(p, f),
            TokKind::Name(n) => Atom::Name(n),
            TokKind::Special(s) => Atom::Special(s),
            TokKind::GrammarRef(s) => Atom::GrammarRef(s),
            TokKind::Directive(d) if matches!(d.as_str(), "json" | "regex" | "lark") => {
                let Some(TokKind::Block(b)) = self.peek().cloned() else {
                    return Err(self.expected("a '{...}' block"));
                };
                self.i += 1;
                match d.as_str() {
                    "json" => Atom::Json(b),
                    "regex" => Atom::RegexBlock(b),
                    _ => Atom::Lark(b[1..b.len() - 1].to_owned()),
                }
            }
            TokKind::Punct(open @ ("(" | "[")) => {
                self.depth += 1;
                if self.depth > MAX_LARK_NESTING {
                    return Err(err_at(
                        self.text,
                        ErrorKind::LimitExceeded,
                        pos,
                        format!("groups nested deeper than {MAX_LARK_NESTING}"),
                    ));
                }
                let alts = self.alternatives()?;
                self.expect_punct(if open == "(" { ")" } else { "]" })?;
                self.depth -= 1;
                if open == "[" {
                    // `[x]` is an optional group: represent it as (x)? by adding an empty branch.
                    let mut alts = alts;
                    alts.push(Vec::new());
                    Atom::Group(alts)
                } else {
                    Atom::Group(alts)
                }
            }
            _ => {
                self.i -= 1;
                return Err(self.expected("an element (a string, /regex/, name, '(' or '[')"));
            }
        })
    }
}
