//! Pattern text to [`Node`]: the common subset of ECMA-262 and Python `re` syntax.
//!
//! The parser is a loop over characters with an explicit stack of open groups, so it never
//! recurses; the stack is bounded by `MAX_NESTING`. Flags are applied while parsing: with
//! `ignore_case` every literal and class is closed under simple case folding (before negation, as
//! both ECMA-262 and Python do), and `.` is resolved to its set.
//!
//! Constructs that cannot be expressed as a regular language over whole strings (backreferences,
//! lookaround), and syntax on which ECMA-262 and Python disagree, are `Unsupported` errors that
//! name the construct and its column.
use super::ast::{Assertion, Node};
use super::charset::{self, CharSet};
use super::RegexFlags;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{MAX_GRAMMAR_BYTES, MAX_NESTING, MAX_REPEAT_BOUND};

/// One open group: completed alternatives, the sequence being built, and whether its last item
/// may still take a quantifier.
struct Frame {
    alts: Vec<Node>,
    seq: Vec<Node>,
    last_quantifiable: bool,
    open_pos: usize,
}

impl Frame {
    fn new(open_pos: usize) -> Frame {
        Frame { alts: Vec::new(), seq: Vec::new(), last_quantifiable: false, open_pos }
    }

    fn push(&mut self, node: Node, quantifiable: bool) {
        self.seq.push(node);
        self.last_quantifiable = quantifiable;
    }

    /// The group's node. Nested unquantified alternations are spliced into this one, so chains
    /// like `a|(b|(c|d))` stay one level deep.
    fn finish(mut self) -> Node {
        let seq = std::mem::take(&mut self.seq);
        self.alts.push(concat(seq));
        if self.alts.len() == 1 {
            return self.alts.pop().unwrap_or(Node::Empty);
        }
        let mut alts = Vec::with_capacity(self.alts.len());
        for mut a in std::mem::take(&mut self.alts) {
            match &mut a {
                Node::Alt(inner) => alts.append(inner),
                _ => alts.push(a),
            }
        }
        Node::Alt(alts)
    }
}

/// A sequence node. Unquantified groups that are sequences are spliced in, so `a(b(c))` stays
/// one level deep (quantified groups are `Repeat` nodes by now and stay intact).
fn concat(seq: Vec<Node>) -> Node {
    let mut flat = Vec::with_capacity(seq.len());
    for mut n in seq {
        match &mut n {
            Node::Concat(inner) => flat.append(inner),
            _ => flat.push(n),
        }
    }
    let mut seq = flat;
    match seq.len() {
        0 => Node::Empty,
        1 => seq.pop().unwrap_or(Node::Empty),
        _ => Node::Concat(seq),
    }
}

/// What an escape sequence denotes.
enum Escape {
    Char(u32),
    Set(CharSet),
    Assert(Assertion),
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    flags: RegexFlags,
}

/// Parses `pattern` into an AST; also returns the deepest group nesting seen.
pub fn parse(pattern: &str, flags: RegexFlags) -> Result<(Node, usize)> {
    if pattern.len() > MAX_GRAMMAR_BYTES {
        return Err(Error::limit("regex pattern size in bytes", MAX_GRAMMAR_BYTES));
    }
    let mut p = Parser { chars: pattern.chars().collect(), pos: 0, flags };
    p.run()
}

fn syntax(pos: usize, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::RegexSyntax, msg).at_text(1, pos as u32 + 1)
}

fn unsupported(pos: usize, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, msg).at_text(1, pos as u32 + 1)
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<char> {
        self.chars.get(self.pos + off).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn literal(&self, c: u32) -> CharSet {
        let s = CharSet::single(c);
        if self.flags.ignore_case {
            s.case_fold()
        } else {
            s
        }
    }

    fn fold(&self, s: CharSet) -> CharSet {
        if self.flags.ignore_case {
            s.case_fold()
        } else {
            s
        }
    }

    fn run(&mut self) -> Result<(Node, usize)> {
        let mut stack = vec![Frame::new(0)];
        let mut max_depth = 1;
        while let Some(c) = self.peek() {
            let start = self.pos;
            let frame = stack.last_mut().expect("the stack always holds the top-level frame");
            match c {
                '(' => {
                    self.open_group()?;
                    if stack.len() > MAX_NESTING {
                        return Err(Error::limit("regex group nesting", MAX_NESTING).at_text(1, start as u32 + 1));
                    }
                    stack.push(Frame::new(start));
                    max_depth = max_depth.max(stack.len());
                }
                ')' => {
                    self.pos += 1;
                    if stack.len() == 1 {
                        return Err(syntax(start, "unmatched `)`"));
                    }
                    let node = stack.pop().expect("checked above").finish();
                    stack.last_mut().expect("non-empty").push(node, true);
                }
                '|' => {
                    self.pos += 1;
                    let seq = std::mem::take(&mut frame.seq);
                    frame.alts.push(concat(seq));
                    frame.last_quantifiable = false;
                }
                '*' | '+' | '?' => {
                    self.pos += 1;
                    let (min, max) = match c {
                        '*' => (0, None),
                        '+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.quantify(frame, start, min, max)?;
                }
                '{' => {
                    if let Some((min, max)) = self.braces()? {
                        self.quantify(frame, start, min, max)?;
                    } else {
                        self.pos += 1;
                        frame.push(Node::Set(self.literal('{' as u32)), true);
                    }
                }
                '^' => {
                    self.pos += 1;
                    frame.push(Node::Assert(Assertion::Start), false);
                }
                '$' => {
                    self.pos += 1;
                    frame.push(Node::Assert(Assertion::End), false);
                }
                '.' => {
                    self.pos += 1;
                    frame.push(Node::Set(charset::dot(self.flags.dot_all)), true);
                }
                '[' => {
                    let set = self.class()?;
                    frame.push(Node::Set(set), true);
                }
                '\\' => match self.escape(false)? {
                    Escape::Char(c) => frame.push(Node::Set(self.literal(c)), true),
                    Escape::Set(s) => frame.push(Node::Set(self.fold(s)), true),
                    Escape::Assert(a) => frame.push(Node::Assert(a), false),
                },
                _ => {
                    self.pos += 1;
                    frame.push(Node::Set(self.literal(c as u32)), true);
                }
            }
        }
        if stack.len() > 1 {
            let open = stack.last().map_or(0, |f| f.open_pos);
            return Err(syntax(open, "unclosed group `(`"));
        }
        Ok((stack.pop().expect("top-level frame").finish(), max_depth))
    }

    /// Wraps the last item of `frame` in a repetition; consumes a lazy `?` suffix.
    fn quantify(&mut self, frame: &mut Frame, start: usize, min: u32, max: Option<u32>) -> Result<()> {
        if !frame.last_quantifiable {
            return Err(syntax(start, "quantifier with nothing to repeat (or a second quantifier)"));
        }
        match self.peek() {
            Some('?') => self.pos += 1, // lazy: same language
            Some('+') => {
                return Err(unsupported(self.pos, "possessive quantifier (Python-only, changes the language)"));
            }
            _ => {}
        }
        let sub = frame.seq.pop().expect("quantifiable implies an item");
        frame.push(Node::Repeat { sub: Box::new(sub), min, max }, false);
        Ok(())
    }

    /// At `{`: returns the bounds if a well-formed `{n}`, `{n,}` or `{n,m}` follows (consuming
    /// it), `None` if the brace is a literal.
    fn braces(&mut self) -> Result<Option<(u32, Option<u32>)>> {
        let start = self.pos;
        let mut i = self.pos + 1;
        let digits = |i: &mut usize, chars: &[char]| -> Option<u64> {
            let from = *i;
            let mut v: u64 = 0;
            while let Some(d) = chars.get(*i).and_then(|c| c.to_digit(10)) {
                v = v.saturating_mul(10).saturating_add(u64::from(d));
                *i += 1;
            }
            (*i > from).then_some(v)
        };
        let min = digits(&mut i, &self.chars);
        let (max, has_comma) = if self.chars.get(i) == Some(&',') {
            i += 1;
            (digits(&mut i, &self.chars), true)
        } else {
            (min, false)
        };
        if self.chars.get(i) != Some(&'}') {
            return Ok(None);
        }
        let Some(min) = min else {
            if has_comma && max.is_some() {
                return Err(unsupported(
                    start,
                    "`{,n}` means {0,n} in Python but literal text in ECMA-262; write `{0,n}` or `\\{`",
                ));
            }
            return Ok(None);
        };
        let max = if has_comma { max } else { Some(min) };
        let bound = u64::from(MAX_REPEAT_BOUND);
        if min > bound || max.is_some_and(|m| m > bound) {
            return Err(Error::limit("regex repetition bound", MAX_REPEAT_BOUND as usize).at_text(1, start as u32 + 1));
        }
        if max.is_some_and(|m| m < min) {
            return Err(syntax(start, "repetition bounds out of order in `{m,n}`"));
        }
        self.pos = i + 1;
        Ok(Some((min as u32, max.map(|m| m as u32))))
    }

    /// At `(`: consumes the group opener (`(`, `(?:`, `(?<name>`, `(?P<name>`).
    fn open_group(&mut self) -> Result<()> {
        let start = self.pos;
        self.pos += 1;
        if self.peek() != Some('?') {
            return Ok(());
        }
        let named = if self.starts_with("?:") {
            self.pos += 2;
            return Ok(());
        } else if self.starts_with("?=") || self.starts_with("?!") {
            return Err(unsupported(start, "lookahead assertion `(?=...)`/`(?!...)`"));
        } else if self.starts_with("?<=") || self.starts_with("?<!") {
            return Err(unsupported(start, "lookbehind assertion `(?<=...)`/`(?<!...)`"));
        } else if self.starts_with("?P=") {
            return Err(unsupported(start, "backreference `(?P=name)`"));
        } else if self.starts_with("?P<") {
            3
        } else if self.starts_with("?<") {
            2
        } else if self.starts_with("?>") {
            return Err(unsupported(start, "atomic group `(?>...)`"));
        } else if self.starts_with("?#") {
            return Err(unsupported(start, "comment group `(?#...)`"));
        } else if self.peek_at(1).is_some_and(|c| "aiLmsux-".contains(c)) {
            return Err(unsupported(start, "inline flags `(?flags)`"));
        } else {
            return Err(syntax(start, "unknown group syntax after `(?`"));
        };
        self.pos += named;
        let name_start = self.pos;
        while let Some(c) = self.peek() {
            if c == '>' {
                break;
            }
            if !(c.is_alphanumeric() || c == '_' || c == '$') {
                return Err(syntax(self.pos, "invalid character in group name"));
            }
            self.pos += 1;
        }
        if self.peek() != Some('>') || self.pos == name_start {
            return Err(syntax(start, "malformed group name in `(?<name>...)`"));
        }
        self.pos += 1;
        Ok(())
    }

    /// At `[`: parses a class and returns its set (folded, then negated if `[^`).
    fn class(&mut self) -> Result<CharSet> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        let mut set = CharSet::empty();
        loop {
            let Some(c) = self.peek() else {
                return Err(syntax(open, "unterminated character class `[`"));
            };
            if c == ']' {
                self.pos += 1;
                break;
            }
            let atom_pos = self.pos;
            let first = self.class_atom()?;
            if self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']') {
                self.pos += 1;
                let second = self.class_atom()?;
                match (first, second) {
                    (Escape::Char(a), Escape::Char(b)) => {
                        if a > b {
                            return Err(syntax(atom_pos, "character range out of order"));
                        }
                        ranges.push((a, b));
                    }
                    _ => return Err(syntax(atom_pos, "a class escape cannot be a range endpoint")),
                }
            } else {
                match first {
                    Escape::Char(a) => ranges.push((a, a)),
                    Escape::Set(s) => set = set.union(&s),
                    Escape::Assert(_) => unreachable!("class escapes are never assertions"),
                }
            }
        }
        let set = self.fold(set.union(&CharSet::from_ranges(ranges)));
        Ok(if negated { set.negate() } else { set })
    }

    fn class_atom(&mut self) -> Result<Escape> {
        match self.peek() {
            Some('\\') => self.escape(true),
            Some(c) => {
                self.pos += 1;
                Ok(Escape::Char(c as u32))
            }
            None => Err(syntax(self.pos, "unterminated character class `[`")),
        }
    }

    fn hex(&mut self, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..n {
            v = v * 16 + self.peek_at(i)?.to_digit(16)?;
        }
        self.pos += n;
        Some(v)
    }

    /// At `\`: parses one escape. `in_class` selects the class meaning of `\b` and forbids `\B`.
    fn escape(&mut self, in_class: bool) -> Result<Escape> {
        let start = self.pos;
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(syntax(start, "pattern ends with a lone `\\`"));
        };
        self.pos += 1;
        let ch = |c: char| Ok(Escape::Char(c as u32));
        match c {
            'd' => Ok(Escape::Set(charset::digit())),
            'D' => Ok(Escape::Set(charset::digit().negate())),
            'w' => Ok(Escape::Set(charset::word())),
            'W' => Ok(Escape::Set(charset::word().negate())),
            's' => Ok(Escape::Set(charset::space())),
            'S' => Ok(Escape::Set(charset::space().negate())),
            'p' | 'P' => {
                if self.peek() != Some('{') {
                    return Err(syntax(start, "expected `{` after `\\p`"));
                }
                let name_start = self.pos + 1;
                let Some(len) = self.chars[name_start..].iter().position(|&c| c == '}') else {
                    return Err(syntax(start, "unterminated `\\p{...}`"));
                };
                let name: String = self.chars[name_start..name_start + len].iter().collect();
                self.pos = name_start + len + 1;
                let set = charset::unicode_property(&name).map_err(|e| syntax(start, e.message()))?;
                Ok(Escape::Set(if c == 'P' { set.negate() } else { set }))
            }
            'b' if in_class => ch('\u{8}'),
            'b' => Ok(Escape::Assert(Assertion::WordBoundary)),
            'B' if in_class => Err(syntax(start, "`\\B` is not allowed in a class")),
            'B' => Ok(Escape::Assert(Assertion::NotWordBoundary)),
            'n' => ch('\n'),
            't' => ch('\t'),
            'r' => ch('\r'),
            'f' => ch('\u{c}'),
            'v' => ch('\u{b}'),
            '0' if self.peek().is_some_and(|c| c.is_ascii_digit()) => {
                Err(unsupported(start, "octal escape (legacy syntax that ECMA-262 and Python read differently)"))
            }
            '0' => ch('\0'),
            '1'..='9' => Err(unsupported(start, format!("backreference `\\{c}`"))),
            'k' if self.peek() == Some('<') => Err(unsupported(start, "backreference `\\k<name>`")),
            'x' => self.hex(2).map(Escape::Char).ok_or_else(|| syntax(start, "`\\x` needs two hex digits")),
            'U' => self.hex(8).map(Escape::Char).ok_or_else(|| syntax(start, "`\\U` needs eight hex digits")),
            'u' if self.peek() == Some('{') => {
                self.pos += 1;
                let mut v: u32 = 0;
                let from = self.pos;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(16)) {
                    v = v.saturating_mul(16).saturating_add(d);
                    self.pos += 1;
                }
                if self.pos == from || self.peek() != Some('}') || v > charset::MAX_CHAR {
                    return Err(syntax(start, "malformed `\\u{...}` escape"));
                }
                self.pos += 1;
                Ok(Escape::Char(v))
            }
            'u' => {
                let v = self.hex(4).ok_or_else(|| syntax(start, "`\\u` needs four hex digits"))?;
                // A surrogate pair written as two escapes is one astral codepoint.
                if (0xD800..0xDC00).contains(&v) && self.starts_with("\\u") {
                    let save = self.pos;
                    self.pos += 2;
                    match self.hex(4) {
                        Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                            return Ok(Escape::Char(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)));
                        }
                        _ => self.pos = save,
                    }
                }
                Ok(Escape::Char(v))
            }
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.pos += 1;
                    Ok(Escape::Char(l as u32 % 32))
                }
                _ => Err(syntax(start, "`\\c` needs a letter")),
            },
            c if c.is_alphanumeric() || c == '_' => Err(syntax(start, format!("unknown escape `\\{c}`"))),
            c => ch(c),
        }
    }
}
