//! Schema document indexing: the draft, every subschema with its JSON pointer and base URI, `$id`
//! resources, `$anchor`/`$dynamicAnchor` names, and `$ref` resolution (local pointers, anchors,
//! ids embedded in the document, and documents of a caller-given registry, by URI). Other remote
//! references are refused with `Unsupported`; nothing is fetched.
//!
//! Subschemas are interned as [`SchemaId`]s; the converter never walks the raw document again.

use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::fasthash::FastMap;
use crate::limits::MAX_NESTING;

/// JSON Schema dialect, from `$schema` (2020-12 when absent or unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draft {
    D4,
    D6,
    D7,
    D2019,
    D2020,
}

/// Index of an interned subschema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaId(pub u32);

pub struct Node<'a> {
    pub value: &'a Value,
    /// The JSON pointer, shared: the converter keeps it for every merge and validation
    /// (PERF: cloning a `String` there cost an allocation per visit).
    pub ptr: Rc<str>,
    pub base: String,
}

pub struct Doc<'a> {
    pub draft: Draft,
    /// `format` is an assertion, except under an explicit 2019-09 or 2020-12 `$schema`, where the
    /// specification makes it an annotation by default.
    pub format_assertion: bool,
    pub nodes: Vec<Node<'a>>,
    /// Bumped by every [`Doc::walk`]: the index (nodes, pointers, anchors, resources) changes
    /// only within a walk or just before one (`load_remote`), so an unchanged `version` means
    /// an unchanged index. The resolved-reference cache may grow meanwhile; it only repeats
    /// what the index answers.
    pub version: u32,
    by_ptr: FastMap<String, SchemaId>,
    /// Children by (parent, address of the child's value): every subschema the walk pushes below
    /// a node, which is what [`Doc::child`] asks for. Invariant: `children[(p, addr of v)]` is
    /// `by_ptr[ptr of p + path to v]` (PERF: spares formatting and hashing the child's pointer).
    children: FastMap<(SchemaId, usize), SchemaId>,
    /// Resolved `$ref`/`$dynamicRef` texts by the schema they are found in (a resolution depends
    /// only on the schema's base URI and the text; the converter asks again for every goal).
    resolved: FastMap<SchemaId, Vec<(String, SchemaId)>>,
    /// Resource URI (no fragment) -> pointer of the resource root.
    resources: HashMap<String, String>,
    /// `uri#name` -> pointer.
    anchors: HashMap<String, String>,
    /// `$dynamicAnchor` name -> pointers.
    dyn_anchors: HashMap<String, Vec<String>>,
    root: &'a Value,
    /// Caller-given documents by URI (no fragment), indexed on first reference.
    registry: HashMap<String, &'a Value>,
    /// Indexed registry documents: pointer prefix (`uri#`) and document. Their subschemas' pointers
    /// start with the prefix; the main document's start with `/` or are empty.
    remote_roots: Vec<(String, &'a Value)>,
}

fn draft_of(schema_uri: Option<&str>) -> Draft {
    match schema_uri {
        Some(s) if s.contains("draft-04") => Draft::D4,
        Some(s) if s.contains("draft-06") => Draft::D6,
        Some(s) if s.contains("draft-07") => Draft::D7,
        Some(s) if s.contains("2019-09") => Draft::D2019,
        _ => Draft::D2020,
    }
}

/// A registry key or a resource URI: the URI without fragment (`http://x/s#` and `http://x/s` name
/// one document).
pub fn registry_key(uri: &str) -> &str {
    strip_fragment(uri)
}

fn escape_token(t: &str) -> String {
    let mut s = String::with_capacity(t.len());
    push_escaped(&mut s, t);
    s
}

/// Appends `t` to `out` as a JSON pointer reference token (`~` as `~0`, `/` as `~1`).
fn push_escaped(out: &mut String, t: &str) {
    if !t.contains(['~', '/']) {
        out.push_str(t);
        return;
    }
    for c in t.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

fn strip_fragment(u: &str) -> &str {
    u.split_once('#').map_or(u, |(a, _)| a)
}

fn has_scheme(u: &str) -> bool {
    match u.find(':') {
        Some(i) => {
            let s = &u[..i];
            !s.is_empty()
                && s.as_bytes()[0].is_ascii_alphabetic()
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
        }
        None => false,
    }
}

/// RFC 3986 reference resolution, without dot-segment removal beyond `./`.
pub fn resolve_uri(base: &str, r: &str) -> String {
    if has_scheme(r) {
        return r.to_string();
    }
    let b = strip_fragment(base);
    if r.starts_with('#') || r.is_empty() {
        return format!("{b}{r}");
    }
    if let Some(rest) = r.strip_prefix("//") {
        let scheme = b.split_once(':').map_or("", |(s, _)| s);
        return format!("{scheme}://{rest}");
    }
    if r.starts_with('/') {
        // scheme://authority
        if let Some(i) = b.find("://") {
            let after = &b[i + 3..];
            let auth_end = after.find('/').map_or(b.len(), |j| i + 3 + j);
            return format!("{}{r}", &b[..auth_end]);
        }
        return r.to_string();
    }
    let r = r.strip_prefix("./").unwrap_or(r);
    match b.rfind('/') {
        Some(i) => format!("{}{r}", &b[..=i]),
        None => r.to_string(),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl<'a> Doc<'a> {
    #[cfg(test)]
    pub fn new(root: &'a Value) -> Result<Doc<'a>> {
        Doc::with_registry(root, HashMap::new())
    }

    /// The document `root`, whose references may also name the documents of `registry` (keys are
    /// URIs without fragment, see [`registry_key`]).
    pub fn with_registry(root: &'a Value, registry: HashMap<String, &'a Value>) -> Result<Doc<'a>> {
        let draft = draft_of(root.get("$schema").and_then(Value::as_str));
        let explicit_new =
            root.get("$schema").and_then(Value::as_str).is_some_and(|s| s.contains("2019-09") || s.contains("2020-12"));
        let mut doc = Doc {
            draft,
            format_assertion: !explicit_new,
            nodes: Vec::new(),
            version: 0,
            by_ptr: FastMap::default(),
            children: FastMap::default(),
            resolved: FastMap::default(),
            resources: HashMap::new(),
            anchors: HashMap::new(),
            dyn_anchors: HashMap::new(),
            root,
            registry,
            remote_roots: Vec::new(),
        };
        doc.resources.insert(String::new(), String::new());
        doc.walk(root, String::new(), String::new())?;
        Ok(doc)
    }

    /// Indexes the subschema tree at `v` (explicit stack; depth bounded by `MAX_NESTING`).
    fn walk(&mut self, v: &'a Value, ptr: String, base: String) -> Result<()> {
        let draft = self.draft;
        self.version = self.version.wrapping_add(1);
        let doc = self;
        // Explicit stack: (value, pointer, parent base, depth, parent's slot in `parents`).
        let mut stack: Vec<(&'a Value, String, String, usize, Option<usize>)> = vec![(v, ptr, base, 0, None)];
        // The ids of the nodes whose children are on the stack: a node is interned right after
        // its children are pushed, so before any of them is popped.
        let mut parents: Vec<SchemaId> = Vec::new();
        while let Some((v, ptr, parent_base, depth, parent)) = stack.pop() {
            if depth > MAX_NESTING {
                return Err(Error::limit("schema nesting depth", MAX_NESTING).at_pointer(ptr));
            }
            let mut base = parent_base.clone();
            let slot = parents.len();
            if let Value::Object(m) = v {
                parents.push(SchemaId(u32::MAX));
                let me = Some(slot);
                let id_key = if draft == Draft::D4 { "id" } else { "$id" };
                // Up to draft 7 `$ref` overrides its siblings, `$id` included.
                let ref_hides_id = draft <= Draft::D7 && m.contains_key("$ref");
                if let Some(id) = m.get(id_key).and_then(Value::as_str).filter(|_| !ref_hides_id) {
                    if id.starts_with('#') && draft <= Draft::D7 {
                        doc.anchors.insert(format!("{}{id}", strip_fragment(&base)), ptr.clone());
                    } else {
                        let abs = resolve_uri(&base, id);
                        base = strip_fragment(&abs).to_string();
                        doc.resources.entry(base.clone()).or_insert_with(|| ptr.clone());
                        if let Some((_, frag)) = abs.split_once('#') {
                            if !frag.is_empty() {
                                doc.anchors.insert(abs.clone(), ptr.clone());
                            }
                        }
                    }
                }
                if let Some(a) = m.get("$anchor").and_then(Value::as_str) {
                    doc.anchors.insert(format!("{base}#{a}"), ptr.clone());
                }
                if let Some(a) = m.get("$dynamicAnchor").and_then(Value::as_str) {
                    doc.anchors.entry(format!("{base}#{a}")).or_insert_with(|| ptr.clone());
                    doc.dyn_anchors.entry(a.to_string()).or_default().push(ptr.clone());
                }
                for (k, sub) in m {
                    let child = |key: &str| format!("{ptr}/{}", escape_token(key));
                    match k.as_str() {
                        "additionalProperties"
                        | "additionalItems"
                        | "contains"
                        | "propertyNames"
                        | "not"
                        | "if"
                        | "then"
                        | "else"
                        | "unevaluatedItems"
                        | "unevaluatedProperties"
                        | "items"
                        | "contentSchema" => {
                            if let Value::Array(a) = sub {
                                for (i, s) in a.iter().enumerate() {
                                    stack.push((s, format!("{}/{i}", child(k)), base.clone(), depth + 1, me));
                                }
                            } else {
                                stack.push((sub, child(k), base.clone(), depth + 1, me));
                            }
                        }
                        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
                        | "dependencies" => {
                            if let Value::Object(mm) = sub {
                                for (kk, s) in mm {
                                    // The converter asks for every property's schema, so a value
                                    // that is not a schema is an error here, not a skipped child.
                                    if matches!(k.as_str(), "properties" | "patternProperties")
                                        && !s.is_object()
                                        && !s.is_boolean()
                                    {
                                        return Err(Error::new(
                                            ErrorKind::InvalidSchema,
                                            format!("the value of {k:?} {kk:?} is not a schema"),
                                        )
                                        .at_pointer(ptr.clone()));
                                    }
                                    if s.is_object() || s.is_boolean() {
                                        stack.push((
                                            s,
                                            format!("{}/{}", child(k), escape_token(kk)),
                                            base.clone(),
                                            depth + 1,
                                            me,
                                        ));
                                    }
                                }
                            }
                        }
                        "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                            if let Value::Array(a) = sub {
                                for (i, s) in a.iter().enumerate() {
                                    stack.push((s, format!("{}/{i}", child(k)), base.clone(), depth + 1, me));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            let id = doc.intern(v, ptr, base);
            if v.is_object() {
                parents[slot] = id;
            }
            if let Some(p) = parent {
                doc.children.insert((parents[p], std::ptr::from_ref(v) as usize), id);
            }
        }
        Ok(())
    }

    fn intern(&mut self, v: &'a Value, ptr: String, base: String) -> SchemaId {
        if let Some(&id) = self.by_ptr.get(&ptr) {
            return id;
        }
        let id = SchemaId(self.nodes.len() as u32);
        let shared: Rc<str> = Rc::from(ptr.as_str());
        self.by_ptr.insert(ptr, id);
        self.nodes.push(Node { value: v, ptr: shared, base });
        id
    }

    pub fn root_id(&self) -> SchemaId {
        self.by_ptr[""]
    }

    /// The subschema at JSON pointer `ptr`, if indexed.
    pub fn id_of(&self, ptr: &str) -> Option<SchemaId> {
        self.by_ptr.get(ptr).copied()
    }

    /// Whether any subschema uses `unevaluatedProperties` or `unevaluatedItems` (registry
    /// documents, indexed only when referenced, are searched as raw JSON).
    pub fn has_unevaluated(&self) -> bool {
        fn mentions(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    m.contains_key("unevaluatedProperties")
                        || m.contains_key("unevaluatedItems")
                        || m.values().any(mentions)
                }
                Value::Array(a) => a.iter().any(mentions),
                _ => false,
            }
        }
        self.nodes.iter().any(|n| {
            n.value
                .as_object()
                .is_some_and(|m| m.contains_key("unevaluatedProperties") || m.contains_key("unevaluatedItems"))
        }) || self.registry.values().any(|v| mentions(v))
    }

    pub fn node(&self, id: SchemaId) -> &Node<'a> {
        &self.nodes[id.0 as usize]
    }

    /// The subschema at `key` (and optional index/name) below `id`.
    /// Every child the converter asks for was indexed by [`Doc::walk`] (same keyword list).
    pub fn child(&self, id: SchemaId, path: &[&str]) -> SchemaId {
        // Through the children map: each step to a registered child moves to it; steps through
        // a keyword's map or array (`properties`, `allOf`) stay on the same node.
        let (mut cur, mut v, mut found) = (id, self.node(id).value, false);
        for seg in path {
            let next = match v {
                Value::Object(m) => m.get(*seg),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            };
            let Some(next) = next else {
                found = false;
                break;
            };
            v = next;
            found = match self.children.get(&(cur, std::ptr::from_ref(v) as usize)) {
                Some(&c) => {
                    cur = c;
                    true
                }
                None => false,
            };
        }
        if found {
            return cur;
        }
        let base = &self.node(id).ptr;
        let mut p = String::with_capacity(base.len() + path.iter().map(|s| s.len() + 1).sum::<usize>());
        p.push_str(base);
        for seg in path {
            p.push('/');
            push_escaped(&mut p, seg);
        }
        match self.by_ptr.get(&p) {
            Some(&c) => c,
            None => unreachable_child(&p),
        }
    }

    /// The subschema whose value is `v`, a value found below node `id` at `path` (the keyword and
    /// optional index/name, as for [`Doc::child`]); `v` names it without looking `path` up
    /// (PERF: merging looked every property's name up in the node's keyword maps).
    pub fn child_at(&self, id: SchemaId, v: &'a Value, path: &[&str]) -> SchemaId {
        match self.children.get(&(id, std::ptr::from_ref(v) as usize)) {
            Some(&c) => c,
            None => self.child(id, path),
        }
    }

    /// Resolves `$ref` (or `$dynamicRef`) text found in schema `from`.
    pub fn resolve_ref(&mut self, from: SchemaId, r: &str, kw: &str) -> Result<SchemaId> {
        if let Some(&(_, id)) = self.resolved.get(&from).and_then(|v| v.iter().find(|(t, _)| t == r)) {
            return Ok(id);
        }
        let id = self.resolve_ref_uncached(from, r, kw)?;
        self.resolved.entry(from).or_default().push((r.to_string(), id));
        Ok(id)
    }

    fn resolve_ref_uncached(&mut self, from: SchemaId, r: &str, kw: &str) -> Result<SchemaId> {
        let here = format!("{}/{kw}", self.node(from).ptr);
        let abs = resolve_uri(&self.node(from).base, r);
        let (res, frag) = abs.split_once('#').unwrap_or((abs.as_str(), ""));
        let frag = percent_decode(frag);
        let res_ptr = match self.resources.get(res) {
            Some(p) => p.clone(),
            None => self.load_remote(res, r, &here)?,
        };
        let target_ptr = if frag.is_empty() {
            res_ptr
        } else if frag.starts_with('/') {
            format!("{res_ptr}{frag}")
        } else {
            match self.anchors.get(&format!("{res}#{frag}")) {
                Some(p) => p.clone(),
                None => {
                    return Err(Error::new(ErrorKind::InvalidSchema, format!("reference {r:?}: no such anchor"))
                        .at_pointer(here))
                }
            }
        };
        if let Some(&id) = self.by_ptr.get(&target_ptr) {
            return Ok(id);
        }
        // A pointer into a place the walk did not register (e.g. inside an unknown keyword).
        let (mut v, rest) = match self.remote_roots.iter().find(|(p, _)| target_ptr.starts_with(p.as_str())) {
            Some((p, doc)) => (*doc, &target_ptr[p.len()..]),
            None => (self.root, target_ptr.as_str()),
        };
        for seg in rest.split('/').skip(1) {
            let seg = seg.replace("~1", "/").replace("~0", "~");
            v = match v {
                Value::Object(m) => m.get(&seg),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            }
            .ok_or_else(|| {
                Error::new(ErrorKind::InvalidSchema, format!("reference {r:?} points to nothing"))
                    .at_pointer(here.clone())
            })?;
        }
        if !v.is_object() && !v.is_boolean() {
            return Err(
                Error::new(ErrorKind::InvalidSchema, format!("reference {r:?} is not a schema")).at_pointer(here)
            );
        }
        let base = self.node(from).base.clone();
        self.walk(v, target_ptr.clone(), base)?;
        Ok(self.by_ptr[&target_ptr])
    }

    /// Indexes the registry document of URI `res` (first reference to it) and returns the pointer
    /// of its root; `Unsupported` when the registry has no such document or it is of another
    /// draft (one draft per conversion).
    fn load_remote(&mut self, res: &str, r: &str, here: &str) -> Result<String> {
        let Some(&v) = self.registry.get(res) else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("remote reference {r:?} cannot be resolved (no document {res:?} in the schema registry)"),
            )
            .at_pointer(here.to_string()));
        };
        if let Some(s) = v.get("$schema").and_then(Value::as_str) {
            if draft_of(Some(s)) != self.draft {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "remote reference {r:?}: document {res:?} is of draft {s:?}, another draft than the root's"
                    ),
                )
                .at_pointer(here.to_string()));
            }
        }
        let prefix = format!("{res}#");
        self.resources.insert(res.to_string(), prefix.clone());
        self.remote_roots.push((prefix.clone(), v));
        self.walk(v, prefix.clone(), res.to_string())?;
        Ok(prefix)
    }

    /// `$dynamicRef`: exact when the anchor name is declared once in the document.
    pub fn resolve_dynamic(&mut self, from: SchemaId, r: &str) -> Result<SchemaId> {
        let here = format!("{}/$dynamicRef", self.node(from).ptr);
        let initial = self.resolve_ref(from, r, "$dynamicRef");
        if let Some((_, name)) = r.split_once('#') {
            // The "bookend": the reference is dynamic only when its initial target declares
            // `$dynamicAnchor: name`; otherwise it behaves like `$ref`.
            if let Ok(t) = initial {
                if self.node(t).value.get("$dynamicAnchor").and_then(Value::as_str) != Some(name) {
                    return Ok(t);
                }
            }
            if let Some(ptrs) = self.dyn_anchors.get(name) {
                // The dynamic scope always starts at the root resource, so an anchor it declares
                // is the outermost one on every evaluation path.
                let root_base = &self.node(self.root_id()).base;
                let in_root =
                    ptrs.iter().find(|p| self.by_ptr.get(*p).is_some_and(|&id| &self.node(id).base == root_base));
                if let Some(p) = in_root {
                    return Ok(self.by_ptr[p]);
                }
                if ptrs.len() == 1 {
                    let p = ptrs[0].clone();
                    if let Some(&id) = self.by_ptr.get(&p) {
                        return Ok(id);
                    }
                }
                return Err(
                    Error::new(ErrorKind::Unsupported, "$dynamicRef with several dynamic scopes").at_pointer(here)
                );
            }
        }
        initial
    }
}

fn unreachable_child(p: &str) -> SchemaId {
    // The walk registers every child the converter asks for; reaching this is a bug.
    panic!("internal: subschema {p} was not indexed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_resolution() {
        assert_eq!(resolve_uri("http://x.com/a/b.json", "c.json"), "http://x.com/a/c.json");
        assert_eq!(resolve_uri("http://x.com/a/b.json", "/d"), "http://x.com/d");
        assert_eq!(resolve_uri("http://x.com/a/b.json#f", "#g"), "http://x.com/a/b.json#g");
        assert_eq!(resolve_uri("", "#/defs/a"), "#/defs/a");
        assert_eq!(resolve_uri("http://x.com/", "urn:y"), "urn:y");
    }

    #[test]
    fn refs_resolve_pointers_and_anchors() {
        let v: Value = serde_json::from_str(
            r#"{"$defs":{"a":{"$anchor":"A","type":"string"},"b":{"$id":"http://e.com/b","$defs":{"c":{}}}}}"#,
        )
        .unwrap();
        let mut d = Doc::new(&v).unwrap();
        let root = d.root_id();
        let a = d.resolve_ref(root, "#/$defs/a", "$ref").unwrap();
        assert_eq!(&*d.node(a).ptr, "/$defs/a");
        assert_eq!(d.resolve_ref(root, "#A", "$ref").unwrap(), a);
        let c = d.resolve_ref(root, "http://e.com/b#/$defs/c", "$ref").unwrap();
        assert_eq!(&*d.node(c).ptr, "/$defs/b/$defs/c");
        assert_eq!(d.resolve_ref(root, "http://other/x", "$ref").unwrap_err().kind(), ErrorKind::Unsupported);
    }

    #[test]
    fn dynamic_ref_without_bookend_is_a_plain_ref() {
        // The initial target has `$anchor: items` but no `$dynamicAnchor: items`, so the reference
        // is static even though another schema declares `$dynamicAnchor: items`.
        let schema = |target: &str| -> Value {
            serde_json::from_str(&format!(
                r##"{{"$id":"http://e.com/root","$defs":{{"foo":{{"$dynamicAnchor":"items","type":"string"}},
                "list":{{"$id":"list","items":{{"$dynamicRef":"#items"}},"$defs":{{"items":{target}}}}}}}}}"##
            ))
            .unwrap()
        };
        let plain = schema(r#"{"$anchor":"items"}"#);
        let mut d = Doc::new(&plain).unwrap();
        let items = d.child(d.root_id(), &["$defs", "list", "items"]);
        let t = d.resolve_dynamic(items, "#items").unwrap();
        assert_eq!(&*d.node(t).ptr, "/$defs/list/$defs/items");
        // With the bookend the reference is dynamic; the root resource declares the anchor, and
        // the root resource is the outermost dynamic scope of every path: `foo` wins.
        let bookend = schema(r#"{"$dynamicAnchor":"items"}"#);
        let mut d = Doc::new(&bookend).unwrap();
        let items = d.child(d.root_id(), &["$defs", "list", "items"]);
        let t = d.resolve_dynamic(items, "#items").unwrap();
        assert_eq!(&*d.node(t).ptr, "/$defs/foo");
    }

    #[test]
    fn dynamic_ref_with_scopes_outside_the_root_resource_is_refused() {
        // Two resources other than the root declare the anchor: the target depends on the path.
        let v: Value = serde_json::from_str(
            r##"{"$id":"http://e.com/root","$defs":{"foo":{"$id":"foo","$dynamicAnchor":"items","type":"string"},
            "list":{"$id":"list","items":{"$dynamicRef":"#items"},"$defs":{"items":{"$dynamicAnchor":"items"}}}}}"##,
        )
        .unwrap();
        let mut d = Doc::new(&v).unwrap();
        let items = d.child(d.root_id(), &["$defs", "list", "items"]);
        assert_eq!(d.resolve_dynamic(items, "#items").unwrap_err().kind(), ErrorKind::Unsupported);
    }

    #[test]
    fn registry_documents_resolve_by_uri() {
        let root: Value = serde_json::from_str(
            r#"{"$id":"http://e.com/dir/root.json","properties":{"a":{"$ref":"other.json#/$defs/n"}}}"#,
        )
        .unwrap();
        let other: Value =
            serde_json::from_str(r##"{"$defs":{"n":{"$ref":"#/$defs/m"},"m":{"type":"integer"}}}"##).unwrap();
        let registry = HashMap::from([("http://e.com/dir/other.json".to_string(), &other)]);
        let mut d = Doc::with_registry(&root, registry).unwrap();
        let a = d.child(d.root_id(), &["properties", "a"]);
        let n = d.resolve_ref(a, "other.json#/$defs/n", "$ref").unwrap();
        assert_eq!(&*d.node(n).ptr, "http://e.com/dir/other.json#/$defs/n");
        // References inside the registry document resolve against its own URI.
        let m = d.resolve_ref(n, "#/$defs/m", "$ref").unwrap();
        assert_eq!(d.node(m).value["type"], "integer");
        assert_eq!(d.resolve_ref(a, "missing.json", "$ref").unwrap_err().kind(), ErrorKind::Unsupported);
        // A registry document of another draft is refused (one draft per conversion).
        let d7: Value = serde_json::from_str(r#"{"$schema":"http://json-schema.org/draft-07/schema#"}"#).unwrap();
        let mut d =
            Doc::with_registry(&root, HashMap::from([("http://e.com/dir/other.json".to_string(), &d7)])).unwrap();
        assert_eq!(d.resolve_ref(a, "other.json", "$ref").unwrap_err().kind(), ErrorKind::Unsupported);
    }
}
