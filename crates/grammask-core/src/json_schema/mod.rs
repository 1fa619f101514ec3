//! JSON Schema to grammar: the front end that turns a schema document (text) into EBNF in
//! XGrammar's dialect with root rule `root`.
//!
//! Pipeline: [`resolve`] indexes the document (draft, `$id`, anchors, `$ref`); [`compile`] turns
//! conjunctions of subschemas into rules (one rule per distinct conjunction, so references and
//! recursion are rules), using [`numeric`] for number ranges and `multipleOf`, [`jstr`] for the
//! JSON spellings of strings and keys, [`formats`] plus the regex toolkit (`crate::regex`) for
//! `pattern`, `format` and key languages, and [`emit`] for output.
//!
//! Principles: every keyword that is accepted is enforced exactly on the decoded JSON value, for
//! every spelling of that value that the grammar's layout and [`Spelling`] allow (with
//! [`Spelling::Any`]: escapes in strings and keys, `1.0` for integers; in the default
//! [`Spelling::Canonical`], the spellings serializers write, see [`crate::spelling`]; any key order
//! for `const` objects); a keyword that cannot be enforced exactly
//! is an `Unsupported` error naming its JSON pointer; invalid or unsatisfiable schemas are
//! `InvalidSchema`; text that is not JSON is `InvalidJson`.
//!
//! Documented restrictions (refusals, never silent acceptance):
//! - Key order: with `strict_mode=false` or `any_order=true`, an object's keys come in any order,
//!   each at most once (states track the set of listed keys seen, up to
//!   [`compile::MAX_ANY_ORDER_STATES`], or [`compile::MAX_LARGE_ANY_ORDER_STATES`] while the
//!   schema's [`compile::ANY_ORDER_KEY_BUDGET`] lasts); additional keys may appear anywhere. Beyond that bound,
//!   `strict_mode=false` falls back to schema order (known properties first, in schema order, then
//!   additional ones: valid instances in other orders are rejected) and `any_order=true` is an
//!   `Unsupported` error. `strict_mode=true` alone keeps XGrammar's schema order.
//! - `dependentRequired` (and array-valued `dependencies`) needs free key order (not
//!   `strict_mode=true` alone); past the key-set bound, under the schema-order fallback, the
//!   presence of the keys it names (at most [`compile::MAX_DEP_TRACKED_KEYS`]) is tracked along
//!   the chain; `dependentSchemas` is refused.
//! - Numbers, canonical spelling: integers are `-?[1-9][0-9]*` or `0` (at most 308 digits when
//!   unbounded, so finite as float64); unbounded numbers as in [`crate::spelling`]; bounded
//!   numbers and `multipleOf` take plain decimal spellings (no exponent; a one-sided range is
//!   capped at 10^308 in magnitude for integers); `enum`/`const` numbers take their shortest decimal
//!   spelling (integer values also with `.0`).
//! - Numbers, [`Spelling::Any`]: `integer` takes `-?int(.0+)?` and, when unbounded,
//!   `-?int(.0+)?[eE]+?digits`; bounded numbers and `multipleOf` take plain decimal spellings only
//!   (no exponent); `enum`/`const` numbers take their decimal spelling with optional trailing zeros.
//! - `format` asserts in every draft by default (`format_assertion=false`: an annotation in every
//!   draft). Unknown `format` values are ignored; known formats without a regular definition here
//!   are refused.
//! - `indent` layouts are generated to a nesting depth of [`compile::MAX_INDENT_DEPTH`].
//! - `strict_mode=true`: an object whose schemas list `properties` and say nothing about
//!   additional properties is closed; `prefixItems` (or an `items` array) without `items`
//!   (`additionalItems`) closes the array.
use crate::error::{Error, ErrorKind, Result};
pub use crate::spelling::Spelling;

mod compile;
mod emit;
mod fixed_rules;
mod formats;
mod jstr;
mod key_sets;
// Lint fixes in this file wait for its concurrent rework.
#[allow(clippy::collapsible_if)]
mod numeric;
mod resolve;
#[cfg(test)]
mod tests;
mod value;

/// Output-shape options, mirroring `Grammar.from_json_schema`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(clippy::struct_excessive_bools)] // independent switches mirroring the Python keyword arguments
pub struct JsonSchemaOptions {
    pub any_whitespace: bool,
    pub indent: Option<u32>,
    pub separators: Option<(String, String)>,
    pub strict_mode: bool,
    /// Bound on whitespace runs; `None`: the spelling's default ([`Spelling::whitespace_bound`]).
    pub max_whitespace_cnt: Option<u32>,
    pub any_order: bool,
    /// Which spellings of each value are admitted (default canonical, see [`crate::spelling`]).
    pub spelling: Spelling,
    /// `format` is an assertion in every draft (default); `false`: an annotation in every draft.
    pub format_assertion: bool,
    /// Documents that references may name besides the schema itself: (URI, JSON text), sorted by
    /// URI. A reference whose document (URI without fragment) is not here, nor an `$id` of the
    /// schema, is refused; nothing is fetched.
    pub schema_registry: Vec<(String, String)>,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            any_whitespace: true,
            indent: None,
            separators: None,
            strict_mode: true,
            max_whitespace_cnt: None,
            any_order: false,
            spelling: Spelling::Canonical,
            format_assertion: true,
            schema_registry: Vec::new(),
        }
    }
}

/// Converts a JSON Schema document (text) into EBNF whose root rule is `root`.
pub fn json_schema_to_ebnf(schema: &str, options: &JsonSchemaOptions) -> Result<String> {
    json_schema_to_ebnf_parts(schema, options, false).map(|p| p.0)
}

/// [`json_schema_to_ebnf`], with the rules that match every string body but some words; with
/// `direct`, the any-order key-set rules and the key tries are left out of the text and returned
/// apart.
fn json_schema_to_ebnf_parts(
    schema: &str,
    options: &JsonSchemaOptions,
    direct: bool,
) -> Result<(String, emit::ExcludedNames, emit::Apart)> {
    if schema.len() > crate::limits::MAX_GRAMMAR_BYTES {
        return Err(Error::limit("schema size in bytes", crate::limits::MAX_GRAMMAR_BYTES));
    }
    let value: serde_json::Value = serde_json::from_str(schema)
        .map_err(|e| Error::new(ErrorKind::InvalidJson, format!("schema is not valid JSON: {e}")))?;
    let registry_bytes: usize = options.schema_registry.iter().map(|(_, t)| t.len()).sum();
    if schema.len() + registry_bytes > crate::limits::MAX_GRAMMAR_BYTES {
        return Err(Error::limit("schema and registry size in bytes", crate::limits::MAX_GRAMMAR_BYTES));
    }
    let mut documents = Vec::with_capacity(options.schema_registry.len());
    for (uri, text) in &options.schema_registry {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::new(ErrorKind::InvalidJson, format!("schema registry document {uri:?} is not valid JSON: {e}"))
        })?;
        documents.push((resolve::registry_key(uri).to_string(), v));
    }
    let registry = documents.iter().map(|(u, v)| (u.clone(), v)).collect();
    let mut doc = resolve::Doc::with_registry(&value, registry)?;
    // `format` asserts in every draft unless the caller asks for annotation semantics.
    doc.format_assertion = options.format_assertion;
    let mut conv = compile::Conv::new(doc, options);
    conv.direct_key_sets(direct);
    conv.run()
}

/// The name ending of an open object's entry rule whose keys are one automaton for all parts
/// (`compile/objects.rs`); no other rule name ends so (the converter's fresh names hold no `.`).
const SPLIT_KEYS_SUFFIX: &str = ".keys";

/// Converts a JSON Schema document (text) into a [`Grammar`](crate::grammar::Grammar) whose root
/// rule is `root` (through [`json_schema_to_ebnf`]).
pub fn json_schema_to_grammar(schema: &str, options: &JsonSchemaOptions) -> Result<crate::grammar::Grammar> {
    let (text, excluded, apart) = json_schema_to_ebnf_parts(schema, options, true)?;
    // The same grammar as parsing `json_schema_to_ebnf`'s text (`key_sets.rs`,
    // `jstr::build_tries`, `fixed_rules.rs`); the arena is reserved for the rules kept apart too.
    let mut key_set_count = 0;
    let (g, mut key_set_rules) = crate::ebnf::parse_ebnf_with(&text, "root", apart.bytes, |b| {
        let mut ids = key_sets::build(&apart.key_sets, b)?;
        key_set_count = ids.len();
        ids.extend(jstr::build_tries(&apart.key_tries, b)?);
        ids.extend(fixed_rules::build(&apart.fixed, b)?);
        Ok(ids)
    })?;
    // The grammar's ids of the key-set rules (a builder's ids are not the grammar's).
    key_set_rules.truncate(key_set_count);
    // The shared `\u`-escape rule of counted strings stays a rule: each position calls it; so
    // do an open object's joined keys (one automaton for all the object's key positions), and
    // the key-set rules past each object's start: none is copied into another, so each has
    // the automaton `KeySetObject::automaton_states` counts where no entry is inlined into it
    // (docs/architecture.md, "Key-set rules built on first prediction: design", step 2). The
    // start `R(0,0,false)` is left to the inline plan (copied into its object's body where
    // small): every entry into the object predicts it, so it is built with the body.
    // PERF: kept, a lead walking into a tree of literal-lead objects (MaskBench o3626's
    // `ws any_3` after `"not":`) stepped each object's start as a call in every row past `{`:
    // its slowest fill 17.0 -> 21.4 M instructions.
    let starts = apart.key_sets.iter().flat_map(|o| &o.states).map(key_sets::KeyState::is_start);
    let key_set_kept = key_set_rules.iter().zip(starts).filter(|&(_, start)| !start).map(|(&r, _)| r);
    let kept = (g.rules().iter().enumerate())
        .filter(|(_, r)| r.name == jstr::U_ESCAPE_RULE || r.name.ends_with(SPLIT_KEYS_SUFFIX))
        .map(|(i, _)| crate::grammar::RuleId(i as u32))
        .chain(key_set_kept)
        .collect();
    let g = g.with_kept(kept);
    // Key-set rules are each a class of their own for the equal-rule merging (a hint, see
    // `Grammar::with_own_class`).
    let g = g.with_own_class(key_set_rules);
    if excluded.rules.is_empty() {
        return Ok(g);
    }
    // One name index (a schema may exclude words in thousands of rules: a scan per name is
    // quadratic).
    let ids: crate::fasthash::FastMap<&str, crate::grammar::RuleId> =
        g.rules().iter().enumerate().rev().map(|(i, r)| (r.name.as_str(), crate::grammar::RuleId(i as u32))).collect();
    let id = |n: &str| ids.get(n).copied();
    let Some(any) = excluded.any.as_deref().and_then(id) else { return Ok(g) };
    // By name, as written by the converter (the parser keeps every rule and its name).
    let rules = excluded.rules.into_iter().filter_map(|(n, w)| Some((id(&n)?, w))).collect();
    Ok(g.with_excluded_words(crate::grammar::ExcludedWords { any, rules }))
}
