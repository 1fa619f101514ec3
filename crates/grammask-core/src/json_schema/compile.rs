//! The converter proper. A [`Goal`] is a conjunction of subschemas (plus negated subschemas and
//! atomic negations) at a layout depth; each distinct goal becomes one EBNF rule, so `$ref`
//! recursion, `allOf` and sibling keywords are intersections of goals, and cycles close through the
//! memo. Goals are emitted from a worklist (no recursion over the schema).
//!
//! Emitting a goal: merge its schemas' keywords ([`Merged`]); if an applicator is pending
//! (`anyOf`, `oneOf`, `not`, `if`), distribute it into alternative goals; otherwise write the
//! per-type grammars (null, boolean, number, string, array, object) restricted by the merged
//! keywords, or the finite list of `enum`/`const` values that pass a validator for the goal.
//!
//! This file holds the goal types and the driver; the methods of [`Conv`] live by concern in
//! `compile/`: `merge.rs` (keywords into [`Merged`]), `goals.rs` (applicators, negation),
//! `scalars.rs` (per-type dispatch, numbers, strings), `arrays.rs`, `objects.rs`, `layout.rs`
//! (separators and indentation), `values.rs` (spelling `enum`/`const` values) and `validator.rs`.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::Value;

use super::emit::{self, Ebnf};
use super::formats;
use super::jstr;
use super::numeric::{self, Dec, SInt};
use super::resolve::{Doc, Draft, SchemaId};
use super::value::{canonical, json_eq};
use super::{JsonSchemaOptions, Spelling};
use crate::error::{Error, ErrorKind, Result};
use crate::fasthash::{FastMap, FastState};
use crate::limits::{MAX_NESTING, MAX_REPEAT_BOUND};
use crate::regex::{Anchoring, CharDfa, Regex, RegexFlags, TextMode};

// The converter's methods, by concern (one `impl Conv` block per file).
mod arrays;
mod goals;
mod layout;
mod merge;
mod objects;
mod scalars;
mod validator;
mod values;

pub const NULL: u8 = 1;
pub const BOOL: u8 = 2;
pub const INT: u8 = 4;
/// Non-integer numbers.
pub const FRAC: u8 = 8;
pub const STR: u8 = 16;
pub const ARR: u8 = 32;
pub const OBJ: u8 = 64;
pub const ALL: u8 = 127;

/// Most goals (rules for distinct schema conjunctions) in one conversion.
pub const MAX_GOALS: usize = 20_000;
/// Deepest layout nesting expanded in `indent` mode; deeper containers are not generated.
pub const MAX_INDENT_DEPTH: u32 = 24;
/// Most keys of an object `const`/`enum` value (all key orders are spelled).
pub const MAX_CONST_OBJECT_KEYS: usize = 5;
/// Most states (key set seen x property count) of an object whose keys always come in any order.
pub const MAX_ANY_ORDER_STATES: u64 = 256;
/// Most states of one larger any-order object (past [`MAX_ANY_ORDER_STATES`]); such objects
/// take any key order while their cost, summed over the schema, fits [`ANY_ORDER_KEY_BUDGET`].
pub const MAX_LARGE_ANY_ORDER_STATES: u64 = 4096;
/// Most cost spent on larger any-order objects in one conversion (first come, first served in
/// emission order; later large objects fall back as past the bound). An object's cost is its
/// states times half the bytes of its keys (each plus 4): the key entries a state offers are
/// copied into its automaton, and the automata of a grammar share one state limit.
pub const ANY_ORDER_KEY_BUDGET: u64 = 300_000;
/// `dependentRequired` past [`MAX_ANY_ORDER_STATES`] (strict_mode=false): keys come in schema
/// order and the presence of at most this many dependency-named keys is tracked along the chain.
pub const MAX_DEP_TRACKED_KEYS: u32 = 10;
/// Most branches of a negated `oneOf` (its negation lists every pair of branches).
pub const MAX_NEGATED_ONEOF_BRANCHES: usize = 8;
/// Most distinct item values of a `uniqueItems` array (its rules track subsets of them).
pub const MAX_UNIQUE_VALUES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    AnyOf,
    OneOf,
    Not,
    If,
    /// The i-th schema-valued dependency of the node (see [`Conv::dep_schemas`]).
    Dep(u32),
}

/// An atomic negation carried by a goal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Neg {
    /// The instance is not of these types.
    Types(u8),
    /// The instance equals none of these values (canonical texts).
    Values(Vec<String>),
    /// The instance is an object without this key.
    Absent(String),
    /// The instance is a number below this value (`true`: or equal to it).
    Below(Dec, bool),
    /// The instance is a number above this value (`true`: or equal to it).
    Above(Dec, bool),
    /// The instance is a string of at most this many characters.
    ShortStr(u64),
    /// The instance is a string of at least this many characters.
    LongStr(u64),
    /// The instance is a string that does not match this pattern.
    NoMatch(String),
    /// The instance is a string that is not of this format.
    NoFormat(String),
    /// The instance is an object with this key (the negation of [`Neg::Absent`]).
    Has(String),
    /// The instance is an object with this key whose value fails this subschema (the negation
    /// of a `properties` entry).
    PropFails(String, SchemaId),
    /// The instance is an array of at most this many items.
    FewItems(u64),
    /// The instance is an array of at least this many items.
    ManyItems(u64),
    /// The instance is an array with an item that fails this subschema (the negation of
    /// `items`).
    ItemFails(SchemaId),
    /// The instance is an array none of whose items satisfies this subschema (the negation of
    /// `contains`).
    NoItemIs(SchemaId),
}

/// Keeps the tighter of two lower (or, with `upper`, upper) bounds; `strict` excludes the bound.
fn tighten(slot: &mut Option<(Dec, bool)>, d: Dec, strict: bool, upper: bool) {
    let tighter = match slot {
        None => true,
        Some((o, os)) => (if upper { d < *o } else { d > *o }) || (d == *o && strict && !*os),
    };
    if tighter {
        *slot = Some((d, strict));
    }
}

/// A conjunction to emit. Invariant: all vectors sorted and deduplicated (see [`Goal::norm`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Goal {
    ids: Vec<SchemaId>,
    /// Subschemas the instance must not satisfy.
    nots: Vec<SchemaId>,
    /// Applicators already distributed.
    done: Vec<(SchemaId, Kind)>,
    neg: Vec<Neg>,
    depth: u32,
}

impl Goal {
    fn norm(mut self) -> Goal {
        self.ids.sort_unstable();
        self.ids.dedup();
        self.nots.sort_unstable();
        self.nots.dedup();
        self.done.sort_unstable();
        self.done.dedup();
        self.neg.sort();
        self.neg.dedup();
        self
    }
    fn with_id(&self, id: SchemaId) -> Goal {
        let mut g = self.clone();
        g.ids.push(id);
        g
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rest {
    Any,
    Closed,
    Schema(SchemaId),
}

#[derive(Debug)]
struct ArrPart {
    prefix: Vec<SchemaId>,
    rest: Rest,
}

#[derive(Debug)]
struct ObjPart<'a> {
    /// Listed property names, borrowed from the schema (PERF: a copy per name and merge was
    /// most of saucectl's allocations).
    props: Vec<(&'a str, SchemaId)>,
    patterns: Vec<(String, SchemaId, String)>,
    additional: Rest,
    says_additional: bool,
}

/// The keywords of a goal's schemas, merged. Type-specific constraints restrict only their type.
#[derive(Debug)]
struct Merged<'a> {
    types: u8,
    enums: Option<Vec<Value>>,
    not_values: Vec<Value>,
    lo: Option<(Dec, bool)>,
    hi: Option<(Dec, bool)>,
    mults: Vec<(Dec, String)>,
    min_len: u64,
    max_len: Option<u64>,
    patterns: Vec<(String, String)>,
    formats: Vec<(String, String)>,
    /// Patterns and formats the string must not match (from negations).
    neg_patterns: Vec<String>,
    neg_formats: Vec<String>,
    /// Keys whose value must fail a subschema (from negated `properties`).
    prop_nots: Vec<(String, SchemaId)>,
    arr: Vec<ArrPart>,
    min_items: u64,
    max_items: Option<u64>,
    contains: Vec<(SchemaId, u64, Option<u64>, String)>,
    /// Subschemas some item must fail (from negated `items`).
    item_nots: Vec<SchemaId>,
    /// Subschemas every item must fail (from negated `contains`).
    all_item_nots: Vec<SchemaId>,
    unique: Option<String>,
    obj: Vec<ObjPart<'a>>,
    required: Vec<String>,
    absent: Vec<String>,
    min_props: u64,
    max_props: Option<u64>,
    prop_names: Vec<(SchemaId, String)>,
    /// `dependentRequired` (and array-valued `dependencies`): if the key is present, so are these.
    dep_req: Vec<(String, Vec<String>, String)>,
    pending: Vec<(SchemaId, Kind, String)>,
}

/// The schemas one merge has visited, kept in [`Conv`] and reused across merges (PERF: a
/// `HashSet<SchemaId>` per merge was 159 M instructions of saucectl's 1,034.6 M conversion).
/// Invariant: `id` is in the set iff `stamp[id] == generation`; `clear` bumps the generation,
/// and `len` counts the ids inserted since.
#[derive(Default)]
struct SeenSet {
    stamp: Vec<u32>,
    generation: u32,
    len: usize,
}

impl SeenSet {
    fn clear(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: stale stamps could equal the new generation.
            self.stamp.fill(0);
            self.generation = 1;
        }
        self.len = 0;
    }

    /// Adds `id`; whether it was absent.
    fn insert(&mut self, id: SchemaId) -> bool {
        let i = id.0 as usize;
        if i >= self.stamp.len() {
            self.stamp.resize(i + 1, 0);
        }
        if self.stamp[i] == self.generation {
            return false;
        }
        self.stamp[i] = self.generation;
        self.len += 1;
        true
    }

    fn contains(&self, id: SchemaId) -> bool {
        self.stamp.get(id.0 as usize) == Some(&self.generation)
    }
}

/// Adds `ptr` to an error that has no location yet.
fn ptr_if_none(e: Error, ptr: &str) -> Error {
    if e.location().is_none() {
        e.at_pointer(ptr)
    } else {
        e
    }
}

fn unsupported(ptr: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, msg).at_pointer(ptr)
}

fn invalid(ptr: &str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidSchema, msg).at_pointer(ptr)
}

/// `ptr` gives the keyword's JSON pointer, formatted only for an error (the helpers below alike).
fn type_bits(name: &str, ptr: &dyn Fn() -> String) -> Result<u8> {
    Ok(match name {
        "null" => NULL,
        "boolean" => BOOL,
        "integer" => INT,
        "number" => INT | FRAC,
        "string" => STR,
        "array" => ARR,
        "object" => OBJ,
        other => return Err(invalid(&ptr(), format!("unknown type {other:?}"))),
    })
}

fn value_type(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOL,
        Value::Number(n) => match Dec::from_number(n) {
            Some(d) if d.is_integer() => INT,
            _ => FRAC,
        },
        Value::String(_) => STR,
        Value::Array(_) => ARR,
        Value::Object(_) => OBJ,
    }
}

fn as_count(v: &Value, ptr: &dyn Fn() -> String) -> Result<u64> {
    match v.as_u64() {
        Some(n) => Ok(n),
        None => match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e18 => Ok(f as u64),
            _ => Err(invalid(&ptr(), "expected a non-negative integer")),
        },
    }
}

fn as_dec(v: &Value, ptr: &dyn Fn() -> String) -> Result<Dec> {
    match v {
        Value::Number(n) => Dec::from_number(n).ok_or_else(|| invalid(&ptr(), "number out of range")),
        _ => Err(invalid(&ptr(), "expected a number")),
    }
}

pub struct Conv<'a> {
    doc: Doc<'a>,
    opts: &'a JsonSchemaOptions,
    e: Ebnf,
    /// Looked up for every subschema conjunction met (fast hash: see `Ebnf::bodies`).
    memo: FastMap<Goal, String>,
    /// Goals to emit, with their rule name and merged keywords (computed once, by `rule_for`).
    queue: Vec<(Goal, String, Rc<Merged<'a>>)>,
    char_rule: String,
    nothing: Option<String>,
    ws: String,
    /// Some subschema uses `unevaluated*`: `if` without `then`/`else` then matters (annotations).
    has_uneval: bool,
    /// Cost spent so far on objects past [`MAX_ANY_ORDER_STATES`] (see [`ANY_ORDER_KEY_BUDGET`]).
    large_any_order_cost: u64,
    /// Key-set rules go to `Ebnf::key_sets`, not the text (`super::key_sets`).
    direct_key_sets: bool,
    /// The canonical texts of each long `enum` array of the schema, by the array's address (the
    /// schema is borrowed for `'a`, so an address names one array): membership in O(1).
    enum_sets: FastMap<usize, HashSet<String, FastState>>,
    /// The string automata built so far, by their constraints (see `emit_string`); `None`:
    /// the constraints other than the length accept every string.
    string_dfas: FastMap<StringKey, Option<CharDfa>>,
    /// patternProperties automata (search anchoring) built so far, by pattern.
    pattern_dfas: FastMap<String, Rc<CharDfa>>,
    /// Additional-key languages built so far (see `additional_entry`).
    key_langs: FastMap<KeyLangsKey, Rc<Vec<Option<CharDfa>>>>,
    /// The base name of the first any-order object written with each key-set language (see
    /// `object_any_order`): a later equal object names its rules instead of writing its own.
    any_order_objects: FastMap<AnyOrderKey, String>,
    /// The schemas of the merge in progress (merges do not nest: `merge_uncached` calls no
    /// merge).
    merge_seen: SeenSet,
    /// The merges of single schemas done so far (see [`Conv::merge`]); valid while
    /// `doc.version` is `merges_version`.
    single_merges: FastMap<SchemaId, Rc<Merged<'a>>>,
    merges_version: u32,
    /// The body `emit_string` last returned for a string automaton, with that automaton: a goal
    /// whose whole body it is reads exactly the strings of the automaton (see `StringChoices`).
    last_string: Option<(String, usize)>,
    /// The alternatives of the `anyOf` / `oneOf` body `emit_goal` last returned.
    last_choice: Option<Vec<String>>,
    /// The string automata `emit_string` wrote, with their rule prefix: printed at the end of
    /// the conversion, but those of the branches a union took in alone (see `StringChoices`).
    string_texts: Vec<(String, CharDfa)>,
    /// How many times `rule_for` handed out each goal name: a name handed out once is referred
    /// to from one rule only.
    refs: FastMap<String, u32>,
}

/// The goals of one conversion that read exactly the strings of an automaton, and the choices
/// among goals, so that a choice of several such strings is written as one string of the union
/// automaton (`Conv::define_choices`). The string and alias goals are defined at the end too:
/// a branch that only its choice refers to is left out once the union took it in.
///
/// PERF: a `oneOf` of unanchored words (`{"pattern": "maker"}`, ...) was one automaton per
/// branch, each tracking every word; a string's first position composed every branch's loop-state
/// kernel from its own trie walk (MaskBench o12278: 9 branches, 70 M instructions, ~5.5 ms).
#[derive(Default)]
struct StringChoices {
    /// Goal name -> the automaton (in `Conv::string_texts`) of the strings its rule reads (its
    /// body is one such string).
    strings: HashMap<String, usize>,
    /// Goal name -> the goal name that is its whole body.
    aliases: HashMap<String, String>,
    /// Choice goals in emit order, with their alternatives (goal names); defined at the end.
    choices: Vec<(String, Vec<String>)>,
    /// The string and alias goals' rules (name, body), defined at the end.
    defs: Vec<(String, String)>,
}

/// What determines the language of an any-order object's key-set rules: its entries' texts
/// (with whether required) and key names, the additional entry's rule (alias-resolved), the
/// separator's text, and the property counts and dependencies.
#[derive(PartialEq, Eq, Hash)]
struct AnyOrderKey {
    entries: Vec<(String, bool)>,
    names: Vec<String>,
    addl: Option<String>,
    sep: String,
    need_count: bool,
    props: (u64, Option<u64>),
    deps: Vec<(String, Vec<String>)>,
}

/// What determines the additional-key languages of an object: the keys left out, the
/// patternProperties patterns in order and the `propertyNames` subschemas. With no keys left out
/// it also names the partition by patterns alone (`key_parts`).
#[derive(Clone, PartialEq, Eq, Hash)]
struct KeyLangsKey {
    excluded: Vec<String>,
    patterns: Vec<String>,
    prop_names: Vec<SchemaId>,
}

/// The constraints that determine a string automaton (`Merged`'s, without their pointers).
#[derive(PartialEq, Eq, Hash)]
struct StringKey {
    patterns: Vec<String>,
    formats: Vec<String>,
    excluded: Vec<String>,
    neg_patterns: Vec<String>,
    neg_formats: Vec<String>,
    len: (u64, Option<u64>),
}

/// `enum` arrays longer than this get a set of canonical texts ([`Conv::in_enum`]).
const ENUM_SET_MIN: usize = 32;

impl<'a> Conv<'a> {
    pub fn new(doc: Doc<'a>, opts: &'a JsonSchemaOptions) -> Conv<'a> {
        let mut e = Ebnf::default();
        let _ = e.named("root");
        let char_rule = e.named("json_char");
        // Canonical spelling: shared unbounded integer/number rules (`numeric::INTEGER_RULE`).
        if opts.spelling == Spelling::Canonical {
            let _ = (e.named(numeric::INTEGER_RULE), e.named(numeric::NUMBER_RULE));
        }
        let ws = if opts.any_whitespace { e.named("ws") } else { String::new() };
        let has_uneval = doc.has_unevaluated();
        Conv {
            doc,
            opts,
            e,
            memo: FastMap::default(),
            queue: Vec::new(),
            char_rule,
            nothing: None,
            direct_key_sets: false,
            ws,
            has_uneval,
            large_any_order_cost: 0,
            enum_sets: FastMap::default(),
            string_dfas: FastMap::default(),
            pattern_dfas: FastMap::default(),
            key_langs: FastMap::default(),
            any_order_objects: FastMap::default(),
            merge_seen: SeenSet::default(),
            single_merges: FastMap::default(),
            merges_version: 0,
            last_string: None,
            last_choice: None,
            string_texts: Vec::new(),
            refs: FastMap::default(),
        }
    }

    /// The EBNF text, with the rules that match every string body but some words.
    /// With `on`, any-order key-set rules are returned apart from the text (`super::key_sets`).
    pub fn direct_key_sets(&mut self, on: bool) {
        self.direct_key_sets = on;
        self.e.direct_tries = on;
    }

    pub fn run(mut self) -> Result<(String, super::emit::ExcludedNames, super::emit::Apart)> {
        let root_goal = Goal { ids: vec![self.doc.root_id()], nots: vec![], done: vec![], neg: vec![], depth: 0 };
        let root = self.rule_for(root_goal)?;
        let Some(root) = root else {
            return Err(invalid("", "the schema accepts no value"));
        };
        let mut sc = StringChoices::default();
        while let Some((g, name, m)) = self.queue.pop() {
            (self.last_string, self.last_choice) = (None, None);
            let body = self.emit_goal(&g, &m)?;
            let body = match body {
                Some(b) => b,
                None => self.nothing(),
            };
            if let Some((_, i)) = self.last_string.take().filter(|(s, _)| *s == body) {
                sc.strings.insert(name.clone(), i);
            } else if let Some(alts) = self.last_choice.take().filter(|a| a.len() > 1 && a.join(" | ") == body) {
                sc.choices.push((name, alts));
                continue;
            } else if is_rule_name(&body) {
                sc.aliases.insert(name.clone(), body.clone());
            } else {
                self.e.define(&name, &body)?;
                continue;
            }
            sc.defs.push((name, body));
        }
        let (dead, dead_texts) = self.define_choices(&mut sc)?;
        for (name, body) in std::mem::take(&mut sc.defs) {
            if !dead.contains(&name) {
                self.e.define(&name, &body)?;
            }
        }
        for (i, (prefix, dfa)) in std::mem::take(&mut self.string_texts).into_iter().enumerate() {
            if !dead_texts.contains(&i) {
                self.e.raw(&dfa.to_ebnf(&prefix, jstr::text_mode(self.opts.spelling)))?;
            }
        }
        if self.opts.any_whitespace {
            // Canonical spelling bounds whitespace runs by default (`crate::spelling`).
            let ws = match self.opts.spelling.whitespace_bound(self.opts.max_whitespace_cnt) {
                Some(n) => format!("[ \\n\\t\\r]{{0,{n}}}"),
                None => "[ \\n\\t\\r]*".to_string(),
            };
            self.e.define("ws", &ws)?;
            self.e.define("root", &format!("ws {root} ws"))?;
        } else {
            self.e.define("root", &root)?;
        }
        self.e.define_fixed("json_char", jstr::char_body(self.opts.spelling))?;
        if self.opts.spelling == Spelling::Canonical {
            self.e.define_fixed(numeric::INTEGER_RULE, crate::spelling::INT_CANONICAL)?;
            self.e.define_fixed(numeric::NUMBER_RULE, crate::spelling::NUMBER_CANONICAL)?;
        }
        Ok(self.e.into_parts())
    }

    /// Defines the choice goals of `sc`: the alternatives that read exactly the strings of an
    /// automaton (through aliases and nested choices), when there are several, become one string
    /// of their union automaton, the others stay alternatives. A choice whose union would have
    /// more states than its parts together stays as it is. Returns the string and alias goals
    /// that only a unioned choice referred to (through their alias chain), and their automata
    /// (indexes in `string_texts`): left out of the text.
    fn define_choices(&mut self, sc: &mut StringChoices) -> Result<(HashSet<String>, HashSet<usize>)> {
        let choices = std::mem::take(&mut sc.choices);
        let choice_alts: HashMap<String, Vec<String>> = choices.iter().cloned().collect();
        let (mut dead, mut dead_texts) = (HashSet::new(), HashSet::new());
        for (name, alts) in &choices {
            let (mut union, mut parts, mut rest) = (None::<CharDfa>, 0usize, Vec::new());
            let mut strings = 0;
            for alt in alts {
                match string_of(sc, &self.string_texts, &choice_alts, alt, 0) {
                    Some(d) => {
                        strings += 1;
                        parts += d.num_states();
                        union = match union {
                            None => Some(d),
                            Some(u) => u.union(&d).ok(),
                        };
                        if union.is_none() {
                            break;
                        }
                    }
                    None => rest.push(alt.clone()),
                }
            }
            let union = union.filter(|u| strings > 1 && u.num_states() <= parts && !u.accepts_every_string());
            let Some(u) = union else {
                self.e.define(name, &alts.join(" | "))?;
                continue;
            };
            let prefix = format!("{}.re", self.e.fresh("str"));
            let string = format!("\"\\\"\" {prefix} \"\\\"\"");
            self.string_texts.push((prefix, u));
            rest.insert(0, string);
            self.e.define(name, &rest.join(" | "))?;
            // The unioned alternatives' alias chains, down to their string, while each link is
            // referred to from the one before only (a nested choice stays).
            for alt in alts.iter().filter(|a| !rest.contains(a)) {
                let mut x = alt.as_str();
                while self.refs.get(x) == Some(&1) {
                    if let Some(&i) = sc.strings.get(x) {
                        dead.insert(x.to_string());
                        dead_texts.insert(i);
                        break;
                    }
                    let Some(to) = sc.aliases.get(x) else { break };
                    dead.insert(x.to_string());
                    x = to;
                }
            }
        }
        Ok((dead, dead_texts))
    }

    fn nothing(&mut self) -> String {
        if let Some(n) = &self.nothing {
            return n.clone();
        }
        let n = self.e.fresh("nothing");
        let _ = self.e.define(&n, "[^\\u0000-\\U0010FFFF]");
        self.nothing = Some(n.clone());
        n
    }

    /// The rule for `g`, or `None` when `g` is trivially unsatisfiable.
    fn rule_for(&mut self, g: Goal) -> Result<Option<String>> {
        let g = g.norm();
        let key = self.through_refs(&g);
        if let Some(n) = self.memo.get(key.as_ref().unwrap_or(&g)) {
            *self.refs.entry(n.clone()).or_default() += 1;
            return Ok(Some(n.clone()));
        }
        let m = self.merge(&g)?;
        if m.types == 0 || m.enums.as_ref().is_some_and(Vec::is_empty) {
            return Ok(None);
        }
        if self.memo.len() >= MAX_GOALS {
            return Err(Error::limit("number of distinct subschema combinations", MAX_GOALS));
        }
        let base = g.ids.last().map_or("any".to_string(), |id| {
            let p = &self.doc.node(*id).ptr;
            let tail = p.rsplit('/').next().unwrap_or("");
            if tail.is_empty() {
                "schema".to_string()
            } else {
                tail.to_string()
            }
        });
        let name = self.e.fresh(&base);
        self.memo.insert(key.unwrap_or_else(|| g.clone()), name.clone());
        self.refs.insert(name.clone(), 1);
        self.queue.push((g, name.clone(), m));
        Ok(Some(name))
    }
}

/// Whether `body` is one rule name (a goal's alias of another goal).
fn is_rule_name(body: &str) -> bool {
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The automaton of the strings goal `name` reads, where its rule is one string of an automaton,
/// an alias of such a goal, or a choice whose alternatives all are (`choices`, not yet defined).
fn string_of(
    sc: &StringChoices,
    texts: &[(String, CharDfa)],
    choices: &HashMap<String, Vec<String>>,
    name: &str,
    depth: u32,
) -> Option<CharDfa> {
    // Aliases and choices may cycle through recursive goals: a short chain only.
    if depth > 16 {
        return None;
    }
    if let Some(&i) = sc.strings.get(name) {
        return Some(texts[i].1.clone());
    }
    if let Some(to) = sc.aliases.get(name) {
        return string_of(sc, texts, choices, to, depth + 1);
    }
    let alts = choices.get(name)?;
    let mut union: Option<CharDfa> = None;
    for alt in alts {
        let d = string_of(sc, texts, choices, alt, depth + 1)?;
        union = Some(match union {
            None => d,
            Some(u) => u.union(&d).ok()?,
        });
    }
    union
}

impl<'a> Conv<'a> {
    /// The memo key of `g` when some of its schemas are a bare reference: each such schema (a
    /// `$ref` and annotations only) replaced by the schema it names, which it equals (PERF: a
    /// definition named from many properties was written once per property, its whole object
    /// grammar each time: o13934 wrote 160 copies of one 461-key object). `None` when no
    /// schema is one, or when the schema has `unevaluated*` keywords (their annotations see
    /// which node a goal's schema is, `merge`).
    fn through_refs(&mut self, g: &Goal) -> Option<Goal> {
        if self.has_uneval {
            return None;
        }
        let mut key: Option<Goal> = None;
        for (i, &id) in g.ids.iter().enumerate() {
            let t = self.ref_target(id);
            if t != id {
                key.get_or_insert_with(|| g.clone()).ids[i] = t;
            }
        }
        for (i, &id) in g.nots.iter().enumerate() {
            let t = self.ref_target(id);
            if t != id {
                key.get_or_insert_with(|| g.clone()).nots[i] = t;
            }
        }
        // Not normalized: the schemas keep their order, which orders the merged keywords (and
        // an object's keys), so equal keys emit equal rules.
        key
    }

    /// The schema that `id` equals by following bare references (`id` itself when it is not
    /// one, or when a reference does not resolve: the error is then the merge's to report).
    fn ref_target(&mut self, mut id: SchemaId) -> SchemaId {
        const MAX_HOPS: usize = 16;
        let annotation = |k: &str| {
            matches!(
                k,
                "description" | "title" | "$comment" | "examples" | "default" | "deprecated" | "readOnly" | "writeOnly"
            )
        };
        for _ in 0..MAX_HOPS {
            let value: &'a Value = self.doc.node(id).value;
            let Some(map) = value.as_object() else { break };
            let Some(Value::String(r)) = map.get("$ref") else { break };
            if !map.keys().all(|k| k == "$ref" || annotation(k)) {
                break;
            }
            match self.doc.resolve_ref(id, r, "$ref") {
                Ok(t) if t != id => id = t,
                _ => break,
            }
        }
        id
    }
}

/// The automaton (full match, over decoded characters) of a format with a regular definition.
/// Built once per process and format (the formats are a fixed table; `uri` and `date-time` take
/// milliseconds to determinize).
fn format_dfa(f: &str) -> Result<CharDfa> {
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<HashMap<&'static str, CharDfa>>> = OnceLock::new();
    let Some(re_text) = formats::regex_for(f) else {
        let re = Regex::parse("", RegexFlags::default())?;
        return CharDfa::from_regex(&re, Anchoring::FullMatch);
    };
    let built = BUILT.get_or_init(Mutex::default);
    if let Some(d) = built.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(re_text) {
        return Ok(d.clone());
    }
    let d = CharDfa::from_regex(&Regex::parse(re_text, RegexFlags::default())?, Anchoring::FullMatch)?;
    built.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(re_text, d.clone());
    Ok(d)
}

/// `CharDfa::any_string().intersect(&format_dfa(f))`, the automaton of a string constraint whose
/// first constraint is the format `f` (the same automaton, state for state, as the product
/// builds it). Built once per process and format, as [`format_dfa`]; an error is not kept.
/// PERF: the product (with its minimization) took ~0.4 M instructions per `email` string of the
/// median MaskBench band, in every schema.
fn format_from_any_string(f: &str) -> Result<CharDfa> {
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<HashMap<String, CharDfa>>> = OnceLock::new();
    let built = BUILT.get_or_init(Mutex::default);
    if let Some(d) = built.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(f) {
        return Ok(d.clone());
    }
    let d = CharDfa::any_string().intersect(&format_dfa(f)?)?;
    // Bounded as the formats' table is: a name without a regular definition maps to the one
    // automaton of "" ([`format_dfa`]); past the bound nothing more is kept.
    let mut map = built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if map.len() < MAX_FORMATS_KEPT {
        map.insert(f.to_string(), d.clone());
    }
    Ok(d)
}

/// How many format names [`format_from_any_string`] keeps (the known formats are fewer).
const MAX_FORMATS_KEPT: usize = 64;

/// Whether `x` is an integer multiple of `d` (exact decimal arithmetic). `None` when the scaled
/// divisor does not fit in u128.
fn is_multiple(x: &Dec, d: &Dec) -> Option<bool> {
    let s = x.frac.len().max(d.frac.len());
    let scaled = |v: &Dec| -> Vec<u8> {
        let mut digits = v.int.clone();
        digits.extend_from_slice(&v.frac);
        digits.extend(std::iter::repeat_n(0, s - v.frac.len()));
        digits
    };
    let mut p: u128 = 0;
    for dg in scaled(d) {
        p = p.checked_mul(10)?.checked_add(u128::from(dg))?;
    }
    if p == 0 {
        return None;
    }
    let mut r: u128 = 0;
    for dg in scaled(x) {
        r = (r.checked_mul(10)? + u128::from(dg)) % p;
    }
    Some(r == 0)
}

/// Calls `f` with every permutation of `0..n` (n is small; Heap's algorithm, iterative).
fn permutations(n: usize, f: &mut dyn FnMut(&[usize])) {
    let mut a: Vec<usize> = (0..n).collect();
    let mut c = vec![0usize; n];
    f(&a);
    let mut i = 0;
    while i < n {
        if c[i] < i {
            if i % 2 == 0 {
                a.swap(0, i);
            } else {
                a.swap(c[i], i);
            }
            f(&a);
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
}

#[cfg(test)]
mod format_memo_tests {
    use super::*;

    /// The memoized product is the product itself, state for state, on its first use and on a
    /// later one, for every format with a regular definition and one without (each kept under
    /// its own name).
    #[test]
    fn format_from_any_string_is_the_product() {
        let names = [
            "date",
            "time",
            "date-time",
            "uuid",
            "ipv4",
            "hostname",
            "email",
            "ipv6",
            "uri",
            "uri-reference",
            "duration",
            "json-pointer",
            "relative-json-pointer",
            "no-such-format",
        ];
        for _ in 0..2 {
            for f in names {
                let want = CharDfa::any_string().intersect(&format_dfa(f).unwrap()).unwrap();
                assert_eq!(format_from_any_string(f).unwrap(), want, "{f}");
            }
        }
    }
}
