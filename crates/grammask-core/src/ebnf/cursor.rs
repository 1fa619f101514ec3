//! Character-level reading shared by both EBNF dialects: a byte cursor over the text, whitespace
//! and comments, names, string literals and escapes, and error locations.
//!
//! Positions are byte offsets into the text; they become 1-based line/column (columns count
//! characters) only when an error is reported, so the happy path never counts lines.

use crate::error::{Error, ErrorKind, Result};

/// Which characters a backslash escape may denote: classes accept more punctuation escapes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum EscapeContext {
    String,
    Class,
}

pub(crate) struct Cursor<'a> {
    pub text: &'a str,
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { text, bytes: text.as_bytes(), pos: 0 }
    }

    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub fn peek_at(&self, offset: usize) -> Option<u8> {
        self.bytes.get(self.pos + offset).copied()
    }

    pub fn peek_char(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    pub fn bump_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    pub fn starts_with(&self, s: &str) -> bool {
        self.bytes[self.pos..].starts_with(s.as_bytes())
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// 1-based line and column (in characters) of byte offset `pos`.
    pub fn line_col(&self, pos: usize) -> (u32, u32) {
        let pos = pos.min(self.bytes.len());
        let before = &self.text[..pos];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(column).unwrap_or(u32::MAX))
    }

    /// An error of `kind` located at byte offset `pos`.
    pub fn error_at(&self, kind: ErrorKind, pos: usize, message: impl Into<String>) -> Error {
        let (line, column) = self.line_col(pos);
        Error::new(kind, message).at_text(line, column)
    }

    /// A syntax error at the current position, "expected X, found <what is here>".
    pub fn expected(&self, what: &str) -> Error {
        self.error_at(ErrorKind::EbnfSyntax, self.pos, format!("expected {what}, found {}", self.describe_here()))
    }

    /// Human description of the text at the cursor, for "found ..." messages.
    pub fn describe_here(&self) -> String {
        self.describe_at(self.pos)
    }

    pub fn describe_at(&self, pos: usize) -> String {
        match self.text[pos.min(self.text.len())..].chars().next() {
            None => "end of input".to_owned(),
            Some('\n' | '\r') => "a line break".to_owned(),
            Some(c) if c.is_control() => format!("character U+{:04X}", c as u32),
            Some(c) => {
                // Show the name starting here (at most 20 characters), or the one character.
                let rest = &self.text[pos..];
                let end = if is_name_char(c) {
                    rest.char_indices()
                        .take_while(|&(_, c)| is_name_char(c))
                        .take(20)
                        .last()
                        .map_or(0, |(i, c)| i + c.len_utf8())
                } else {
                    c.len_utf8()
                };
                format!("'{}'", &rest[..end])
            }
        }
    }

    /// Skips spaces, tabs, line breaks and comments. `hash_comments` enables `# ...`, `slash_comments`
    /// enables `// ...` and `/* ... */`.
    #[inline]
    pub fn skip_ws(&mut self, hash_comments: bool, slash_comments: bool) -> Result<()> {
        // PERF: the parser asks before every element and after it (for a quantifier); most of
        // the time there is nothing to skip, and this test is inlined at the call.
        if !matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'#' | b'/')) {
            return Ok(());
        }
        self.skip_ws_slow(hash_comments, slash_comments)
    }

    fn skip_ws_slow(&mut self, hash_comments: bool, slash_comments: bool) -> Result<()> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'#') if hash_comments => self.skip_line(),
                Some(b'/') if slash_comments && self.peek_at(1) == Some(b'/') => self.skip_line(),
                Some(b'/') if slash_comments && self.peek_at(1) == Some(b'*') => {
                    let start = self.pos;
                    match self.text[self.pos + 2..].find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => {
                            return Err(self.error_at(
                                ErrorKind::EbnfSyntax,
                                start,
                                "expected '*/' to close this comment, found end of input",
                            ))
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn skip_line(&mut self) {
        match self.bytes[self.pos..].iter().position(|&b| b == b'\n') {
            Some(i) => self.pos += i,
            None => self.pos = self.bytes.len(),
        }
    }

    /// Skips spaces and tabs only.
    pub fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// True if only blanks (and, on the first line, a byte-order mark) precede `pos` on its line.
    pub fn is_line_start(&self, pos: usize) -> bool {
        let line_start = self.bytes[..pos].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut before = &self.bytes[line_start..pos];
        if line_start == 0 {
            before = before.strip_prefix("\u{feff}".as_bytes()).unwrap_or(before);
        }
        before.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r'))
    }

    /// Length in bytes of the rule name starting at `pos` (0 if none): `[A-Za-z0-9_.-]+`, not
    /// starting with a digit.
    pub fn name_len_at(&self, pos: usize, allow_dot: bool) -> usize {
        let rest = &self.bytes[pos.min(self.bytes.len())..];
        match rest.first() {
            Some(b) if b.is_ascii_digit() => return 0,
            None => return 0,
            _ => {}
        }
        // PERF: one table load per byte instead of a chain of comparisons.
        let table = if allow_dot { &NAME_BYTES_DOT } else { &NAME_BYTES };
        rest.iter().position(|&b| !table[usize::from(b)]).unwrap_or(rest.len())
    }

    /// Reads a double-quoted string literal (the cursor is on the opening quote) and returns its
    /// UTF-8 bytes. Escapes denote Unicode scalar values.
    pub fn string_literal(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.string_literal_into(&mut out)?;
        Ok(out)
    }

    /// [`Cursor::string_literal`] into `out` (cleared first), so that a parser can reuse one buffer.
    pub fn string_literal_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let open = self.pos;
        self.pos += 1;
        out.clear();
        loop {
            // PERF: copy the run of plain bytes up to the next quote, backslash or line break at
            // once. Those four are ASCII, so they never occur inside a multi-byte character and the
            // run is whole characters, already in UTF-8.
            let run = self.bytes[self.pos..].iter().position(|&b| matches!(b, b'"' | b'\\' | b'\n' | b'\r'));
            let end = run.map_or(self.bytes.len(), |i| self.pos + i);
            out.extend_from_slice(&self.bytes[self.pos..end]);
            self.pos = end;
            match self.peek() {
                Some(b'\n' | b'\r') => {
                    let (l, c) = self.line_col(open);
                    return Err(self.expected(&format!(
                        "'\"' to close the string literal opened at line {l}, column {c} (write a line break as \\n)"
                    )));
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    let c = self.escape(EscapeContext::String)?;
                    push_utf8(out, c);
                }
                // The run above stops only at one of those bytes or at the end of the input.
                _ => {
                    let (l, c) = self.line_col(open);
                    return Err(
                        self.expected(&format!("'\"' to close the string literal opened at line {l}, column {c}"))
                    );
                }
            }
        }
    }

    /// Reads one escape sequence (the cursor is on the backslash) and returns its character.
    pub fn escape(&mut self, ctx: EscapeContext) -> Result<char> {
        let start = self.pos;
        self.pos += 1;
        let Some(e) = self.bump_char() else {
            return Err(self.error_at(
                ErrorKind::EbnfSyntax,
                start,
                "expected an escape sequence after '\\', found end of input",
            ));
        };
        let simple = match e {
            '"' | '\\' | '/' | '\'' | '?' => Some(e),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'a' => Some('\u{7}'),
            'v' => Some('\u{b}'),
            '0' => Some('\0'),
            'e' => Some('\u{1b}'),
            '^' | '$' | '.' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '-'
                if ctx == EscapeContext::Class =>
            {
                Some(e)
            }
            _ => None,
        };
        if let Some(c) = simple {
            return Ok(c);
        }
        let value = match e {
            'x' => {
                let digits_start = self.pos;
                let mut v: u32 = 0;
                while let Some(d) = self.peek().and_then(|b| (b as char).to_digit(16)) {
                    v = v.saturating_mul(16).saturating_add(d).min(0x7FFF_FFFF);
                    self.pos += 1;
                }
                if self.pos == digits_start {
                    return Err(self.error_at(
                        ErrorKind::EbnfSyntax,
                        start,
                        format!("expected hexadecimal digits after '\\x', found {}", self.describe_here()),
                    ));
                }
                v
            }
            'u' | 'U' => {
                let n = if e == 'u' { 4 } else { 8 };
                let mut v: u32 = 0;
                for _ in 0..n {
                    match self.peek().and_then(|b| (b as char).to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d;
                            self.pos += 1;
                        }
                        None => {
                            return Err(self.error_at(
                                ErrorKind::EbnfSyntax,
                                start,
                                format!(
                                    "expected {n} hexadecimal digits after '\\{e}', found {}",
                                    self.describe_here()
                                ),
                            ))
                        }
                    }
                }
                v
            }
            'd' | 'w' | 's' | 'D' | 'W' | 'S' if ctx == EscapeContext::Class => {
                return Err(self.error_at(
                    ErrorKind::EbnfSyntax,
                    start,
                    format!("the class escape '\\{e}' is not supported inside [...]; write the ranges out, e.g. [0-9]"),
                ));
            }
            _ => {
                let what = if ctx == EscapeContext::Class { "character class" } else { "string literal" };
                return Err(self.error_at(
                    ErrorKind::EbnfSyntax,
                    start,
                    format!("unknown escape sequence '\\{e}' in a {what}"),
                ));
            }
        };
        let escaped = &self.text[start..self.pos];
        if (0xD800..=0xDFFF).contains(&value) {
            return Err(self.error_at(
                ErrorKind::EbnfSyntax,
                start,
                format!("escape '{escaped}' is a lone UTF-16 surrogate, not a Unicode scalar value"),
            ));
        }
        char::from_u32(value).ok_or_else(|| {
            self.error_at(
                ErrorKind::EbnfSyntax,
                start,
                format!("escape '{escaped}' is beyond the largest code point U+10FFFF"),
            )
        })
    }
}

/// Bytes of a rule name `[A-Za-z0-9_-]`, and the same with `.`.
const NAME_BYTES: [bool; 256] = name_bytes(false);
const NAME_BYTES_DOT: [bool; 256] = name_bytes(true);

const fn name_bytes(allow_dot: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || (allow_dot && c == b'.');
        b += 1;
    }
    t
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

pub(crate) fn push_utf8(out: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}
