//! The converter proper. A [`Goal`] is a conjunction of subschemas (plus negated subschemas and
//! atomic negations) at a layout depth; each distinct goal becomes one EBNF rule, so `$ref`
//! recursion, `allOf` and sibling keywords are intersections of goals, and cycles close through the
//! memo. Goals are emitted from a worklist (no recursion over the schema).
//!
//! Emitting a goal: merge its schemas' keywords ([`Merged`]); if an applicator is pending
//! (`anyOf`, `oneOf`, `not`, `if`), distribute it into alternative goals; otherwise write the
//! per-type grammars (null, boolean, number, string, array, object) restricted by the merged
//! keywords, or the finite list of `enum`/`const` values that pass a validator for the goal.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::emit::{self, Ebnf};
use super::formats;
use super::jstr;
use super::numeric::{self, Dec, SInt};
use super::resolve::{Doc, Draft, SchemaId};
use super::value::{canonical, json_eq};
use super::{JsonSchemaOptions, Spelling};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::{MAX_NESTING, MAX_REPEAT_BOUND};
use crate::regex::{Anchoring, CharDfa, Regex, RegexFlags, TextMode};

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
/// Most states (key set seen x property count) of an object whose keys come in any order.
pub const MAX_ANY_ORDER_STATES: u64 = 256;
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rest {
    Any,
    Closed,
    Schema(SchemaId),
}

struct ArrPart {
    prefix: Vec<SchemaId>,
    rest: Rest,
}

struct ObjPart {
    props: Vec<(String, SchemaId)>,
    patterns: Vec<(String, SchemaId, String)>,
    additional: Rest,
    says_additional: bool,
}

/// The keywords of a goal's schemas, merged. Type-specific constraints restrict only their type.
struct Merged {
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
    unique: Option<String>,
    obj: Vec<ObjPart>,
    required: Vec<String>,
    absent: Vec<String>,
    min_props: u64,
    max_props: Option<u64>,
    prop_names: Vec<(SchemaId, String)>,
    /// `dependentRequired` (and array-valued `dependencies`): if the key is present, so are these.
    dep_req: Vec<(String, Vec<String>, String)>,
    pending: Vec<(SchemaId, Kind, String)>,
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

fn type_bits(name: &str, ptr: &str) -> Result<u8> {
    Ok(match name {
        "null" => NULL,
        "boolean" => BOOL,
        "integer" => INT,
        "number" => INT | FRAC,
        "string" => STR,
        "array" => ARR,
        "object" => OBJ,
        other => return Err(invalid(ptr, format!("unknown type {other:?}"))),
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

fn as_count(v: &Value, ptr: &str) -> Result<u64> {
    match v.as_u64() {
        Some(n) => Ok(n),
        None => match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e18 => Ok(f as u64),
            _ => Err(invalid(ptr, "expected a non-negative integer")),
        },
    }
}

fn as_dec(v: &Value, ptr: &str) -> Result<Dec> {
    match v {
        Value::Number(n) => Dec::from_number(n).ok_or_else(|| invalid(ptr, "number out of range")),
        _ => Err(invalid(ptr, "expected a number")),
    }
}

pub struct Conv<'a> {
    doc: Doc<'a>,
    opts: &'a JsonSchemaOptions,
    e: Ebnf,
    memo: HashMap<Goal, String>,
    queue: Vec<(Goal, String)>,
    char_rule: String,
    nothing: Option<String>,
    ws: String,
    /// Some subschema uses `unevaluated*`: `if` without `then`/`else` then matters (annotations).
    has_uneval: bool,
}

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
        Conv { doc, opts, e, memo: HashMap::new(), queue: Vec::new(), char_rule, nothing: None, ws, has_uneval }
    }

    pub fn run(mut self) -> Result<String> {
        let root_goal = Goal { ids: vec![self.doc.root_id()], nots: vec![], done: vec![], neg: vec![], depth: 0 };
        let root = self.rule_for(root_goal)?;
        let Some(root) = root else {
            return Err(invalid("", "the schema accepts no value"));
        };
        while let Some((g, name)) = self.queue.pop() {
            let body = self.emit_goal(&g)?;
            let body = match body {
                Some(b) => b,
                None => self.nothing(),
            };
            self.e.define(&name, &body)?;
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
        self.e.define("json_char", jstr::char_body(self.opts.spelling))?;
        if self.opts.spelling == Spelling::Canonical {
            self.e.define(numeric::INTEGER_RULE, crate::spelling::INT_CANONICAL)?;
            self.e.define(numeric::NUMBER_RULE, crate::spelling::NUMBER_CANONICAL)?;
        }
        Ok(self.e.into_text())
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
        if let Some(n) = self.memo.get(&g) {
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
            if tail.is_empty() { "schema".to_string() } else { tail.to_string() }
        });
        let name = self.e.fresh(&base);
        self.memo.insert(g.clone(), name.clone());
        self.queue.push((g, name.clone()));
        Ok(Some(name))
    }

    // ---------------------------------------------------------------- merging

    fn merge(&mut self, g: &Goal) -> Result<Merged> {
        let mut m = Merged {
            types: ALL,
            enums: None,
            not_values: Vec::new(),
            lo: None,
            hi: None,
            mults: Vec::new(),
            min_len: 0,
            max_len: None,
            patterns: Vec::new(),
            formats: Vec::new(),
            neg_patterns: Vec::new(),
            neg_formats: Vec::new(),
            prop_nots: Vec::new(),
            arr: Vec::new(),
            min_items: 0,
            max_items: None,
            contains: Vec::new(),
            unique: None,
            obj: Vec::new(),
            required: Vec::new(),
            absent: Vec::new(),
            min_props: 0,
            max_props: None,
            prop_names: Vec::new(),
            dep_req: Vec::new(),
            pending: Vec::new(),
        };
        let mut seen: HashSet<SchemaId> = HashSet::new();
        let mut stack: Vec<SchemaId> = g.ids.iter().rev().copied().collect();
        let draft = self.doc.draft;
        // In-place applicator edges (parent, child) and unevaluated* keywords, for annotations.
        let mut edges: Vec<(SchemaId, SchemaId)> = Vec::new();
        let mut uneval: Vec<(SchemaId, bool, String)> = Vec::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            if seen.len() > MAX_NESTING * 4 {
                return Err(Error::limit("subschemas merged into one", MAX_NESTING * 4));
            }
            let node = self.doc.node(id);
            let ptr = node.ptr.clone();
            let map = match node.value {
                Value::Bool(true) => continue,
                Value::Bool(false) => {
                    m.types = 0;
                    continue;
                }
                Value::Object(map) => map,
                _ => return Err(invalid(&ptr, "a schema must be an object or a boolean")),
            };
            let at = |k: &str| format!("{ptr}/{k}");
            if let Some(r) = map.get("$ref") {
                let r = r.as_str().ok_or_else(|| invalid(&at("$ref"), "$ref must be a string"))?;
                let t = self.doc.resolve_ref(id, r, "$ref")?;
                stack.push(t);
                edges.push((id, t));
                if draft <= Draft::D7 {
                    continue;
                }
            }
            let mut arr_part: Option<ArrPart> = None;
            let mut obj_part: Option<ObjPart> = None;
            for (k, v) in map {
                let kp = at(k);
                match k.as_str() {
                    "$dynamicRef" => {
                        let r = v.as_str().ok_or_else(|| invalid(&kp, "must be a string"))?;
                        let t = self.doc.resolve_dynamic(id, r)?;
                        stack.push(t);
                        edges.push((id, t));
                    }
                    "$recursiveRef" => return Err(unsupported(&kp, "$recursiveRef is not supported")),
                    "type" => {
                        let bits = match v {
                            Value::String(s) => type_bits(s, &kp)?,
                            Value::Array(a) => {
                                let mut b = 0;
                                for t in a {
                                    b |= type_bits(t.as_str().ok_or_else(|| invalid(&kp, "type names are strings"))?, &kp)?;
                                }
                                b
                            }
                            _ => return Err(invalid(&kp, "type must be a string or an array")),
                        };
                        m.types &= bits;
                    }
                    "enum" | "const" => {
                        let vals: Vec<Value> = if k == "const" {
                            vec![v.clone()]
                        } else {
                            v.as_array().ok_or_else(|| invalid(&kp, "enum must be an array"))?.clone()
                        };
                        m.enums = Some(match m.enums.take() {
                            None => vals,
                            Some(old) => old.into_iter().filter(|x| vals.iter().any(|y| json_eq(x, y))).collect(),
                        });
                    }
                    "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                        if let Value::Bool(_) = v {
                            if draft > Draft::D4 {
                                return Err(invalid(&kp, "boolean exclusive bounds are draft 4 only"));
                            }
                            continue;
                        }
                        let d = as_dec(v, &kp)?;
                        let is_min = k.contains("inimum");
                        let strict = k.starts_with("exclusive")
                            || (draft == Draft::D4
                                && map.get(if is_min { "exclusiveMinimum" } else { "exclusiveMaximum" }) == Some(&Value::Bool(true)));
                        if is_min {
                            tighten(&mut m.lo, d, strict, false);
                        } else {
                            tighten(&mut m.hi, d, strict, true);
                        }
                    }
                    "multipleOf" => {
                        let d = as_dec(v, &kp)?;
                        if d.neg || d.is_zero() {
                            return Err(invalid(&kp, "multipleOf must be positive"));
                        }
                        if !m.mults.iter().any(|(x, _)| *x == d) {
                            m.mults.push((d, kp));
                        }
                    }
                    "minLength" => m.min_len = m.min_len.max(as_count(v, &kp)?),
                    "maxLength" => {
                        let n = as_count(v, &kp)?;
                        m.max_len = Some(m.max_len.map_or(n, |o| o.min(n)));
                    }
                    "pattern" => {
                        let p = v.as_str().ok_or_else(|| invalid(&kp, "pattern must be a string"))?;
                        m.patterns.push((p.to_string(), kp));
                    }
                    "format" => {
                        let f = v.as_str().ok_or_else(|| invalid(&kp, "format must be a string"))?;
                        if !self.doc.format_assertion {
                            // An annotation only.
                        } else if formats::regex_for(f).is_some() {
                            m.formats.push((f.to_string(), kp));
                        } else if formats::KNOWN_UNSUPPORTED.contains(&f) {
                            return Err(unsupported(&kp, format!("format {f:?} is not supported")));
                        }
                    }
                    "items" | "prefixItems" | "additionalItems" | "unevaluatedItems" => {
                        let part = arr_part.get_or_insert(ArrPart { prefix: Vec::new(), rest: Rest::Any });
                        match (k.as_str(), v) {
                            ("items", Value::Array(a)) if draft <= Draft::D2019 => {
                                part.prefix = (0..a.len()).map(|i| self.doc.child(id, &["items", &i.to_string()])).collect();
                                if let Some(ai) = map.get("additionalItems") {
                                    let _ = ai;
                                    part.rest = Rest::Schema(self.doc.child(id, &["additionalItems"]));
                                } else if self.opts.strict_mode {
                                    part.rest = Rest::Closed;
                                }
                            }
                            ("items", Value::Array(_)) => return Err(invalid(&kp, "items must be a schema in this draft")),
                            ("items", _) => part.rest = Rest::Schema(self.doc.child(id, &["items"])),
                            ("prefixItems", Value::Array(a)) if draft >= Draft::D2020 => {
                                part.prefix = (0..a.len()).map(|i| self.doc.child(id, &["prefixItems", &i.to_string()])).collect();
                                if !map.contains_key("items") && self.opts.strict_mode && !map.contains_key("unevaluatedItems") {
                                    part.rest = Rest::Closed;
                                }
                            }
                            ("unevaluatedItems", _) => uneval.push((id, false, kp.clone())),
                            _ => {}
                        }
                    }
                    "minItems" => m.min_items = m.min_items.max(as_count(v, &kp)?),
                    "maxItems" => {
                        let n = as_count(v, &kp)?;
                        m.max_items = Some(m.max_items.map_or(n, |o| o.min(n)));
                    }
                    "uniqueItems" => {
                        if v == &Value::Bool(true) {
                            m.unique = Some(kp);
                        }
                    }
                    "contains" => {
                        let lo = match map.get("minContains") {
                            Some(x) if draft >= Draft::D2019 => as_count(x, &at("minContains"))?,
                            _ => 1,
                        };
                        let hi = match map.get("maxContains") {
                            Some(x) if draft >= Draft::D2019 => Some(as_count(x, &at("maxContains"))?),
                            _ => None,
                        };
                        m.contains.push((self.doc.child(id, &["contains"]), lo, hi, kp));
                    }
                    "properties" | "patternProperties" | "additionalProperties" | "unevaluatedProperties" => {
                        let part = obj_part.get_or_insert(ObjPart {
                            props: Vec::new(),
                            patterns: Vec::new(),
                            additional: Rest::Any,
                            says_additional: false,
                        });
                        let mm = || v.as_object().ok_or_else(|| invalid(&kp, "expected an object"));
                        match k.as_str() {
                            "properties" => {
                                for name in mm()?.keys() {
                                    part.props.push((name.clone(), self.doc.child(id, &["properties", name])));
                                }
                            }
                            "patternProperties" => {
                                for name in mm()?.keys() {
                                    let pp = format!("{kp}/{}", name.replace('~', "~0").replace('/', "~1"));
                                    part.patterns.push((name.clone(), self.doc.child(id, &["patternProperties", name]), pp));
                                }
                                part.says_additional = true;
                            }
                            "additionalProperties" => {
                                part.additional = Rest::Schema(self.doc.child(id, &["additionalProperties"]));
                                part.says_additional = true;
                            }
                            _ => uneval.push((id, true, kp.clone())),
                        }
                    }
                    "required" => {
                        for r in v.as_array().ok_or_else(|| invalid(&kp, "required must be an array"))? {
                            let r = r.as_str().ok_or_else(|| invalid(&kp, "required names are strings"))?;
                            if !m.required.iter().any(|x| x == r) {
                                m.required.push(r.to_string());
                            }
                        }
                    }
                    "minProperties" => m.min_props = m.min_props.max(as_count(v, &kp)?),
                    "maxProperties" => {
                        let n = as_count(v, &kp)?;
                        m.max_props = Some(m.max_props.map_or(n, |o| o.min(n)));
                    }
                    "propertyNames" => m.prop_names.push((self.doc.child(id, &["propertyNames"]), kp)),
                    "dependentRequired" | "dependentSchemas" | "dependencies" => {
                        let o = v.as_object().ok_or_else(|| invalid(&kp, format!("{k} must be an object")))?;
                        for (name, dep) in o {
                            match dep {
                                Value::Array(a) if k != "dependentSchemas" => {
                                    let mut req = Vec::new();
                                    for r in a {
                                        let r = r.as_str().ok_or_else(|| invalid(&kp, "dependent names are strings"))?;
                                        req.push(r.to_string());
                                    }
                                    if !req.is_empty() {
                                        m.dep_req.push((name.clone(), req, kp.clone()));
                                    }
                                }
                                Value::Bool(true) if k != "dependentRequired" => {}
                                Value::Object(x) if x.is_empty() && k != "dependentRequired" => {}
                                _ if k == "dependentRequired" => return Err(invalid(&kp, "dependentRequired values are arrays")),
                                _ => {}
                            }
                        }
                        if k != "dependentRequired" {
                            for (i, _) in self.dep_schemas(id).iter().enumerate() {
                                let kind = Kind::Dep(i as u32);
                                if !g.done.contains(&(id, kind)) && !m.pending.iter().any(|p| p.0 == id && p.1 == kind) {
                                    m.pending.push((id, kind, kp.clone()));
                                }
                            }
                        }
                    }
                    "allOf" => {
                        let a = v.as_array().ok_or_else(|| invalid(&kp, "allOf must be an array"))?;
                        for i in 0..a.len() {
                            let c = self.doc.child(id, &["allOf", &i.to_string()]);
                            stack.push(c);
                            edges.push((id, c));
                        }
                    }
                    "anyOf" | "oneOf" => {
                        let a = v.as_array().ok_or_else(|| invalid(&kp, format!("{k} must be an array")))?;
                        if a.is_empty() {
                            return Err(invalid(&kp, format!("{k} must not be empty")));
                        }
                        let kind = if k == "anyOf" { Kind::AnyOf } else { Kind::OneOf };
                        if !g.done.contains(&(id, kind)) {
                            m.pending.push((id, kind, kp));
                        }
                    }
                    "not" => {
                        if !g.done.contains(&(id, Kind::Not)) {
                            m.pending.push((id, Kind::Not, kp));
                        }
                    }
                    "if" => {
                        let matters = map.contains_key("then") || map.contains_key("else") || self.has_uneval;
                        if matters && !g.done.contains(&(id, Kind::If)) {
                            m.pending.push((id, Kind::If, kp));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(p) = arr_part {
                m.arr.push(p);
            }
            if let Some(p) = obj_part {
                m.obj.push(p);
            }
        }
        if !uneval.is_empty() {
            self.apply_unevaluated(g, &mut m, &seen, &mut edges, &uneval)?;
        }
        for n in &g.neg {
            match n {
                Neg::Types(t) => m.types &= !t,
                Neg::Values(vs) => {
                    for s in vs {
                        if let Ok(v) = serde_json::from_str::<Value>(s) {
                            m.not_values.push(v);
                        }
                    }
                }
                Neg::Absent(k) => {
                    m.types &= OBJ;
                    m.absent.push(k.clone());
                }
                Neg::Below(d, incl) => {
                    m.types &= INT | FRAC;
                    tighten(&mut m.hi, d.clone(), !incl, true);
                }
                Neg::Above(d, incl) => {
                    m.types &= INT | FRAC;
                    tighten(&mut m.lo, d.clone(), !incl, false);
                }
                Neg::ShortStr(n) => {
                    m.types &= STR;
                    m.max_len = Some(m.max_len.map_or(*n, |o| o.min(*n)));
                }
                Neg::LongStr(n) => {
                    m.types &= STR;
                    m.min_len = m.min_len.max(*n);
                }
                Neg::NoMatch(p) => {
                    m.types &= STR;
                    m.neg_patterns.push(p.clone());
                }
                Neg::NoFormat(f) => {
                    m.types &= STR;
                    m.neg_formats.push(f.clone());
                }
                Neg::Has(k) => {
                    m.types &= OBJ;
                    if !m.required.contains(k) {
                        m.required.push(k.clone());
                    }
                }
                Neg::PropFails(k, id) => {
                    m.types &= OBJ;
                    if !m.required.contains(k) {
                        m.required.push(k.clone());
                    }
                    m.prop_nots.push((k.clone(), *id));
                }
            }
        }
        if m.required.iter().any(|r| m.absent.contains(r)) {
            m.types &= !OBJ;
        }
        if let Some(vals) = &m.enums {
            let mut t = 0;
            for v in vals {
                t |= value_type(v);
            }
            m.types &= t;
        }
        Ok(m)
    }

    /// Turns each `unevaluatedProperties`/`unevaluatedItems` of a merged node X into one more
    /// object/array part: what X's successful in-place subschemas (itself, `allOf`, `$ref`, and
    /// the branches this goal chose for `oneOf`, `if`, `dependentSchemas`) did not evaluate must
    /// satisfy the keyword's schema. Exact because every schema of the goal holds; an `anyOf`
    /// with several branches (others may hold and evaluate more) or `contains` is refused.
    fn apply_unevaluated(
        &mut self,
        g: &Goal,
        m: &mut Merged,
        seen: &HashSet<SchemaId>,
        edges: &mut Vec<(SchemaId, SchemaId)>,
        uneval: &[(SchemaId, bool, String)],
    ) -> Result<()> {
        // Branches chosen by distribution are goal ids below their applicator's node.
        for &id in &g.ids {
            let ptr = self.doc.node(id).ptr.clone();
            let segs: Vec<&str> = ptr.rsplitn(3, '/').collect();
            let parent = match segs.as_slice() {
                [last, rest, ..] if ["then", "else", "if"].contains(last) => Some(format!("{}{}", segs.get(2).map_or(String::new(), |p| format!("{p}/")), rest)),
                [_, kw, parent] if ["anyOf", "oneOf", "dependentSchemas", "dependencies"].contains(kw) => Some((*parent).to_string()),
                _ => None,
            };
            if let Some(pid) = parent.and_then(|p| self.doc.id_of(&p)) {
                if seen.contains(&pid) && pid != id {
                    edges.push((pid, id));
                }
            }
        }
        for (x, props, kp) in uneval {
            // The in-place subtree of x.
            let mut sub = vec![*x];
            let mut i = 0;
            while i < sub.len() {
                let n = sub[i];
                for &(p, c) in edges.iter() {
                    if p == n && !sub.contains(&c) {
                        sub.push(c);
                    }
                }
                i += 1;
            }
            for &(sid, kind) in &g.done {
                let branches = self.doc.node(sid).value.get("anyOf").and_then(Value::as_array).map_or(0, Vec::len);
                if kind == Kind::AnyOf && branches > 1 && sub.contains(&sid) {
                    return Err(unsupported(kp, "unevaluated keywords over an anyOf with several branches are not supported"));
                }
            }
            let key = if *props { "unevaluatedProperties" } else { "unevaluatedItems" };
            let schema = self.doc.child(*x, &[key]);
            let draft = self.doc.draft;
            if *props {
                let mut part = ObjPart { props: Vec::new(), patterns: Vec::new(), additional: Rest::Schema(schema), says_additional: true };
                let mut all = false;
                for &n in &sub {
                    let Some(map) = self.doc.node(n).value.as_object() else { continue };
                    all |= map.contains_key("additionalProperties") || (n != *x && map.contains_key("unevaluatedProperties"));
                    if let Some(Value::Object(o)) = map.get("properties") {
                        for name in o.keys() {
                            part.props.push((name.clone(), self.doc.child(n, &["properties", name])));
                        }
                    }
                    if let Some(Value::Object(o)) = map.get("patternProperties") {
                        let base = format!("{}/patternProperties", self.doc.node(n).ptr);
                        for name in o.keys() {
                            let pp = format!("{base}/{}", name.replace('~', "~0").replace('/', "~1"));
                            part.patterns.push((name.clone(), self.doc.child(n, &["patternProperties", name]), pp));
                        }
                    }
                }
                if !all {
                    m.obj.push(part);
                }
            } else {
                let mut all = false;
                let mut prefix: Vec<SchemaId> = Vec::new();
                for &n in &sub {
                    let Some(map) = self.doc.node(n).value.as_object() else { continue };
                    if map.contains_key("contains") {
                        return Err(unsupported(kp, "unevaluatedItems beside contains is not supported"));
                    }
                    let items_array = map.get("items").is_some_and(Value::is_array);
                    all |= (map.contains_key("items") && (draft >= Draft::D2020 || !items_array))
                        || (map.contains_key("additionalItems") && items_array)
                        || (n != *x && map.contains_key("unevaluatedItems"));
                    let (kw, arr) = match (map.get("prefixItems"), map.get("items")) {
                        (Some(Value::Array(a)), _) if draft >= Draft::D2020 => ("prefixItems", a),
                        (_, Some(Value::Array(a))) if draft <= Draft::D2019 => ("items", a),
                        _ => continue,
                    };
                    if arr.len() > prefix.len() {
                        prefix = (0..arr.len()).map(|i| self.doc.child(n, &[kw, &i.to_string()])).collect();
                    }
                }
                if !all {
                    m.arr.push(ArrPart { prefix, rest: Rest::Schema(schema) });
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- goals

    fn emit_goal(&mut self, g: &Goal) -> Result<Option<String>> {
        // A goal held to a finite `enum`/`const` is decided value by value by the validator,
        // applicators and negations included (see `emit_base`): exact without distributing them.
        let m = self.merge(g)?;
        if m.enums.is_some() {
            return self.emit_base(g, &m);
        }
        // Negated subschemas first: they become atomic negations.
        if let Some(&x) = g.nots.first() {
            let mut rest = g.clone();
            rest.nots.remove(0);
            return self.emit_negation(&rest, x, &self.doc.node(x).ptr.clone());
        }
        if let Some((sid, kind, ptr)) = m.pending.first().cloned() {
            let mut base = g.clone();
            base.done.push((sid, kind));
            let n_branches = |this: &Self, k: &str| this.doc.node(sid).value.get(k).and_then(Value::as_array).map_or(0, Vec::len);
            match kind {
                Kind::AnyOf => {
                    let mut alts = Vec::new();
                    for i in 0..n_branches(self, "anyOf") {
                        let b = self.doc.child(sid, &["anyOf", &i.to_string()]);
                        if let Some(r) = self.rule_for(base.with_id(b))? {
                            alts.push(r);
                        }
                    }
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
                Kind::OneOf => {
                    let n = n_branches(self, "oneOf");
                    let branches: Vec<SchemaId> = (0..n).map(|i| self.doc.child(sid, &["oneOf", &i.to_string()])).collect();
                    let mut merged = Vec::new();
                    for &b in &branches {
                        let gb = base.with_id(b).norm();
                        merged.push(self.merge(&gb)?);
                    }
                    let mut alts = Vec::new();
                    for (i, &b) in branches.iter().enumerate() {
                        let mut gb = base.with_id(b);
                        for (j, &o) in branches.iter().enumerate() {
                            if i != j && !self.disjoint(&merged[i], &merged[j])? {
                                gb.nots.push(o);
                            }
                        }
                        if let Some(r) = self.rule_for(gb)? {
                            alts.push(r);
                        }
                    }
                    let _ = ptr;
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
                Kind::Not => {
                    let x = self.doc.child(sid, &["not"]);
                    return self.emit_negation(&base, x, &ptr);
                }
                Kind::Dep(i) => {
                    // Not an object, an object without the key, or one with it that satisfies
                    // the dependent schema: three disjoint cases.
                    let (name, dep) = self.dep_schemas(sid)[i as usize].clone();
                    let mut alts = Vec::new();
                    for n in [Neg::Types(OBJ), Neg::Absent(name.clone())] {
                        let mut gn = base.clone();
                        gn.neg.push(n);
                        if let Some(r) = self.rule_for(gn)? {
                            alts.push(r);
                        }
                    }
                    let mut yes = base.with_id(dep);
                    yes.neg.push(Neg::Has(name));
                    if let Some(r) = self.rule_for(yes)? {
                        alts.push(r);
                    }
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
                Kind::If => {
                    let i = self.doc.child(sid, &["if"]);
                    let map = self.doc.node(sid).value.as_object().cloned().unwrap_or_default();
                    let mut alts = Vec::new();
                    let mut yes = base.with_id(i);
                    if map.contains_key("then") {
                        yes.ids.push(self.doc.child(sid, &["then"]));
                    }
                    if let Some(r) = self.rule_for(yes)? {
                        alts.push(r);
                    }
                    let mut no = base.clone();
                    no.nots.push(i);
                    if map.contains_key("else") {
                        no.ids.push(self.doc.child(sid, &["else"]));
                    }
                    if let Some(r) = self.rule_for(no)? {
                        alts.push(r);
                    }
                    return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
                }
            }
        }
        self.emit_base(g, &m)
    }

    /// The schema-valued entries of `dependentSchemas` and `dependencies` of node `id`, as
    /// (key, subschema), in document order; `true` and `{}` are left out (they always hold).
    fn dep_schemas(&self, id: SchemaId) -> Vec<(String, SchemaId)> {
        let mut out = Vec::new();
        let Some(map) = self.doc.node(id).value.as_object() else { return out };
        for k in ["dependencies", "dependentSchemas"] {
            let Some(Value::Object(o)) = map.get(k) else { continue };
            for (name, dep) in o {
                let trivial = matches!(dep, Value::Bool(true) | Value::Array(_)) || dep.as_object().is_some_and(|x| x.is_empty());
                if !trivial {
                    out.push((name.clone(), self.doc.child(id, &[k, name])));
                }
            }
        }
        out
    }

    /// Alternatives for `g ∧ ¬x`, when `x`'s negation splits into atomic negations.
    fn emit_negation(&mut self, g: &Goal, x: SchemaId, ptr: &str) -> Result<Option<String>> {
        let gx = Goal { ids: vec![x], nots: vec![], done: vec![], neg: vec![], depth: g.depth };
        let mx = self.merge(&gx)?;
        if let Some((_, _, p)) = mx.pending.first() {
            return Err(unsupported(p, format!("negation (at {ptr}) of a schema with applicators is not supported")));
        }
        let mut negs: Vec<Neg> = Vec::new();
        if mx.types == 0 {
            // ¬false = true
            return Ok(self.rule_for(g.clone())?);
        }
        let refuse = |what: &str| Err(unsupported(ptr, format!("not: cannot negate {what} exactly")));
        if mx.types != ALL {
            negs.push(Neg::Types(mx.types));
        }
        if let Some(vals) = &mx.enums {
            negs.push(Neg::Values(vals.iter().map(canonical).collect()));
        }
        for r in &mx.required {
            negs.push(Neg::Absent(r.clone()));
        }
        if !mx.mults.is_empty() {
            return refuse("multipleOf");
        }
        // Bounds restrict numbers only: failing one means "a number on the other side".
        if let Some((d, strict)) = &mx.lo {
            negs.push(Neg::Below(d.clone(), *strict));
        }
        if let Some((d, strict)) = &mx.hi {
            negs.push(Neg::Above(d.clone(), *strict));
        }
        if mx.min_len > 0 {
            negs.push(Neg::ShortStr(mx.min_len - 1));
        }
        if let Some(n) = mx.max_len {
            negs.push(Neg::LongStr(n.saturating_add(1)));
        }
        for (p, _) in &mx.patterns {
            negs.push(Neg::NoMatch(p.clone()));
        }
        for (f, _) in &mx.formats {
            negs.push(Neg::NoFormat(f.clone()));
        }
        if !mx.arr.is_empty() || mx.min_items > 0 || mx.max_items.is_some() || !mx.contains.is_empty() || mx.unique.is_some() {
            return refuse("array constraints");
        }
        // `properties` fail when a listed key is present with a value that fails its schema.
        for p in &mx.obj {
            for (name, id) in &p.props {
                negs.push(Neg::PropFails(name.clone(), *id));
            }
        }
        if mx.obj.iter().any(|p| !p.patterns.is_empty() || p.says_additional)
            || mx.min_props > 0
            || mx.max_props.is_some()
            || !mx.prop_names.is_empty()
            || !mx.dep_req.is_empty()
        {
            return refuse("object constraints other than required");
        }
        if negs.is_empty() {
            // ¬true = false
            return Ok(None);
        }
        let mut alts = Vec::new();
        for n in negs {
            let mut gn = g.clone();
            gn.neg.push(n);
            if let Some(r) = self.rule_for(gn)? {
                alts.push(r);
            }
        }
        Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) })
    }

    /// Conservative disjointness: `true` only when no instance satisfies both.
    fn disjoint(&mut self, a: &Merged, b: &Merged) -> Result<bool> {
        if a.types & b.types == 0 {
            return Ok(true);
        }
        if let (Some(x), Some(y)) = (&a.enums, &b.enums) {
            if !x.iter().any(|p| y.iter().any(|q| json_eq(p, q))) {
                return Ok(true);
            }
        }
        if a.pending.is_empty() && b.pending.is_empty() && (a.types | b.types) & !OBJ & a.types & b.types == 0 {
            // Both can only meet as objects: a key one requires and the other forbids ...
            for (x, y) in [(a, b), (b, a)] {
                for k in &x.required {
                    if y.absent.contains(k) {
                        return Ok(true);
                    }
                    match Self::prop_ids(y, k) {
                        None => return Ok(true),
                        Some(ids) if !ids.is_empty() => {
                            let my = self.merge(&Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                            if my.types == 0 {
                                return Ok(true);
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            // ... or a key required by both with disjoint values.
            for k in &a.required {
                if !b.required.contains(k) {
                    continue;
                }
                let va = Self::prop_ids(a, k);
                let vb = Self::prop_ids(b, k);
                let (Some(va), Some(vb)) = (va, vb) else { return Ok(true) };
                let ma = self.merge(&Goal { ids: va, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                let mb = self.merge(&Goal { ids: vb, nots: vec![], done: vec![], neg: vec![], depth: 0 }.norm())?;
                if ma.types & mb.types == 0 {
                    return Ok(true);
                }
                if let (Some(x), Some(y)) = (&ma.enums, &mb.enums) {
                    if !x.iter().any(|p| y.iter().any(|q| json_eq(p, q))) {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Value schemas for key `k` from explicit `properties` only; `None` if some part forbids it.
    fn prop_ids(m: &Merged, k: &str) -> Option<Vec<SchemaId>> {
        let mut ids = Vec::new();
        for p in &m.obj {
            if let Some((_, id)) = p.props.iter().find(|(n, _)| n == k) {
                ids.push(*id);
            } else if !p.patterns.is_empty() {
                // A pattern may apply; stay conservative by adding nothing.
            } else if let Rest::Schema(x) = p.additional {
                ids.push(x);
            } else if p.additional == Rest::Closed {
                return None;
            }
        }
        Some(ids)
    }

    // ---------------------------------------------------------------- base types

    fn emit_base(&mut self, g: &Goal, m: &Merged) -> Result<Option<String>> {
        if let Some(vals) = &m.enums {
            let mut alts = Vec::new();
            let mut kept: Vec<&Value> = Vec::new();
            for v in vals {
                if m.types & value_type(v) == 0 || m.not_values.iter().any(|n| json_eq(n, v)) {
                    continue;
                }
                if kept.iter().any(|k| json_eq(k, v)) {
                    continue;
                }
                if self.valid_goal(g, v)? {
                    kept.push(v);
                    alts.push(self.spell_value(v, g.depth)?);
                }
            }
            return Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) });
        }
        let mut alts = Vec::new();
        let excluded = |v: &Value| m.not_values.iter().any(|n| json_eq(n, v));
        if m.types & NULL != 0 && !excluded(&Value::Null) {
            alts.push("\"null\"".to_string());
        }
        if m.types & BOOL != 0 {
            for (b, t) in [(true, "\"true\""), (false, "\"false\"")] {
                if !excluded(&Value::Bool(b)) {
                    alts.push(t.to_string());
                }
            }
        }
        let first_ptr = g.ids.first().map_or(String::new(), |i| self.doc.node(*i).ptr.clone());
        if m.types & (INT | FRAC) != 0 {
            let excluded: Vec<Dec> = m.not_values.iter().filter_map(|v| v.as_number().and_then(Dec::from_number)).collect();
            let n = if excluded.is_empty() {
                self.emit_number(m, &first_ptr)?
            } else {
                self.emit_number_except(m, &excluded, &first_ptr)?
            };
            if let Some(n) = n {
                alts.push(n);
            }
        }
        if m.types & STR != 0 {
            if let Some(s) = self.emit_string(m, &first_ptr)? {
                alts.push(s);
            }
        }
        if m.types & ARR != 0 && g.depth < MAX_INDENT_DEPTH {
            if m.not_values.iter().any(Value::is_array) {
                return Err(unsupported(&first_ptr, "not: excluding array values is not supported"));
            }
            if let Some(a) = self.emit_array(g, m, &first_ptr)? {
                alts.push(a);
            }
        }
        if m.types & OBJ != 0 && g.depth < MAX_INDENT_DEPTH {
            if m.not_values.iter().any(Value::is_object) {
                return Err(unsupported(&first_ptr, "not: excluding object values is not supported"));
            }
            if let Some(o) = self.emit_object(g, m, &first_ptr)? {
                alts.push(o);
            }
        }
        Ok(if alts.is_empty() { None } else { Some(alts.join(" | ")) })
    }

    fn emit_number(&mut self, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let integer = m.types & FRAC == 0;
        // Draft 4 integers are spelled without fraction or exponent (`1.0` is a number there);
        // so are all integers under canonical spelling.
        let canonical = self.opts.spelling == Spelling::Canonical;
        let plain_int = integer && (self.doc.draft == Draft::D4 || canonical);
        if canonical {
            if let Some(r) = numeric::emit_canonical_number(m.lo.as_ref(), m.hi.as_ref(), m.types & INT == 0, integer, !m.mults.is_empty()) {
                return Ok(r);
            }
        }
        let bounded = m.lo.is_some() || m.hi.is_some();
        if m.types & INT == 0 {
            // Numbers that are not integers: a plain spelling with a non-zero fraction digit
            // (exponent spellings such as 1.5e1 may be integers, so none is taken).
            if bounded || !m.mults.is_empty() {
                let p = m.mults.first().map_or(ptr, |x| x.1.as_str());
                return Err(unsupported(p, "non-integer numbers with bounds or multipleOf are not supported"));
            }
            return Ok(Some("\"-\"? (\"0\" | [1-9] [0-9]*) \".\" [0-9]* [1-9] [0-9]*".to_string()));
        }
        if let Some((_, p)) = m.mults.first() {
            // `minimum: 0` alone (amounts, counts) is exact: the unsigned multiples.
            let nonneg = m.hi.is_none() && m.lo.as_ref().is_some_and(|(d, exclusive)| d.is_zero() && !exclusive);
            if bounded && !nonneg {
                return Err(unsupported(p, "multipleOf together with minimum/maximum (other than minimum 0) is not supported"));
            }
            let mut divs = Vec::new();
            for (d, p) in &m.mults {
                divs.push(numeric::divisor(d).ok_or_else(|| unsupported(p, "multipleOf value too large or too precise"))?);
            }
            let Some((pp, s)) = numeric::lcm_divisor(&divs) else {
                return Err(unsupported(p, "multipleOf values whose common multiple is too large"));
            };
            return match numeric::multiple_of(&mut self.e, pp, s, integer, plain_int, nonneg)? {
                Some(r) => Ok(Some(r)),
                None => Err(unsupported(p, "multipleOf needs too many automaton states")),
            };
        }
        if integer {
            if !bounded {
                return Ok(Some(if plain_int {
                    "\"-\"? (\"0\" | [1-9] [0-9]*)".to_string()
                } else {
                    "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" \"0\"+)? ([eE] \"+\"? [0-9]+)?".to_string()
                }));
            }
            let lo = m.lo.as_ref().map(|(d, s)| SInt::ceil(d, *s));
            let hi = m.hi.as_ref().map(|(d, s)| SInt::floor(d, *s));
            let frac = if plain_int { "" } else { " (\".\" \"0\"+)?" };
            return Ok(numeric::int_range(lo.as_ref(), hi.as_ref()).map(|r| format!("{r}{frac}")));
        }
        if !bounded {
            return Ok(Some(
                "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [+\\-]? [0-9]+)?".to_string(),
            ));
        }
        Ok(numeric::number_range(m.lo.as_ref().map(|(d, s)| (d, *s)), m.hi.as_ref().map(|(d, s)| (d, *s))))
    }

    /// Unbounded numbers other than `excluded`, in plain decimal spellings (no exponent: the
    /// spellings of one value with exponents do not form a regular language). Every plain
    /// spelling of an excluded value (`1`, `1.0`, `1.00`, ...) is taken out.
    fn emit_number_except(&mut self, m: &Merged, excluded: &[Dec], ptr: &str) -> Result<Option<String>> {
        if m.lo.is_some() || m.hi.is_some() || !m.mults.is_empty() || m.types & INT == 0 {
            return Err(unsupported(ptr, "not: excluding numeric values from bounded, multipleOf or non-integer numbers is not supported"));
        }
        let integer = m.types & FRAC == 0;
        // Canonical spelling: integers without fraction, no `-0` (see `crate::spelling`).
        let canonical = self.opts.spelling == Spelling::Canonical;
        let base = match (integer, self.doc.draft == Draft::D4 || canonical) {
            (true, true) if canonical => r"0|-?[1-9][0-9]*",
            (false, _) if canonical => r"0|-?(0\.[0-9]*[1-9]|[1-9][0-9]*(\.([0-9]*[1-9]|0))?)",
            (true, true) => r"-?(0|[1-9][0-9]*)",
            (true, false) => r"-?(0|[1-9][0-9]*)(\.0+)?",
            (false, _) => r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
        };
        let full = |p: &str| -> Result<CharDfa> { CharDfa::from_regex(&Regex::parse(p, RegexFlags::default())?, Anchoring::FullMatch) };
        let mut dfa = full(base)?;
        for d in excluded {
            let int: String = if d.int.is_empty() { "0".into() } else { d.int.iter().map(|x| char::from(b'0' + x)).collect() };
            let frac: String = d.frac.iter().map(|x| char::from(b'0' + x)).collect();
            let sign = if d.is_zero() { "-?" } else if d.neg { "-" } else { "" };
            let tail = if frac.is_empty() { r"(\.0+)?".to_string() } else { format!(r"\.{frac}0*") };
            dfa = dfa.difference(&full(&format!("{sign}{int}{tail}"))?).map_err(|e| ptr_if_none(e, ptr))?;
        }
        if dfa.is_empty() {
            return Ok(None);
        }
        let prefix = format!("{}.re", self.e.fresh("num"));
        let text = dfa.to_ebnf(&prefix, TextMode::Raw);
        self.e.raw(&text)?;
        Ok(Some(prefix))
    }

    fn emit_string(&mut self, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let excluded: Vec<&str> = m.not_values.iter().filter_map(Value::as_str).collect();
        if let Some(mx) = m.max_len {
            if mx < m.min_len {
                return Ok(None);
            }
        }
        let plain = m.patterns.is_empty() && m.formats.is_empty() && m.neg_patterns.is_empty() && m.neg_formats.is_empty();
        if plain && excluded.is_empty() {
            if m.min_len > u64::from(MAX_REPEAT_BOUND) || m.max_len.is_some_and(|x| x > u64::from(MAX_REPEAT_BOUND)) {
                if m.max_len.is_some() {
                    return Err(Error::limit("maxLength", MAX_REPEAT_BOUND as usize).at_pointer(ptr));
                }
                return Err(Error::limit("minLength", MAX_REPEAT_BOUND as usize).at_pointer(ptr));
            }
            let c = &self.char_rule;
            let body = match (m.min_len, m.max_len) {
                (0, None) => format!("{c}*"),
                (lo, None) => format!("{c}{{{lo},}}"),
                (lo, Some(hi)) => format!("{c}{{{lo},{hi}}}"),
            };
            return Ok(Some(format!("\"\\\"\" {body} \"\\\"\"")));
        }
        if plain && m.min_len == 0 && m.max_len.is_none() {
            let body = jstr::not_in_for(self.opts.spelling, &mut self.e, &excluded)?;
            return Ok(Some(format!("\"\\\"\" {body} \"\\\"\"")));
        }
        // General case: intersect automata (length last, see below).
        let mut dfa = CharDfa::any_string();
        for (p, pp) in &m.patterns {
            let re = Regex::parse(p, RegexFlags { ignore_case: false, dot_all: false }).map_err(|e| {
                Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(pp.clone())
            })?;
            let d = CharDfa::from_regex(&re, Anchoring::Search)
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(pp.clone()))?;
            dfa = dfa.intersect(&d).map_err(|e| ptr_if_none(e, pp))?;
        }
        for (f, fp) in &m.formats {
            let d = format_dfa(f).map_err(|e| ptr_if_none(e, fp))?;
            dfa = dfa.intersect(&d).map_err(|e| ptr_if_none(e, fp))?;
        }
        for x in &excluded {
            dfa = dfa.difference(&CharDfa::literal(x)).map_err(|e| ptr_if_none(e, ptr))?;
        }
        for p in &m.neg_patterns {
            let re = Regex::parse(p, RegexFlags { ignore_case: false, dot_all: false })
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(ptr))?;
            let d = CharDfa::from_regex(&re, Anchoring::Search)
                .map_err(|e| Error::new(e.kind(), format!("pattern {p:?}: {}", e.message())).at_pointer(ptr))?;
            dfa = dfa.difference(&d).map_err(|e| ptr_if_none(e, ptr))?;
        }
        for f in &m.neg_formats {
            let d = format_dfa(f).map_err(|e| ptr_if_none(e, ptr))?;
            dfa = dfa.difference(&d).map_err(|e| ptr_if_none(e, ptr))?;
        }
        if m.min_len > 0 || m.max_len.is_some() {
            let len = CharDfa::length_between(m.min_len, m.max_len).map_err(|e| ptr_if_none(e, ptr))?;
            // A length counter times a cyclic automaton reaches about the product of their
            // states: refuse at once what would only hit the state limit after a long build.
            if dfa.is_infinite() && len.num_states().saturating_mul(dfa.num_states()) > 4 * crate::regex::MAX_DFA_STATES {
                return Err(Error::limit(
                    "automaton states of pattern/format with minLength/maxLength",
                    crate::regex::MAX_DFA_STATES,
                )
                .at_pointer(ptr));
            }
            dfa = dfa.intersect(&len).map_err(|e| ptr_if_none(e, ptr))?;
        }
        if dfa.is_empty() {
            return Ok(None);
        }
        let stem = self.e.fresh("str");
        let prefix = format!("{stem}.re");
        let text = dfa.to_ebnf(&prefix, jstr::text_mode(self.opts.spelling));
        self.e.raw(&text)?;
        Ok(Some(format!("\"\\\"\" {prefix} \"\\\"\"")))
    }

    // ---------------------------------------------------------------- layout

    /// Layout depth of a container's children: only `indent` layouts depend on depth.
    fn child_depth(&self, depth: u32) -> u32 {
        if self.opts.indent.is_some() && !self.opts.any_whitespace {
            depth + 1
        } else {
            0
        }
    }

    fn sep_item(&self, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{0} \",\" {0}", self.ws);
        }
        let item = self.opts.separators.as_ref().map_or(if self.opts.indent.is_some() { "," } else { ", " }, |s| s.0.as_str());
        match self.opts.indent {
            Some(n) => emit::lit(&format!("{item}\n{}", " ".repeat((n * (depth + 1)) as usize))),
            None => emit::lit(item),
        }
    }
    fn sep_kv(&self) -> String {
        if self.opts.any_whitespace {
            return format!("{0} \":\" {0}", self.ws);
        }
        emit::lit(self.opts.separators.as_ref().map_or(": ", |s| s.1.as_str()))
    }
    fn open(&self, c: char, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{} {}", emit::lit(&c.to_string()), self.ws);
        }
        match self.opts.indent {
            Some(n) => emit::lit(&format!("{c}\n{}", " ".repeat((n * (depth + 1)) as usize))),
            None => emit::lit(&c.to_string()),
        }
    }
    fn close(&self, c: char, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{} {}", self.ws, emit::lit(&c.to_string()));
        }
        match self.opts.indent {
            Some(n) => emit::lit(&format!("\n{}{c}", " ".repeat((n * depth) as usize))),
            None => emit::lit(&c.to_string()),
        }
    }
    fn empty(&self, o: char, c: char) -> String {
        if self.opts.any_whitespace {
            format!("{} {} {}", emit::lit(&o.to_string()), self.ws, emit::lit(&c.to_string()))
        } else {
            emit::lit(&format!("{o}{c}"))
        }
    }

    // ---------------------------------------------------------------- arrays

    fn emit_array(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        // `contains` with minContains 0 and no maxContains holds for every array.
        let counted: Vec<&(SchemaId, u64, Option<u64>, String)> =
            m.contains.iter().filter(|(_, lo, hi, _)| *lo > 0 || hi.is_some()).collect();
        if let Some(c) = counted.get(1) {
            return Err(unsupported(&c.3, "several contains keywords on one array are not supported"));
        }
        if let Some(&&(c, lo, hi, ref p)) = counted.first() {
            return self.emit_array_contains(g, m, c, lo, hi, p);
        }
        let min = m.min_items;
        let max = m.max_items;
        if max.is_some_and(|x| x < min) {
            return Ok(None);
        }
        let plen = m.arr.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
        if let Some(p) = &m.unique {
            if max.is_none_or(|x| x > 1) {
                return self.emit_unique_array(g, m, p);
            }
        }
        let d = self.child_depth(g.depth);
        let item_rule = |this: &mut Self, i: Option<usize>| -> Result<Option<String>> {
            let mut ids = Vec::new();
            for p in &m.arr {
                match i {
                    Some(i) if i < p.prefix.len() => ids.push(p.prefix[i]),
                    _ => match p.rest {
                        Rest::Any => {}
                        Rest::Closed => return Ok(None),
                        Rest::Schema(x) => ids.push(x),
                    },
                }
            }
            this.rule_for(Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: d })
        };
        let cap = max.map_or(plen, |x| (x as usize).min(plen));
        let mut items: Vec<Option<String>> = Vec::new();
        for i in 0..cap {
            items.push(item_rule(self, Some(i))?);
        }
        let rest = if max.is_none_or(|x| x as usize > plen) { item_rule(self, None)? } else { None };
        let sep = self.sep_item(g.depth);
        let bound = |x: u64| -> Result<u64> {
            if x > u64::from(MAX_REPEAT_BOUND) {
                Err(Error::limit("minItems/maxItems", MAX_REPEAT_BOUND as usize).at_pointer(ptr))
            } else {
                Ok(x)
            }
        };
        // Tail after the prefix (i = plen items emitted, plen >= 1): k more rest items.
        let rep = |lo: u64, hi: Option<u64>| match hi {
            Some(h) => format!("{{{lo},{h}}}"),
            None => format!("{{{lo},}}"),
        };
        let nonempty: Option<String> = if cap == 0 {
            // No prefix: rest (sep rest){min-1, max-1}.
            match &rest {
                Some(r) if max.is_none_or(|x| x >= 1) => {
                    let lo = bound(min.saturating_sub(1))?;
                    let hi = max.map(|x| bound(x - 1)).transpose()?;
                    Some(format!("{r} ({sep} {r}){}", rep(lo, hi)))
                }
                _ => None,
            }
        } else {
            // Chain N_i (i items emitted) from the back.
            let mut next: Option<String> = {
                let i = cap as u64;
                if (cap < plen) || rest.is_none() {
                    if i >= min { Some("\"\"".to_string()) } else { None }
                } else {
                    let lo = bound(min.saturating_sub(i))?;
                    let hi = max.map(|x| bound(x - i)).transpose()?;
                    let r = rest.clone().unwrap_or_default();
                    Some(format!("({sep} {r}){}", rep(lo, hi)))
                }
            };
            for i in (1..cap).rev() {
                let mut alts = Vec::new();
                if i as u64 >= min {
                    alts.push("\"\"".to_string());
                }
                if let (Some(it), Some(nx)) = (&items[i], &next) {
                    alts.push(format!("{sep} {it} {nx}"));
                }
                next = if alts.is_empty() {
                    None
                } else {
                    let name = self.e.fresh("arr_tail");
                    self.e.define(&name, &alts.join(" | "))?;
                    Some(name)
                };
            }
            match (&items[0], next) {
                (Some(it), Some(nx)) => Some(format!("{it} {nx}")),
                _ => None,
            }
        };
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.empty('[', ']'));
        }
        if let Some(ne) = nonempty {
            alts.push(format!("{} {ne} {}", self.open('[', g.depth), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }

    /// `uniqueItems` arrays whose items come from a finite set of at most
    /// [`MAX_UNIQUE_VALUES`] distinct values (an `enum`/`const`, or `null`/booleans): rules track
    /// the set of values used so far, so each comes at most once, and the item count is that
    /// set's size. Any other item language (infinite, or a `prefixItems` tuple) is refused.
    fn emit_unique_array(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        if m.arr.iter().any(|p| !p.prefix.is_empty()) {
            return Err(unsupported(ptr, "uniqueItems with prefixItems is not supported"));
        }
        let d = self.child_depth(g.depth);
        let mut ids = Vec::new();
        for p in &m.arr {
            match p.rest {
                Rest::Any => {}
                Rest::Closed => return Ok((m.min_items == 0).then(|| self.empty('[', ']'))),
                Rest::Schema(x) => ids.push(x),
            }
        }
        let goal = Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: d }.norm();
        let mx = self.merge(&goal)?;
        let candidates: Vec<Value> = match &mx.enums {
            Some(vals) => vals.clone(),
            None if mx.types & !(NULL | BOOL) == 0 => vec![Value::Null, Value::Bool(true), Value::Bool(false)],
            None => return Err(unsupported(ptr, "uniqueItems is only supported when the items take finitely many values (enum, const, boolean, null)")),
        };
        let mut values: Vec<Value> = Vec::new();
        for v in candidates {
            if mx.types & value_type(&v) != 0 && !values.iter().any(|k| json_eq(k, &v)) && self.valid_goal(&goal, &v)? {
                values.push(v);
            }
        }
        if values.len() > MAX_UNIQUE_VALUES {
            return Err(unsupported(ptr, format!("uniqueItems over more than {MAX_UNIQUE_VALUES} distinct item values is not supported")));
        }
        let spelled: Vec<String> = values.iter().map(|v| self.spell_value(v, d)).collect::<Result<_>>()?;
        let (min, max) = (m.min_items, m.max_items.unwrap_or(u64::MAX));
        let sep = self.sep_item(g.depth);
        let base = self.e.fresh("uniq");
        // Rule for the non-empty set `used` of value indexes already emitted.
        let name = |used: u32| format!("{base}.{used:x}");
        let mut todo: Vec<u32> = Vec::new();
        let mut first = Vec::new();
        for (i, sp) in spelled.iter().enumerate() {
            if max >= 1 {
                first.push(format!("{sp} {}", name(1 << i)));
                todo.push(1 << i);
            }
        }
        let mut defined: HashSet<u32> = HashSet::new();
        while let Some(used) = todo.pop() {
            if !defined.insert(used) {
                continue;
            }
            let count = u64::from(used.count_ones());
            let mut alts = Vec::new();
            if count >= min {
                alts.push("\"\"".to_string());
            }
            if count < max {
                for (i, sp) in spelled.iter().enumerate() {
                    if used & (1 << i) == 0 {
                        alts.push(format!("{sep} {sp} {}", name(used | 1 << i)));
                        todo.push(used | 1 << i);
                    }
                }
            }
            let body = if alts.is_empty() { self.nothing() } else { alts.join(" | ") };
            self.e.define(&name(used), &body)?;
        }
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.empty('[', ']'));
        }
        if !first.is_empty() {
            alts.push(format!("{} {} {}", self.open('[', g.depth), emit::alt(&first), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }

    /// Arrays whose items all satisfy the rest schema and of which between `lo` and `hi` satisfy
    /// `c` as well. Without `hi`, items are "any" or "any and c" (an ambiguous but exact union);
    /// with `hi`, every item is either "c" or "not c", so counting them is exact.
    fn emit_array_contains(
        &mut self,
        g: &Goal,
        m: &Merged,
        c: SchemaId,
        lo: u64,
        hi: Option<u64>,
        p: &str,
    ) -> Result<Option<String>> {
        const MAX_CONTAINS_COUNT: u64 = 64;
        if m.arr.iter().any(|a| !a.prefix.is_empty()) {
            return Err(unsupported(p, "contains together with prefix items is not supported"));
        }
        if m.max_items.is_some() || m.min_items > lo {
            return Err(unsupported(p, "contains together with minItems above minContains or maxItems is not supported"));
        }
        if m.unique.is_some() {
            return Err(unsupported(p, "contains together with uniqueItems is not supported"));
        }
        if hi.is_some_and(|h| h < lo) {
            return Ok(None);
        }
        if lo.max(hi.unwrap_or(0)) > MAX_CONTAINS_COUNT {
            return Err(Error::limit("minContains/maxContains", MAX_CONTAINS_COUNT as usize).at_pointer(p));
        }
        let mut ids = Vec::new();
        for a in &m.arr {
            match a.rest {
                Rest::Any => {}
                Rest::Closed => {
                    // Only the empty array is left.
                    return Ok((lo == 0).then(|| self.empty('[', ']')));
                }
                Rest::Schema(x) => ids.push(x),
            }
        }
        let d = self.child_depth(g.depth);
        let goal = |ids: Vec<SchemaId>, nots: Vec<SchemaId>| Goal { ids, nots, done: vec![], neg: vec![], depth: d };
        let hit = self.rule_for(goal([ids.clone(), vec![c]].concat(), vec![]))?;
        // Items that may or may not satisfy `c` (unbounded count), or that must not (bounded).
        let other = match hi {
            None => self.rule_for(goal(ids.clone(), vec![]))?,
            Some(_) => self.rule_for(goal(ids.clone(), vec![c]))?,
        };
        let sep = self.sep_item(g.depth);
        let top = hi.unwrap_or(lo);
        // after[k]: the rest of the array after its first item, k hits so far (k <= top).
        let mut after: Vec<Option<String>> = vec![None; top as usize + 1];
        for k in (0..=top).rev() {
            let mut alts = Vec::new();
            let stay = other.as_ref().map(|o| format!("({sep} {o})*")).unwrap_or_default();
            if k >= lo {
                alts.push(if stay.is_empty() { "\"\"".to_string() } else { stay.clone() });
            }
            if k < top {
                if let (Some(h), Some(nx)) = (&hit, &after[k as usize + 1]) {
                    alts.push(format!("{stay} {sep} {h} {nx}"));
                }
            }
            after[k as usize] = if alts.is_empty() {
                None
            } else {
                let name = self.e.fresh("contains_tail");
                self.e.define(&name, &alts.join(" | "))?;
                Some(name)
            };
        }
        let mut first = Vec::new();
        if let (Some(o), Some(nx)) = (&other, &after[0]) {
            first.push(format!("{o} {nx}"));
        }
        if top >= 1 {
            if let (Some(h), Some(nx)) = (&hit, &after[1]) {
                first.push(format!("{h} {nx}"));
            }
        }
        let mut alts = Vec::new();
        if lo == 0 {
            alts.push(self.empty('[', ']'));
        }
        if !first.is_empty() {
            alts.push(format!("{} ({}) {}", self.open('[', g.depth), first.join(" | "), self.close(']', g.depth)));
        }
        Ok(if alts.is_empty() { None } else { Some(emit::alt(&alts)) })
    }

    // ---------------------------------------------------------------- objects

    fn emit_object(&mut self, g: &Goal, m: &Merged, ptr: &str) -> Result<Option<String>> {
        let d = self.child_depth(g.depth);
        let closed_by_strict =
            self.opts.strict_mode && m.obj.iter().any(|p| !p.props.is_empty()) && !m.obj.iter().any(|p| p.says_additional);
        // Known keys in schema order, then required keys not listed.
        let mut names: Vec<String> = Vec::new();
        for p in &m.obj {
            for (n, _) in &p.props {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        for r in &m.required {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        // Keys named by dependentRequired are tracked like listed ones (any-order states).
        for (k, req, _) in &m.dep_req {
            for x in std::iter::once(k).chain(req) {
                if !names.contains(x) {
                    names.push(x.clone());
                }
            }
        }
        // Pattern properties: exact via automata on key strings.
        let mut pattern_dfas: Vec<(CharDfa, SchemaId)> = Vec::new();
        for p in &m.obj {
            for (pat, id, pp) in &p.patterns {
                let re = Regex::parse(pat, RegexFlags::default()).map_err(|e| ptr_if_none(e, pp))?;
                let dfa = CharDfa::from_regex(&re, Anchoring::Search).map_err(|e| ptr_if_none(e, pp))?;
                pattern_dfas.push((dfa, *id));
            }
        }
        // Value schemas for a key: None = key not allowed.
        let key_ids = |name: &str| -> Option<Vec<SchemaId>> {
            let mut ids = Vec::new();
            let mut in_props_any = false;
            for p in &m.obj {
                let mut matched = false;
                if let Some((_, id)) = p.props.iter().find(|(n, _)| n == name) {
                    ids.push(*id);
                    in_props_any = true;
                    matched = true;
                }
                for (pat, id, _) in &p.patterns {
                    let _ = pat;
                    if let Some((dfa, _)) = pattern_dfas.iter().find(|(_, i)| i == id) {
                        if dfa.accepts(name) {
                            ids.push(*id);
                            matched = true;
                        }
                    }
                }
                if matched {
                    continue;
                }
                match p.additional {
                    Rest::Any => {}
                    Rest::Closed => return None,
                    Rest::Schema(x) => ids.push(x),
                }
            }
            if closed_by_strict && !in_props_any {
                return None;
            }
            Some(ids)
        };
        struct Key {
            name: String,
            required: bool,
            value: Option<String>,
        }
        let mut keys: Vec<Key> = Vec::new();
        for n in &names {
            let required = m.required.contains(n);
            let mut value = None;
            if !m.absent.contains(n) && self.key_name_ok(m, n)? {
                if let Some(ids) = key_ids(n) {
                    let nots = m.prop_nots.iter().filter(|(k, _)| k == n).map(|(_, id)| *id).collect();
                    value = self.rule_for(Goal { ids, nots, done: vec![], neg: vec![], depth: d })?;
                }
            }
            if required && value.is_none() {
                return Ok(None);
            }
            keys.push(Key { name: n.clone(), required, value });
        }
        keys.retain(|k| k.value.is_some());
        // Additional keys: any string not among `names` (nor absent keys).
        let additional_allowed = !closed_by_strict && !m.obj.iter().any(|p| p.additional == Rest::Closed && p.patterns.is_empty());
        let mut addl: Option<String> = None;
        if additional_allowed || !pattern_dfas.is_empty() {
            let mut excluded: Vec<&str> = names.iter().map(String::as_str).collect();
            excluded.extend(m.absent.iter().map(String::as_str));
            addl = self.additional_entry(g, m, &excluded, &pattern_dfas, closed_by_strict, ptr)?;
        }
        let kv = self.sep_kv();
        let sep = self.sep_item(g.depth);
        let entries: Vec<(String, bool)> = keys
            .iter()
            .map(|k| {
                (format!("\"\\\"\" {} \"\\\"\" {kv} {}", jstr::spell_str_in(self.opts.spelling, &k.name), k.value.clone().unwrap_or_default()), k.required)
            })
            .collect();
        let n = entries.len();
        let n_req = entries.iter().filter(|e| e.1).count() as u64;
        let max_total = if addl.is_some() { None } else { Some(n as u64) };
        let need_count = m.min_props > n_req || m.max_props.is_some_and(|x| max_total.is_none_or(|t| x < t));
        if m.max_props.is_some_and(|x| x < n_req) || max_total.is_some_and(|t| t < m.min_props) {
            return Ok(None);
        }
        // Key order: free unless strict_mode keeps XGrammar's schema order (any_order frees it).
        let free_order = self.opts.any_order || !self.opts.strict_mode;
        if free_order && (n > 1 || (n == 1 && addl.is_some()) || !m.dep_req.is_empty()) {
            let levels = if need_count { m.max_props.map_or(m.min_props, |x| x + 1) + 1 } else { 1 };
            let states = (1u64 << n.min(40)).saturating_mul(levels);
            if n <= 40 && states <= MAX_ANY_ORDER_STATES {
                let key_names: Vec<String> = keys.iter().map(|k| k.name.clone()).collect();
                return self.object_any_order(g, m, &entries, &key_names, addl.as_deref(), need_count).map(Some);
            }
            if self.opts.any_order {
                return Err(unsupported(
                    ptr,
                    format!("any_order: {n} properties need more than {MAX_ANY_ORDER_STATES} key-set states"),
                ));
            }
            // strict_mode=false beyond the bound: schema order (documented restriction).
        }
        if let Some((_, _, p)) = m.dep_req.first() {
            let why = if free_order { "too many properties for key-set states" } else { "needs any key order (strict_mode=false or any_order)" };
            return Err(unsupported(p, format!("dependentRequired: {why}")));
        }
        let cap: u64 = if need_count { m.max_props.unwrap_or(m.min_props).max(m.min_props) } else { 0 };
        if (cap as usize + 1) * (n + 1) * 2 > 20_000 {
            return Err(unsupported(ptr, "minProperties/maxProperties over too many properties"));
        }
        // Rules R[i][c][started]: the rest of the object from key i, c keys emitted (capped).
        let base = self.e.fresh("obj");
        let rname = |i: usize, c: u64, s: bool| format!("{base}.{i}_{c}_{}", u8::from(s));
        let mut defined: HashSet<String> = HashSet::new();
        let mut todo: Vec<(usize, u64, bool)> = vec![(0, 0, false)];
        let mut bodies: Vec<(String, String)> = Vec::new();
        while let Some((i, c, s)) = todo.pop() {
            let name = rname(i, c, s);
            if !defined.insert(name.clone()) {
                continue;
            }
            let mut alts = Vec::new();
            if i == n {
                // Additional entries: k more with min_props <= c + k <= max_props.
                let lo = if need_count { m.min_props.saturating_sub(c) } else { 0 };
                let hi = if need_count { m.max_props.map(|x| x.saturating_sub(c)) } else { None };
                let fits_max = !need_count || m.max_props.is_none_or(|x| c <= x);
                if fits_max {
                    if lo == 0 && s {
                        alts.push("\"\"".to_string());
                    }
                    if let Some(a) = &addl {
                        if hi.is_none_or(|h| h >= 1) {
                            let first = if s { format!("{sep} {a}") } else { a.clone() };
                            let lo2 = lo.saturating_sub(1);
                            let hi2 = hi.map(|h| h - 1);
                            if lo2 > u64::from(MAX_REPEAT_BOUND) || hi2.is_some_and(|h| h > u64::from(MAX_REPEAT_BOUND)) {
                                return Err(Error::limit("minProperties/maxProperties", MAX_REPEAT_BOUND as usize).at_pointer(ptr));
                            }
                            let rep = match hi2 {
                                Some(h) => format!("{{{lo2},{h}}}"),
                                None => format!("{{{lo2},}}"),
                            };
                            alts.push(format!("{first} ({sep} {a}){rep}"));
                        }
                    } else if lo == 0 && !s {
                        // Not started, nothing left: only the empty object (handled outside).
                    }
                }
            } else {
                let (entry, required) = &entries[i];
                let c2 = if need_count { c + 1 } else { 0 };
                let over = need_count && m.max_props.is_some_and(|x| c2 > x);
                if !over {
                    let c2 = c2.min(cap.max(if need_count { 0 } else { 0 }));
                    let c2 = if need_count && m.max_props.is_none() { c2.min(m.min_props) } else { c2 };
                    let pre = if s { format!("{sep} ") } else { String::new() };
                    alts.push(format!("{pre}{entry} {}", rname(i + 1, c2, true)));
                    todo.push((i + 1, c2, true));
                }
                if !required {
                    alts.push(rname(i + 1, c, s));
                    todo.push((i + 1, c, s));
                }
            }
            bodies.push((name, alts.join(" | ")));
        }
        // A rule with no alternatives matches nothing.
        for (name, body) in bodies {
            let body = if body.is_empty() { self.nothing() } else { body };
            self.e.define(&name, &body)?;
        }
        let mut alts = Vec::new();
        let empty_ok = n_req == 0 && m.min_props == 0;
        if empty_ok {
            alts.push(self.empty('{', '}'));
        }
        alts.push(format!("{} {} {}", self.open('{', g.depth), rname(0, 0, false), self.close('}', g.depth)));
        Ok(Some(emit::alt(&alts)))
    }

    /// An object whose known entries come in any order, each at most once, with additional
    /// entries (`addl`) anywhere. States are (set of known keys seen, entries so far capped for
    /// min/maxProperties, started); the caller bounds their number by [`MAX_ANY_ORDER_STATES`].
    /// Unambiguous: `addl`'s key language excludes every known key.
    fn object_any_order(
        &mut self,
        g: &Goal,
        m: &Merged,
        entries: &[(String, bool)],
        names: &[String],
        addl: Option<&str>,
        need_count: bool,
    ) -> Result<String> {
        let n = entries.len();
        let base = self.e.fresh("obj");
        let mut erules = Vec::with_capacity(n);
        for (i, (e, _)) in entries.iter().enumerate() {
            let name = format!("{base}.e{i}");
            self.e.define(&name, e)?;
            erules.push(name);
        }
        let req_mask: u64 = entries.iter().enumerate().filter(|(_, e)| e.1).fold(0, |a, (i, _)| a | (1u64 << i));
        let top = m.max_props.map_or(m.min_props, |x| x + 1);
        let sep = self.sep_item(g.depth);
        let rname = |mask: u64, c: u64, s: bool| format!("{base}.{mask:x}_{c}_{}", u8::from(s));
        let mut defined: HashSet<(u64, u64, bool)> = HashSet::new();
        let mut todo: Vec<(u64, u64, bool)> = vec![(0, 0, false)];
        let mut bodies: Vec<(String, String)> = Vec::new();
        while let Some((mask, c, s)) = todo.pop() {
            if !defined.insert((mask, c, s)) {
                continue;
            }
            let mut alts = Vec::new();
            if s && mask & req_mask == req_mask && (!need_count || c >= m.min_props) && Self::deps_hold(m, names, mask) {
                alts.push("\"\"".to_string());
            }
            let c2 = if need_count { (c + 1).min(top) } else { 0 };
            let over = need_count && m.max_props.is_some_and(|x| c2 > x);
            if !over {
                let mut entries = Vec::new();
                for (i, er) in erules.iter().enumerate() {
                    if mask & (1u64 << i) == 0 {
                        let next = (mask | (1u64 << i), c2, true);
                        entries.push(format!("{er} {}", rname(next.0, next.1, next.2)));
                        todo.push(next);
                    }
                }
                if let Some(a) = addl {
                    entries.push(format!("{a} {}", rname(mask, c2, true)));
                    todo.push((mask, c2, true));
                }
                // The separator is written once before the choice of the next entry.
                // PERF: one copy of `ws "," ws` per rule instead of one per entry.
                match (s, entries.is_empty()) {
                    (_, true) => {}
                    (true, false) => alts.push(format!("{sep} {}", emit::alt(&entries))),
                    (false, false) => alts.extend(entries),
                }
            }
            bodies.push((rname(mask, c, s), alts.join(" | ")));
        }
        for (name, body) in bodies {
            let body = if body.is_empty() { self.nothing() } else { body };
            self.e.define(&name, &body)?;
        }
        let mut alts = Vec::new();
        if req_mask == 0 && m.min_props == 0 && Self::deps_hold(m, names, 0) {
            alts.push(self.empty('{', '}'));
        }
        alts.push(format!("{} {} {}", self.open('{', g.depth), rname(0, 0, false), self.close('}', g.depth)));
        Ok(emit::alt(&alts))
    }

    /// Whether `dependentRequired` holds for the known keys in `mask` (entries in key order).
    fn deps_hold(m: &Merged, names: &[String], mask: u64) -> bool {
        let has = |k: &str| names.iter().position(|n| n == k).is_some_and(|i| mask & (1u64 << i) != 0);
        m.dep_req.iter().all(|(k, req, _)| !has(k) || req.iter().all(|r| has(r)))
    }

    /// Whether a known key passes `propertyNames`.
    fn key_name_ok(&mut self, m: &Merged, name: &str) -> Result<bool> {
        let v = Value::String(name.to_string());
        for (id, _) in &m.prop_names {
            if !self.valid(*id, &v, 0)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `key kv value` for keys outside `excluded`, split by which patternProperties they match.
    fn additional_entry(
        &mut self,
        g: &Goal,
        m: &Merged,
        excluded: &[&str],
        pattern_dfas: &[(CharDfa, SchemaId)],
        closed_by_strict: bool,
        ptr: &str,
    ) -> Result<Option<String>> {
        let d = self.child_depth(g.depth);
        let kv = self.sep_kv();
        // Key language restrictions from propertyNames (string keywords only).
        let mut names_dfa: Option<CharDfa> = None;
        for (id, p) in &m.prop_names {
            let gx = Goal { ids: vec![*id], nots: vec![], done: vec![], neg: vec![], depth: 0 };
            let mx = self.merge(&gx)?;
            if !mx.pending.is_empty() || mx.enums.is_some() || !mx.not_values.is_empty() {
                return Err(unsupported(p, "propertyNames with applicators or enum is not supported"));
            }
            if mx.types & STR == 0 {
                names_dfa = Some(CharDfa::empty());
                continue;
            }
            let mut dfa = CharDfa::length_between(mx.min_len, mx.max_len).map_err(|e| ptr_if_none(e, p))?;
            for (pat, pp) in &mx.patterns {
                let re = Regex::parse(pat, RegexFlags::default()).map_err(|e| ptr_if_none(e, pp))?;
                dfa = dfa.intersect(&CharDfa::from_regex(&re, Anchoring::Search).map_err(|e| ptr_if_none(e, pp))?)?;
            }
            for (f, fp) in &mx.formats {
                dfa = dfa.intersect(&format_dfa(f).map_err(|e| ptr_if_none(e, fp))?)?;
            }
            names_dfa = Some(match names_dfa {
                None => dfa,
                Some(o) => o.intersect(&dfa)?,
            });
        }
        // Plain keys (no propertyNames, no patterns): every string but the excluded ones, a
        // language that is never empty, spelled by `jstr::not_in` without building its DFA.
        // PERF: the DFA difference took a third of a typical schema's compile time.
        let plain = names_dfa.is_none() && pattern_dfas.is_empty();
        let mut base = CharDfa::any_string();
        if !plain {
            for x in excluded {
                base = base.difference(&CharDfa::literal(x))?;
            }
        }
        if let Some(nd) = &names_dfa {
            base = base.intersect(nd)?;
        }
        // Partition by subsets of matched patterns (only subsets that are non-empty).
        if pattern_dfas.len() > 6 {
            return Err(unsupported(ptr, "more than 6 patternProperties"));
        }
        let mut alts = Vec::new();
        for mask in 0u32..(1 << pattern_dfas.len()) {
            let mut lang = base.clone();
            let mut ids: Vec<SchemaId> = Vec::new();
            for (j, (dfa, id)) in pattern_dfas.iter().enumerate() {
                if mask & (1 << j) != 0 {
                    lang = lang.intersect(dfa)?;
                    ids.push(*id);
                } else {
                    lang = lang.difference(dfa)?;
                }
                if lang.is_empty() {
                    break;
                }
            }
            if lang.is_empty() {
                continue;
            }
            // Value schemas: matched patterns per part, else that part's additionalProperties.
            let mut ok = true;
            for p in &m.obj {
                let any_match = p.patterns.iter().any(|(_, id, _)| ids.contains(id));
                if any_match {
                    continue;
                }
                match p.additional {
                    Rest::Any => {
                        if closed_by_strict {
                            ok = false;
                        }
                    }
                    Rest::Closed => ok = false,
                    Rest::Schema(x) => ids.push(x),
                }
            }
            if closed_by_strict && mask == 0 {
                ok = false;
            }
            if !ok {
                continue;
            }
            let Some(val) = self.rule_for(Goal { ids, nots: vec![], done: vec![], neg: vec![], depth: d })? else {
                continue;
            };
            let key = if plain {
                jstr::not_in_for(self.opts.spelling, &mut self.e, excluded)?
            } else {
                let stem = self.e.fresh("key");
                let prefix = format!("{stem}.re");
                let text = lang.to_ebnf(&prefix, jstr::text_mode(self.opts.spelling));
                self.e.raw(&text)?;
                prefix
            };
            alts.push(format!("\"\\\"\" {key} \"\\\"\" {kv} {val}"));
        }
        if alts.is_empty() {
            return Ok(None);
        }
        let name = self.e.fresh("obj_extra");
        self.e.define(&name, &alts.join(" | "))?;
        Ok(Some(name))
    }

    // ---------------------------------------------------------------- values

    /// EBNF for every spelling of the JSON value `v` under the layout at `depth`.
    fn spell_value(&mut self, v: &Value, depth: u32) -> Result<String> {
        Ok(match v {
            Value::Null => "\"null\"".into(),
            Value::Bool(b) => format!("\"{b}\""),
            Value::Number(n) => {
                let d = Dec::from_number(n).ok_or_else(|| invalid("", "number out of range"))?;
                let int: String = if d.int.is_empty() { "0".into() } else { d.int.iter().map(|x| char::from(b'0' + x)).collect() };
                let frac: String = d.frac.iter().map(|x| char::from(b'0' + x)).collect();
                let body = if self.opts.spelling == Spelling::Canonical {
                    // Canonical spelling: the shortest decimal, no `-0` (`crate::spelling`); an
                    // integer value also as Python writes the float (`1.0`).
                    if frac.is_empty() { format!("{} \".0\"?", emit::lit(&int)) } else { emit::lit(&format!("{int}.{frac}")) }
                } else if frac.is_empty() {
                    format!("{} (\".\" \"0\"+)?", emit::lit(&int))
                } else {
                    format!("{} \"0\"*", emit::lit(&format!("{int}.{frac}")))
                };
                if d.is_zero() && self.opts.spelling == Spelling::Canonical {
                    body
                } else if d.is_zero() {
                    format!("\"-\"? {body}")
                } else if d.neg {
                    format!("\"-\" {body}")
                } else {
                    body
                }
            }
            Value::String(s) => format!("(\"\\\"\" {} \"\\\"\")", jstr::spell_str_in(self.opts.spelling, s)),
            Value::Array(a) => {
                if a.is_empty() {
                    self.empty('[', ']')
                } else {
                    let mut parts = Vec::new();
                    for x in a {
                        parts.push(self.spell_value(x, self.child_depth(depth))?);
                    }
                    let sep = self.sep_item(depth);
                    format!("({} {} {})", self.open('[', depth), parts.join(&format!(" {sep} ")), self.close(']', depth))
                }
            }
            Value::Object(o) => {
                if o.is_empty() {
                    self.empty('{', '}')
                } else {
                    if o.len() > MAX_CONST_OBJECT_KEYS {
                        return Err(unsupported(
                            "",
                            format!("enum/const object with more than {MAX_CONST_OBJECT_KEYS} keys (key order is free in JSON)"),
                        ));
                    }
                    let kv = self.sep_kv();
                    let mut entries = Vec::new();
                    for (k, x) in o {
                        entries.push(format!("\"\\\"\" {} \"\\\"\" {kv} {}", jstr::spell_str_in(self.opts.spelling, k), self.spell_value(x, self.child_depth(depth))?));
                    }
                    let sep = self.sep_item(depth);
                    let mut alts = Vec::new();
                    permutations(entries.len(), &mut |perm| {
                        let parts: Vec<&str> = perm.iter().map(|&i| entries[i].as_str()).collect();
                        alts.push(parts.join(&format!(" {sep} ")));
                    });
                    format!("({} {} {})", self.open('{', depth), emit::alt(&alts), self.close('}', depth))
                }
            }
        })
    }

    // ---------------------------------------------------------------- validator

    fn valid_goal(&mut self, g: &Goal, v: &Value) -> Result<bool> {
        for &id in &g.ids {
            if !self.valid(id, v, 0)? {
                return Ok(false);
            }
        }
        for &id in &g.nots {
            if self.valid(id, v, 0)? {
                return Ok(false);
            }
        }
        let num = v.as_number().and_then(Dec::from_number);
        let text = v.as_str();
        for n in &g.neg {
            // `hit`: the value fails the negation's condition.
            let hit = match n {
                Neg::Types(t) => value_type(v) & t != 0,
                Neg::Values(vs) => vs.iter().any(|s| *s == canonical(v)),
                Neg::Absent(k) => !v.as_object().is_some_and(|o| !o.contains_key(k)),
                Neg::Below(d, incl) => !num.as_ref().is_some_and(|x| x < d || (*incl && x == d)),
                Neg::Above(d, incl) => !num.as_ref().is_some_and(|x| x > d || (*incl && x == d)),
                Neg::ShortStr(k) => !text.is_some_and(|t| t.chars().count() as u64 <= *k),
                Neg::LongStr(k) => !text.is_some_and(|t| t.chars().count() as u64 >= *k),
                Neg::NoMatch(p) => match text {
                    None => true,
                    Some(t) => {
                        let re = Regex::parse(p, RegexFlags::default())?;
                        CharDfa::from_regex(&re, Anchoring::Search)?.accepts(t)
                    }
                },
                Neg::NoFormat(f) => match text {
                    None => true,
                    Some(t) => format_dfa(f)?.accepts(t),
                },
                Neg::Has(k) => !v.as_object().is_some_and(|o| o.contains_key(k)),
                Neg::PropFails(k, id) => match v.as_object().and_then(|o| o.get(k)) {
                    None => true,
                    Some(x) => self.valid(*id, x, 1)?,
                },
            };
            if hit {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Validates `v` against subschema `id` (all keywords the converter knows).
    fn valid(&mut self, id: SchemaId, v: &Value, depth: usize) -> Result<bool> {
        if depth > MAX_NESTING {
            return Err(Error::limit("validation depth", MAX_NESTING));
        }
        let node = self.doc.node(id);
        let ptr = node.ptr.clone();
        let map = match node.value {
            Value::Bool(b) => return Ok(*b),
            Value::Object(m) => m,
            _ => return Err(invalid(&ptr, "a schema must be an object or a boolean")),
        };
        let draft = self.doc.draft;
        let at = |k: &str| format!("{ptr}/{k}");
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let t = self.doc.resolve_ref(id, r, "$ref")?;
            if !self.valid(t, v, depth + 1)? {
                return Ok(false);
            }
            if draft <= Draft::D7 {
                return Ok(true);
            }
        }
        let map = map.clone();
        let vt = value_type(v);
        for (k, kv) in &map {
            let kp = at(k);
            let ok = match k.as_str() {
                "$dynamicRef" => {
                    let t = self.doc.resolve_dynamic(id, kv.as_str().unwrap_or(""))?;
                    self.valid(t, v, depth + 1)?
                }
                "$recursiveRef" => return Err(unsupported(&kp, "$recursiveRef is not supported")),
                "type" => {
                    let bits = match kv {
                        Value::String(s) => type_bits(s, &kp)?,
                        Value::Array(a) => {
                            let mut b = 0;
                            for t in a {
                                b |= type_bits(t.as_str().unwrap_or(""), &kp)?;
                            }
                            b
                        }
                        _ => return Err(invalid(&kp, "bad type")),
                    };
                    bits & vt != 0
                }
                "enum" => kv.as_array().is_some_and(|a| a.iter().any(|x| json_eq(x, v))),
                "const" => json_eq(kv, v),
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if vt & (INT | FRAC) != 0 => {
                    if kv.is_boolean() {
                        true
                    } else {
                        let b = as_dec(kv, &kp)?;
                        let x = Dec::from_number(v.as_number().ok_or_else(|| invalid(&kp, "number"))?)
                            .ok_or_else(|| invalid(&kp, "number out of range"))?;
                        let is_min = k.contains("inimum");
                        let strict = k.starts_with("exclusive")
                            || (draft == Draft::D4
                                && map.get(if is_min { "exclusiveMinimum" } else { "exclusiveMaximum" }) == Some(&Value::Bool(true)));
                        match (is_min, strict) {
                            (true, false) => x >= b,
                            (true, true) => x > b,
                            (false, false) => x <= b,
                            (false, true) => x < b,
                        }
                    }
                }
                "multipleOf" if vt & (INT | FRAC) != 0 => {
                    let b = as_dec(kv, &kp)?;
                    let x = Dec::from_number(v.as_number().ok_or_else(|| invalid(&kp, "number"))?)
                        .ok_or_else(|| invalid(&kp, "number out of range"))?;
                    is_multiple(&x, &b).ok_or_else(|| unsupported(&kp, "multipleOf check out of range"))?
                }
                "minLength" | "maxLength" if vt == STR => {
                    let n = v.as_str().unwrap_or("").chars().count() as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minLength" { n >= b } else { n <= b }
                }
                "pattern" if vt == STR => {
                    let re = Regex::parse(kv.as_str().unwrap_or(""), RegexFlags::default()).map_err(|e| ptr_if_none(e, &kp))?;
                    CharDfa::from_regex(&re, Anchoring::Search)?.accepts(v.as_str().unwrap_or(""))
                }
                "format" if vt == STR && self.doc.format_assertion => match formats::regex_for(kv.as_str().unwrap_or("")) {
                    Some(_) => format_dfa(kv.as_str().unwrap_or(""))?.accepts(v.as_str().unwrap_or("")),
                    None => true,
                },
                "allOf" | "anyOf" | "oneOf" => {
                    let a = kv.as_array().map_or(0, Vec::len);
                    let mut hits = 0;
                    for i in 0..a {
                        let c = self.doc.child(id, &[k, &i.to_string()]);
                        if self.valid(c, v, depth + 1)? {
                            hits += 1;
                        }
                    }
                    match k.as_str() {
                        "allOf" => hits == a,
                        "anyOf" => hits >= 1,
                        _ => hits == 1,
                    }
                }
                "not" => {
                    let c = self.doc.child(id, &["not"]);
                    !self.valid(c, v, depth + 1)?
                }
                "if" => {
                    let c = self.doc.child(id, &["if"]);
                    let branch = if self.valid(c, v, depth + 1)? { "then" } else { "else" };
                    if map.contains_key(branch) {
                        let b = self.doc.child(id, &[branch]);
                        self.valid(b, v, depth + 1)?
                    } else {
                        true
                    }
                }
                "minItems" | "maxItems" if vt == ARR => {
                    let n = v.as_array().map_or(0, Vec::len) as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minItems" { n >= b } else { n <= b }
                }
                "uniqueItems" if vt == ARR && kv == &Value::Bool(true) => {
                    let a = v.as_array().cloned().unwrap_or_default();
                    !(0..a.len()).any(|i| (i + 1..a.len()).any(|j| json_eq(&a[i], &a[j])))
                }
                "items" | "prefixItems" | "additionalItems" if vt == ARR => {
                    let a = v.as_array().cloned().unwrap_or_default();
                    let (prefix, rest): (usize, Option<SchemaId>) = match (k.as_str(), kv) {
                        ("items", Value::Array(p)) => (p.len(), None),
                        ("items", _) => {
                            let pl = if draft >= Draft::D2020 { map.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len) } else { 0 };
                            (pl, Some(self.doc.child(id, &["items"])))
                        }
                        ("prefixItems", Value::Array(p)) => {
                            let closed = self.opts.strict_mode && !map.contains_key("items") && !map.contains_key("unevaluatedItems");
                            if closed && a.len() > p.len() {
                                return Ok(false);
                            }
                            (p.len(), None)
                        }
                        ("additionalItems", _) => match map.get("items") {
                            Some(Value::Array(p)) if draft <= Draft::D2019 => (p.len(), Some(self.doc.child(id, &["additionalItems"]))),
                            _ => (usize::MAX, None),
                        },
                        _ => (0, None),
                    };
                    let mut ok = true;
                    for (i, x) in a.iter().enumerate() {
                        let s = if i < prefix {
                            match (k.as_str(), kv) {
                                ("items" | "prefixItems", Value::Array(_)) => Some(self.doc.child(id, &[k, &i.to_string()])),
                                _ => None,
                            }
                        } else {
                            if k == "items" && kv.is_array() && self.opts.strict_mode && !map.contains_key("additionalItems") {
                                ok = false;
                                break;
                            }
                            rest
                        };
                        if let Some(s) = s {
                            if !self.valid(s, x, depth + 1)? {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                "contains" if vt == ARR => {
                    let c = self.doc.child(id, &["contains"]);
                    let mut hits = 0u64;
                    for x in v.as_array().cloned().unwrap_or_default() {
                        if self.valid(c, &x, depth + 1)? {
                            hits += 1;
                        }
                    }
                    let lo = map.get("minContains").and_then(Value::as_u64).unwrap_or(1);
                    let hi = map.get("maxContains").and_then(Value::as_u64);
                    hits >= lo && hi.is_none_or(|h| hits <= h)
                }
                "required" if vt == OBJ => {
                    let o = v.as_object().cloned().unwrap_or_default();
                    kv.as_array().is_some_and(|a| a.iter().all(|r| r.as_str().is_some_and(|r| o.contains_key(r))))
                }
                "minProperties" | "maxProperties" if vt == OBJ => {
                    let n = v.as_object().map_or(0, serde_json::Map::len) as u64;
                    let b = as_count(kv, &kp)?;
                    if k == "minProperties" { n >= b } else { n <= b }
                }
                "propertyNames" if vt == OBJ => {
                    let c = self.doc.child(id, &["propertyNames"]);
                    let mut ok = true;
                    for key in v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                        if !self.valid(c, &Value::String(key), depth + 1)? {
                            ok = false;
                            break;
                        }
                    }
                    ok
                }
                "properties" | "patternProperties" | "additionalProperties" if vt == OBJ => {
                    self.valid_props(id, &map, k, v, depth)?
                }
                "dependentRequired" | "dependentSchemas" | "dependencies" if vt == OBJ => {
                    let o = v.as_object().cloned().unwrap_or_default();
                    let mut ok = true;
                    for (name, dep) in kv.as_object().cloned().unwrap_or_default() {
                        if !o.contains_key(&name) {
                            continue;
                        }
                        match dep {
                            Value::Array(req) => {
                                if !req.iter().all(|r| r.as_str().is_some_and(|r| o.contains_key(r))) {
                                    ok = false;
                                }
                            }
                            _ => {
                                let c = self.doc.child(id, &[k, &name]);
                                if !self.valid(c, v, depth + 1)? {
                                    ok = false;
                                }
                            }
                        }
                    }
                    ok
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    return Err(unsupported(&kp, format!("{k} inside enum/const validation is not supported")))
                }
                _ => true,
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn valid_props(
        &mut self,
        id: SchemaId,
        map: &serde_json::Map<String, Value>,
        k: &str,
        v: &Value,
        depth: usize,
    ) -> Result<bool> {
        let o = v.as_object().cloned().unwrap_or_default();
        let props = map.get("properties").and_then(Value::as_object);
        let pats = map.get("patternProperties").and_then(Value::as_object);
        for (name, x) in &o {
            let in_props = props.is_some_and(|p| p.contains_key(name));
            let mut matched = false;
            if let Some(pats) = pats {
                for pat in pats.keys() {
                    let re = Regex::parse(pat, RegexFlags::default())?;
                    if CharDfa::from_regex(&re, Anchoring::Search)?.accepts(name) {
                        matched = true;
                        if k == "patternProperties" {
                            let c = self.doc.child(id, &["patternProperties", pat]);
                            if !self.valid(c, x, depth + 1)? {
                                return Ok(false);
                            }
                        }
                    }
                }
            }
            match k {
                "properties" if in_props => {
                    let c = self.doc.child(id, &["properties", name]);
                    if !self.valid(c, x, depth + 1)? {
                        return Ok(false);
                    }
                }
                "properties" if !in_props && !matched => {
                    let closed = self.opts.strict_mode
                        && !map.contains_key("additionalProperties")
                        && !map.contains_key("patternProperties")
                        && !map.contains_key("unevaluatedProperties");
                    if closed {
                        return Ok(false);
                    }
                }
                "additionalProperties" if !in_props && !matched => {
                    let c = self.doc.child(id, &["additionalProperties"]);
                    if !self.valid(c, x, depth + 1)? {
                        return Ok(false);
                    }
                }
                _ => {}
            }
        }
        Ok(true)
    }
}

/// The automaton (full match, over decoded characters) of a format with a regular definition.
fn format_dfa(f: &str) -> Result<CharDfa> {
    let re = Regex::parse(formats::regex_for(f).unwrap_or_default(), RegexFlags::default())?;
    CharDfa::from_regex(&re, Anchoring::FullMatch)
}

/// Whether `x` is an integer multiple of `d` (exact decimal arithmetic). `None` when the scaled
/// divisor does not fit in u128.
fn is_multiple(x: &Dec, d: &Dec) -> Option<bool> {
    let s = x.frac.len().max(d.frac.len());
    let scaled = |v: &Dec| -> Vec<u8> {
        let mut digits = v.int.clone();
        digits.extend_from_slice(&v.frac);
        digits.extend(std::iter::repeat(0).take(s - v.frac.len()));
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
