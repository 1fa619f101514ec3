//! Token vocabularies: the table `token id -> bytes` that the mask engine matches grammar text against.
//!
//! Pipeline position: built once per tokenizer (from Python's `TokenizerInfo` or directly in Rust),
//! then shared (`Arc`) by every [`crate::compiled::CompiledGrammar`] made for that tokenizer. It takes
//! the tokens *as the tokenizer spells them* (`"Ġhello"`, `"▁hi"`, `"<0x0A>"`) plus a [`VocabType`]
//! saying how to read that spelling, and produces:
//!
//! * the decoded bytes of every id in `[0, vocab_size)` ([`Vocabulary::token_bytes`]); ids past the
//!   tokenizer (`encoded.len() <= id < vocab_size`, the model's padded logits) decode to nothing;
//! * the stop tokens (ids that end generation; [`Vocabulary::stop_token_ids`]);
//! * the special tokens (ids grammar text can never produce: padding ids, empty tokens and the
//!   caller's special/added tokens such as `<|eot_id|>`; [`Vocabulary::is_special`]);
//! * the text tokens sorted by decoded bytes ([`Vocabulary::sorted_text_tokens`]), the order a token
//!   trie walk wants.
//!
//! Unlike XGrammar, an added token such as `<|im_start|>` never matches its literal text in a grammar
//! when the caller marks it special: the model means a control signal, not the characters.
//!
//! Serialization: [`Vocabulary::to_json`] writes every byte string as lowercase hex (two digits per
//! byte, `""` for the empty string), so non-UTF-8 tokens survive any JSON tool unchanged.

#![allow(clippy::doc_markdown)] // project names (XGrammar, SentencePiece) are prose here

use crate::error::{Error, ErrorKind, Result};
use crate::limits::MAX_TOKEN_BYTES;
use serde_json::{Map, Value};

/// Most ids a vocabulary may have (`vocab_size`, 4,194,304). Real models stay under 300k; the
/// bound keeps a hostile `vocab_size` from allocating large per-id tables (13 bytes per id here,
/// plus 4 bits per id in every bitmask row downstream).
pub const MAX_VOCAB_SIZE: usize = 1 << 22;

/// Token texts recognised as stop tokens when the caller gives no stop list (compared with both the
/// spelling and the decoded bytes of each token). `<|eom_id|>` (Llama 3.1) and `<|end|>` (Phi-3)
/// are also listed because their models' generation configs end turns with them.
pub const DETECTION_STOP_TOKENS: &[&str] = &[
    "</s>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<eos>",
    "<|eos|>",
    "<end_of_turn>",
    "<｜end▁of▁sentence｜>",
    "<|im_end|>",
    "<|end|>",
];

/// Format tag written by [`Vocabulary::to_json`] and checked by [`Vocabulary::from_json`].
const JSON_VERSION: &str = "grammask-vocab-1";

/// How the tokenizer spells token bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VocabType {
    /// The spelling is the bytes (tiktoken, Tekken native, tests).
    Raw = 0,
    /// SentencePiece style: `<0xHH>` is one byte, `▁` (U+2581) is a space.
    ByteFallback = 1,
    /// GPT-2 style: each char of the 256-char `bytes_to_unicode` alphabet is one byte.
    ByteLevel = 2,
}

impl VocabType {
    /// The type with XGrammar's integer code (`0`, `1`, `2`).
    #[must_use]
    pub fn from_code(code: u64) -> Option<VocabType> {
        match code {
            0 => Some(VocabType::Raw),
            1 => Some(VocabType::ByteFallback),
            2 => Some(VocabType::ByteLevel),
            _ => None,
        }
    }

    #[must_use]
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Construction options of a [`Vocabulary`]; the default is "infer everything".
#[derive(Clone, Debug, Default)]
pub struct VocabularyOptions {
    /// The model's logits width; may exceed `encoded.len()` (those ids are padding). Default:
    /// `encoded.len()`.
    pub vocab_size: Option<usize>,
    /// Ids that end generation. `None` detects them by text ([`DETECTION_STOP_TOKENS`]);
    /// `Some(vec![])` means "no stop token". Duplicates are dropped, order is kept.
    pub stop_token_ids: Option<Vec<u32>>,
    /// Extra ids that grammar text can never produce (added/control tokens).
    pub special_token_ids: Option<Vec<u32>>,
    /// The tokenizer prepends a space to the text it encodes (SentencePiece `▁` prefix).
    pub add_prefix_space: bool,
}

/// An immutable token table. `Send + Sync`; share it with `Arc`.
///
/// Invariants:
/// * `offsets.len() == vocab_size + 1`, and the decoded bytes of id `i` are
///   `bytes[offsets[i]..offsets[i + 1]]`; ids `>= encoded.len()` have empty bytes.
/// * `flags[i] & STOP != 0` iff `i` is in `stop_ids`; `flags[i] & SPECIAL != 0` iff `i` is special,
///   and never both (stop wins).
/// * `sorted_text` holds exactly the ids with neither flag, ordered by (decoded bytes, id).
#[derive(Clone, Debug)]
pub struct Vocabulary {
    vocab_type: VocabType,
    add_prefix_space: bool,
    vocab_size: usize,
    encoded: Vec<Vec<u8>>,
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    flags: Vec<u8>,
    stop_ids: Vec<u32>,
    sorted_text: Vec<u32>,
}

const STOP: u8 = 1;
const SPECIAL: u8 = 2;

impl Vocabulary {
    /// Bytes held: the tokens as spelled and decoded, and the per-token tables.
    pub fn memory_size(&self) -> usize {
        let encoded: usize = self.encoded.iter().map(|t| 24 + t.len()).sum();
        std::mem::size_of::<Self>()
            + encoded
            + self.bytes.len()
            + 8 * self.offsets.len()
            + self.flags.len()
            + 4 * (self.stop_ids.len() + self.sorted_text.len())
    }

    /// Builds the table. `encoded` are the tokens as the tokenizer spells them, as bytes (UTF-8 for
    /// byte-level and byte-fallback vocabularies).
    ///
    /// Errors: `LimitExceeded` for a token longer than [`MAX_TOKEN_BYTES`] or a vocabulary larger
    /// than [`MAX_VOCAB_SIZE`]; `InvalidArgument` for `vocab_size < encoded.len()` or a stop/special
    /// id `>= vocab_size`.
    pub fn new(encoded: Vec<Vec<u8>>, vocab_type: VocabType, options: VocabularyOptions) -> Result<Vocabulary> {
        let vocab_size = options.vocab_size.unwrap_or(encoded.len());
        if vocab_size > MAX_VOCAB_SIZE || encoded.len() > MAX_VOCAB_SIZE {
            return Err(Error::limit("vocabulary size", MAX_VOCAB_SIZE));
        }
        if vocab_size < encoded.len() {
            return Err(Error::invalid_argument(format!(
                "vocab_size {vocab_size} is smaller than the {} tokens given; pass the model's logits width \
                 (at least the tokenizer's size) or drop the extra tokens",
                encoded.len()
            )));
        }
        if let Some((id, tok)) = encoded.iter().enumerate().find(|(_, t)| t.len() > MAX_TOKEN_BYTES) {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!("token {id} is {} bytes long, more than the limit of {MAX_TOKEN_BYTES}", tok.len()),
            ));
        }
        let check_ids = |ids: &[u32], what: &str| -> Result<()> {
            match ids.iter().find(|&&id| id as usize >= vocab_size) {
                Some(id) => Err(Error::invalid_argument(format!(
                    "{what} id {id} is out of range for a vocabulary of {vocab_size} tokens"
                ))),
                None => Ok(()),
            }
        };
        if let Some(ids) = &options.stop_token_ids {
            check_ids(ids, "stop token")?;
        }
        if let Some(ids) = &options.special_token_ids {
            check_ids(ids, "special token")?;
        }

        let mut bytes = Vec::with_capacity(encoded.iter().map(Vec::len).sum());
        let mut offsets = Vec::with_capacity(vocab_size + 1);
        offsets.push(0);
        for tok in &encoded {
            decode_token(tok, vocab_type, &mut bytes);
            offsets.push(bytes.len());
        }
        offsets.resize(vocab_size + 1, bytes.len());

        let stop_ids = match options.stop_token_ids {
            Some(ids) => dedup_keep_order(ids),
            None => detect_stop_tokens(&encoded, &bytes, &offsets),
        };

        let mut flags = vec![0u8; vocab_size];
        for (id, flag) in flags.iter_mut().enumerate() {
            if offsets[id] == offsets[id + 1] {
                *flag = SPECIAL; // padding id or empty token
            }
        }
        for id in options.special_token_ids.unwrap_or_default() {
            flags[id as usize] = SPECIAL;
        }
        for &id in &stop_ids {
            flags[id as usize] = STOP;
        }

        let mut sorted_text: Vec<u32> = (0..vocab_size as u32).filter(|&id| flags[id as usize] == 0).collect();
        sorted_text.sort_unstable_by(|&a, &b| {
            let (a_bytes, b_bytes) = (
                &bytes[offsets[a as usize]..offsets[a as usize + 1]],
                &bytes[offsets[b as usize]..offsets[b as usize + 1]],
            );
            a_bytes.cmp(b_bytes).then(a.cmp(&b))
        });

        Ok(Vocabulary {
            vocab_type,
            add_prefix_space: options.add_prefix_space,
            vocab_size,
            encoded,
            bytes,
            offsets,
            flags,
            stop_ids,
            sorted_text,
        })
    }

    /// The model's logits width: every id in `[0, vocab_size)` is valid.
    #[must_use]
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    #[must_use]
    pub fn vocab_type(&self) -> VocabType {
        self.vocab_type
    }

    #[must_use]
    pub fn add_prefix_space(&self) -> bool {
        self.add_prefix_space
    }

    /// Number of tokens the tokenizer spelled (ids past it are padding).
    #[must_use]
    pub fn num_encoded(&self) -> usize {
        self.encoded.len()
    }

    /// The token as the tokenizer spells it; empty for padding ids.
    #[must_use]
    pub fn encoded_token(&self, id: u32) -> &[u8] {
        self.encoded.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The decoded bytes of every id below `vocab_size`, back to back, and their offsets: id `i`'s
    /// bytes are `bytes[offsets[i]..offsets[i + 1]]` (`offsets.len() == vocab_size + 1`).
    #[must_use]
    pub(crate) fn decoded_buffer(&self) -> (&[u8], &[usize]) {
        (&self.bytes[..self.offsets[self.vocab_size]], &self.offsets)
    }

    /// Decoded bytes of a token (what the model means); empty for padding ids and ids out of range.
    #[must_use]
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i >= self.vocab_size {
            return &[];
        }
        &self.bytes[self.offsets[i]..self.offsets[i + 1]]
    }

    /// True if grammar text can never produce this token: padding ids, empty tokens, special/added
    /// tokens. Stop tokens are not special (see [`Vocabulary::is_stop`]). Out-of-range ids are special.
    #[must_use]
    pub fn is_special(&self, id: u32) -> bool {
        self.flags.get(id as usize).copied().unwrap_or(SPECIAL) == SPECIAL
    }

    #[must_use]
    pub fn is_stop(&self, id: u32) -> bool {
        self.flags.get(id as usize).is_some_and(|&f| f == STOP)
    }

    /// Stop ids, duplicates removed, in the order given (or in id order when detected).
    #[must_use]
    pub fn stop_token_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// Special ids in increasing order (stop ids excluded).
    #[must_use]
    pub fn special_token_ids(&self) -> Vec<u32> {
        (0..self.vocab_size as u32).filter(|&id| self.flags[id as usize] == SPECIAL).collect()
    }

    /// Ids of tokens grammar text can produce (not special, not stop, non-empty), sorted by their
    /// decoded bytes (lexicographic), ties by id.
    #[must_use]
    pub fn sorted_text_tokens(&self) -> &[u32] {
        &self.sorted_text
    }

    /// Compact JSON `{"vocab_type":2,"vocab_size":128256,"add_prefix_space":false,"stop_token_ids":[128009]}`
    /// (this key order), XGrammar's `dump_metadata`.
    #[must_use]
    pub fn metadata_json(&self) -> String {
        let mut m = Map::new();
        self.write_metadata(&mut m);
        Value::Object(m).to_string()
    }

    fn write_metadata(&self, m: &mut Map<String, Value>) {
        m.insert("vocab_type".into(), Value::from(self.vocab_type.code()));
        m.insert("vocab_size".into(), Value::from(self.vocab_size));
        m.insert("add_prefix_space".into(), Value::from(self.add_prefix_space));
        m.insert("stop_token_ids".into(), Value::from(self.stop_ids.clone()));
    }

    /// Rebuilds a vocabulary from its tokens and [`Vocabulary::metadata_json`]. Special ids other
    /// than empty and padding ids are not part of the metadata. Errors: `InvalidJson` for text that
    /// is not JSON, `Deserialize` for a missing or mistyped field, and the errors of [`Vocabulary::new`].
    pub fn from_vocab_and_metadata(encoded: Vec<Vec<u8>>, metadata: &str) -> Result<Vocabulary> {
        let m = parse_object(metadata, "vocabulary metadata")?;
        let (vocab_type, options) = read_metadata(&m)?;
        Vocabulary::new(encoded, vocab_type, options)
    }

    /// Full serialization: the metadata keys, then `special_token_ids`, `decoded_vocab` and
    /// `encoded_vocab` (byte strings as lowercase hex), then `"__VERSION__"`.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut m = Map::new();
        self.write_metadata(&mut m);
        m.insert("special_token_ids".into(), Value::from(self.special_token_ids()));
        let decoded: Vec<Value> =
            (0..self.encoded.len() as u32).map(|id| Value::from(to_hex(self.token_bytes(id)))).collect();
        m.insert("decoded_vocab".into(), Value::Array(decoded));
        let encoded: Vec<Value> = self.encoded.iter().map(|t| Value::from(to_hex(t))).collect();
        m.insert("encoded_vocab".into(), Value::Array(encoded));
        m.insert("__VERSION__".into(), Value::from(JSON_VERSION));
        Value::Object(m).to_string()
    }

    /// Inverse of [`Vocabulary::to_json`]. `decoded_vocab` is recomputed from `encoded_vocab` and
    /// must agree with it.
    pub fn from_json(s: &str) -> Result<Vocabulary> {
        let m = parse_object(s, "serialized vocabulary")?;
        match m.get("__VERSION__") {
            Some(Value::String(v)) if v == JSON_VERSION => {}
            other => {
                return Err(deser(format!(
                    "serialized vocabulary has version {}, expected \"{JSON_VERSION}\"",
                    other.map_or_else(|| "(none)".to_string(), Value::to_string)
                )))
            }
        }
        let (vocab_type, mut options) = read_metadata(&m)?;
        options.special_token_ids = Some(read_ids(&m, "special_token_ids")?);
        let encoded = read_hex_list(&m, "encoded_vocab")?;
        let decoded = read_hex_list(&m, "decoded_vocab")?;
        let vocab = Vocabulary::new(encoded, vocab_type, options)?;
        let consistent = decoded.len() == vocab.encoded.len()
            && decoded.iter().enumerate().all(|(id, d)| vocab.token_bytes(id as u32) == d.as_slice());
        if !consistent {
            return Err(deser("serialized vocabulary: decoded_vocab does not match encoded_vocab".to_string()));
        }
        Ok(vocab)
    }
}

/// Appends the bytes `tok` means under `vocab_type` to `out`.
fn decode_token(tok: &[u8], vocab_type: VocabType, out: &mut Vec<u8>) {
    match vocab_type {
        VocabType::Raw => out.extend_from_slice(tok),
        VocabType::ByteFallback => {
            if let Some(b) = parse_byte_piece(tok) {
                out.push(b);
            } else {
                // Replace every U+2581 (E2 96 81) by a space; other bytes are kept as they are.
                let mut i = 0;
                while i < tok.len() {
                    if tok[i..].starts_with("\u{2581}".as_bytes()) {
                        out.push(b' ');
                        i += 3;
                    } else {
                        out.push(tok[i]);
                        i += 1;
                    }
                }
            }
        }
        VocabType::ByteLevel => {
            // As the Hugging Face ByteLevel decoder: if any char is outside the 256-char alphabet
            // (or the token is not UTF-8), the whole token is kept as it is spelled.
            let start = out.len();
            let ok = std::str::from_utf8(tok).is_ok_and(|s| {
                s.chars().all(|c| match byte_level_char_to_byte(c) {
                    Some(b) => {
                        out.push(b);
                        true
                    }
                    None => false,
                })
            });
            if !ok {
                out.truncate(start);
                out.extend_from_slice(tok);
            }
        }
    }
}

/// `<0xHH>` (hex digits in either case) -> the byte.
fn parse_byte_piece(tok: &[u8]) -> Option<u8> {
    if tok.len() != 6 || !tok.starts_with(b"<0x") || tok[5] != b'>' {
        return None;
    }
    let hex = |c: u8| (c as char).to_digit(16);
    Some((hex(tok[3])? * 16 + hex(tok[4])?) as u8)
}

/// True for the bytes GPT-2's `bytes_to_unicode` maps to the char with the same code point.
fn is_printable_byte(b: u32) -> bool {
    (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
}

/// Inverse of GPT-2's `bytes_to_unicode`: printable bytes are their own char; the other 68 bytes,
/// in increasing order, are U+0100, U+0101, ...
fn byte_level_char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if is_printable_byte(cp) {
        return Some(cp as u8);
    }
    if !(0x100..0x100 + 68).contains(&cp) {
        return None;
    }
    // The 68 non-printable bytes in order: 0x00..=0x20 (33), 0x7F..=0xA0 (34), 0xAD (1).
    let n = cp - 0x100;
    Some(match n {
        0..=32 => n as u8,
        33..=66 => (0x7F + n - 33) as u8,
        _ => 0xAD,
    })
}

/// Spells `bytes` in the byte-level alphabet (used by tests and by callers building vocabularies).
#[must_use]
pub fn byte_level_encode(bytes: &[u8]) -> String {
    let table: Vec<char> = {
        let mut t = vec!['\0'; 256];
        let mut n = 0;
        for b in 0u32..256 {
            t[b as usize] = if is_printable_byte(b) {
                char::from_u32(b).unwrap_or('\0')
            } else {
                n += 1;
                char::from_u32(0x100 + n - 1).unwrap_or('\0')
            };
        }
        t
    };
    bytes.iter().map(|&b| table[b as usize]).collect()
}

fn dedup_keep_order(ids: Vec<u32>) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    ids.into_iter().filter(|id| seen.insert(*id)).collect()
}

fn detect_stop_tokens(encoded: &[Vec<u8>], bytes: &[u8], offsets: &[usize]) -> Vec<u32> {
    let is_stop_text = |t: &[u8]| DETECTION_STOP_TOKENS.iter().any(|s| s.as_bytes() == t);
    (0..encoded.len())
        .filter(|&id| is_stop_text(&encoded[id]) || is_stop_text(&bytes[offsets[id]..offsets[id + 1]]))
        .map(|id| id as u32)
        .collect()
}

fn deser(message: String) -> Error {
    Error::new(ErrorKind::Deserialize, message)
}

fn parse_object(s: &str, what: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(deser(format!("{what} must be a JSON object"))),
        Err(e) => Err(Error::new(ErrorKind::InvalidJson, format!("{what} is not valid JSON: {e}"))),
    }
}

fn read_metadata(m: &Map<String, Value>) -> Result<(VocabType, VocabularyOptions)> {
    let vocab_type = match m.get("vocab_type").and_then(Value::as_u64) {
        Some(code) => VocabType::from_code(code).ok_or_else(|| deser(format!("vocab_type {code} is not 0, 1 or 2")))?,
        None => return Err(deser("vocabulary metadata needs \"vocab_type\" (0, 1 or 2)".into())),
    };
    let vocab_size = m
        .get("vocab_size")
        .and_then(Value::as_u64)
        .ok_or_else(|| deser("vocabulary metadata needs \"vocab_size\" (a non-negative integer)".into()))?;
    let vocab_size = usize::try_from(vocab_size).map_err(|_| Error::limit("vocabulary size", MAX_VOCAB_SIZE))?;
    let add_prefix_space = m
        .get("add_prefix_space")
        .and_then(Value::as_bool)
        .ok_or_else(|| deser("vocabulary metadata needs \"add_prefix_space\" (true or false)".into()))?;
    let stop = read_ids(m, "stop_token_ids")?;
    let options = VocabularyOptions {
        vocab_size: Some(vocab_size),
        stop_token_ids: Some(stop),
        special_token_ids: None,
        add_prefix_space,
    };
    Ok((vocab_type, options))
}

fn read_ids(m: &Map<String, Value>, key: &str) -> Result<Vec<u32>> {
    let arr =
        m.get(key).and_then(Value::as_array).ok_or_else(|| deser(format!("\"{key}\" must be a list of token ids")))?;
    arr.iter()
        .map(|v| {
            v.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| deser(format!("\"{key}\" holds {v}, which is not a token id")))
        })
        .collect()
}

fn read_hex_list(m: &Map<String, Value>, key: &str) -> Result<Vec<Vec<u8>>> {
    let arr = m
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| deser(format!("\"{key}\" must be a list of hex strings")))?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| v.as_str().and_then(from_hex).ok_or_else(|| deser(format!("\"{key}\"[{i}] is not a hex string"))))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if s.len() & 1 != 0 {
        return None;
    }
    let hex = |c: u8| (c as char).to_digit(16);
    s.chunks(2).map(|p| Some((hex(p[0])? * 16 + hex(p[1])?) as u8)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn byte_level_decoding() {
        let v = Vocabulary::new(
            toks(&["Ġhello", "ĊĠĠ", "ÿ", "a", "<｜end▁of▁sentence｜>", "Ġ｜"]),
            VocabType::ByteLevel,
            VocabularyOptions::default(),
        )
        .unwrap();
        assert_eq!(v.token_bytes(0), b" hello");
        assert_eq!(v.token_bytes(1), b"\n  ");
        assert_eq!(v.token_bytes(2), b"\xff");
        assert_eq!(v.token_bytes(3), b"a");
        assert_eq!(v.token_bytes(4), "<｜end▁of▁sentence｜>".as_bytes());
        // A char outside the alphabet keeps the whole token as spelled (Hugging Face's decoder).
        assert_eq!(v.token_bytes(5), "Ġ｜".as_bytes());
        assert_eq!(v.stop_token_ids(), &[4]);
    }

    #[test]
    fn byte_level_alphabet_round_trip() {
        let all: Vec<u8> = (0u8..=255).collect();
        let spelled = byte_level_encode(&all);
        assert_eq!(spelled.chars().count(), 256);
        assert_eq!(byte_level_encode(b" \n\t"), "ĠĊĉ");
        let v =
            Vocabulary::new(vec![spelled.into_bytes()], VocabType::ByteLevel, VocabularyOptions::default()).unwrap();
        assert_eq!(v.token_bytes(0), all.as_slice());
    }

    #[test]
    fn byte_fallback_decoding() {
        let v = Vocabulary::new(
            toks(&["<0x0A>", "<0xE2>", "▁hello", "<0xzz>", "a▁▁b", "<0x0a>", "<s>", "</s>"]),
            VocabType::ByteFallback,
            VocabularyOptions::default(),
        )
        .unwrap();
        assert_eq!(v.token_bytes(0), b"\n");
        assert_eq!(v.token_bytes(1), b"\xe2");
        assert_eq!(v.token_bytes(2), b" hello");
        assert_eq!(v.token_bytes(3), b"<0xzz>");
        assert_eq!(v.token_bytes(4), b"a  b");
        assert_eq!(v.token_bytes(5), b"\n");
        assert_eq!(v.stop_token_ids(), &[7]);
    }

    #[test]
    fn raw_decoding_keeps_bytes() {
        let v = Vocabulary::new(
            vec![b"\xff\xfe".to_vec(), b"\xe2\x96\x81x".to_vec()],
            VocabType::Raw,
            VocabularyOptions::default(),
        )
        .unwrap();
        assert_eq!(v.token_bytes(0), b"\xff\xfe");
        assert_eq!(v.token_bytes(1), b"\xe2\x96\x81x");
    }

    #[test]
    fn padding_special_stop_and_sorted_text() {
        let opts = VocabularyOptions {
            vocab_size: Some(8),
            stop_token_ids: Some(vec![4, 4]),
            special_token_ids: Some(vec![3, 4]),
            add_prefix_space: true,
        };
        let v =
            Vocabulary::new(toks(&["b", "a", "", "<|im_start|>", "<|im_end|>", "ab"]), VocabType::Raw, opts).unwrap();
        assert_eq!(v.vocab_size(), 8);
        assert!(v.add_prefix_space());
        assert_eq!(v.stop_token_ids(), &[4]);
        assert!(v.is_stop(4) && !v.is_special(4));
        assert_eq!(v.special_token_ids(), vec![2, 3, 6, 7]);
        assert!(v.is_special(6) && v.is_special(100) && !v.is_stop(100));
        assert_eq!(v.token_bytes(7), b"");
        assert_eq!(v.token_bytes(3), b"<|im_start|>");
        assert_eq!(v.sorted_text_tokens(), &[1, 5, 0]);
    }

    #[test]
    fn sorted_ties_by_id() {
        let v = Vocabulary::new(
            toks(&["x", "▁", " ", "<0x20>"]),
            VocabType::ByteFallback,
            VocabularyOptions { stop_token_ids: Some(vec![]), ..Default::default() },
        )
        .unwrap();
        assert_eq!(v.sorted_text_tokens(), &[1, 2, 3, 0]);
        assert!(v.stop_token_ids().is_empty());
    }

    #[test]
    fn detects_several_stop_tokens() {
        let v = Vocabulary::new(
            toks(&["<|end_of_text|>", "x", "<|eot_id|>", "<|eom_id|>", "<|im_end|>"]),
            VocabType::ByteLevel,
            VocabularyOptions::default(),
        )
        .unwrap();
        assert_eq!(v.stop_token_ids(), &[0, 2, 3, 4]);
        assert_eq!(v.sorted_text_tokens(), &[1]);
    }

    #[test]
    fn errors() {
        let err = Vocabulary::new(vec![vec![b'a'; MAX_TOKEN_BYTES + 1]], VocabType::Raw, VocabularyOptions::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        let err = Vocabulary::new(
            toks(&["a", "b"]),
            VocabType::Raw,
            VocabularyOptions { vocab_size: Some(1), ..Default::default() },
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        let err = Vocabulary::new(
            toks(&["a", "b"]),
            VocabType::Raw,
            VocabularyOptions { stop_token_ids: Some(vec![2]), ..Default::default() },
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("stop token id 2"), "{err}");
        let err = Vocabulary::new(
            toks(&["a", "b"]),
            VocabType::Raw,
            VocabularyOptions { vocab_size: Some(3), special_token_ids: Some(vec![3]), ..Default::default() },
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        let err = Vocabulary::new(
            vec![],
            VocabType::Raw,
            VocabularyOptions { vocab_size: Some(MAX_VOCAB_SIZE + 1), ..Default::default() },
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        // A padding id may be a stop token (in range), but a special id out of range may not.
        let v = Vocabulary::new(
            toks(&["a"]),
            VocabType::Raw,
            VocabularyOptions { vocab_size: Some(3), stop_token_ids: Some(vec![2]), ..Default::default() },
        )
        .unwrap();
        assert!(v.is_stop(2));
    }

    #[test]
    fn metadata_round_trip() {
        let opts = VocabularyOptions {
            vocab_size: Some(5),
            stop_token_ids: Some(vec![2, 0]),
            special_token_ids: None,
            add_prefix_space: true,
        };
        let v = Vocabulary::new(toks(&["Ġa", "b", "c"]), VocabType::ByteLevel, opts).unwrap();
        let meta = v.metadata_json();
        assert_eq!(meta, r#"{"vocab_type":2,"vocab_size":5,"add_prefix_space":true,"stop_token_ids":[2,0]}"#);
        let w = Vocabulary::from_vocab_and_metadata(toks(&["Ġa", "b", "c"]), &meta).unwrap();
        assert_eq!(w.metadata_json(), meta);
        assert_eq!(w.token_bytes(0), b" a");
        assert_eq!(Vocabulary::from_vocab_and_metadata(vec![], "{").unwrap_err().kind(), ErrorKind::InvalidJson);
        for bad in [
            r#"{"vocab_type":3,"vocab_size":5,"add_prefix_space":true,"stop_token_ids":[]}"#,
            r#"{"vocab_size":5,"add_prefix_space":true,"stop_token_ids":[]}"#,
            r#"{"vocab_type":0,"vocab_size":-1,"add_prefix_space":true,"stop_token_ids":[]}"#,
            r#"{"vocab_type":0,"vocab_size":5,"add_prefix_space":1,"stop_token_ids":[]}"#,
            r#"{"vocab_type":0,"vocab_size":5,"add_prefix_space":true,"stop_token_ids":["a"]}"#,
            "[]",
        ] {
            assert_eq!(
                Vocabulary::from_vocab_and_metadata(toks(&["a"]), bad).unwrap_err().kind(),
                ErrorKind::Deserialize,
                "{bad}"
            );
        }
        let err = Vocabulary::from_vocab_and_metadata(
            toks(&["a"]),
            r#"{"vocab_type":0,"vocab_size":5,"add_prefix_space":true,"stop_token_ids":[7]}"#,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn json_round_trip() {
        let opts = VocabularyOptions {
            vocab_size: Some(7),
            stop_token_ids: Some(vec![3]),
            special_token_ids: Some(vec![1, 3]),
            add_prefix_space: false,
        };
        let v = Vocabulary::new(
            vec![b"\xff".to_vec(), b"<x>".to_vec(), vec![], b"<0x0A>".to_vec(), "▁z".as_bytes().to_vec()],
            VocabType::ByteFallback,
            opts,
        )
        .unwrap();
        let s = v.to_json();
        assert!(s.starts_with(r#"{"vocab_type":1,"vocab_size":7,"add_prefix_space":false,"stop_token_ids":[3],"special_token_ids":[1,2,5,6],"decoded_vocab":["ff","3c783e","","0a","207a"]"#), "{s}");
        let w = Vocabulary::from_json(&s).unwrap();
        assert_eq!(w.to_json(), s);
        assert_eq!(w.sorted_text_tokens(), v.sorted_text_tokens());
        assert_eq!(w.special_token_ids(), v.special_token_ids());
        let tampered = s.replace("\"207a\"", "\"207b\"");
        assert_eq!(Vocabulary::from_json(&tampered).unwrap_err().kind(), ErrorKind::Deserialize);
        let wrong_version = s.replace(JSON_VERSION, "v0");
        assert_eq!(Vocabulary::from_json(&wrong_version).unwrap_err().kind(), ErrorKind::Deserialize);
        let bad_hex = s.replace("\"3c783e\"", "\"3c7\"");
        assert_eq!(Vocabulary::from_json(&bad_hex).unwrap_err().kind(), ErrorKind::Deserialize);
    }

    #[test]
    fn vocabulary_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Vocabulary>();
    }
}
