//! Prints each built rule of a JSON Schema's automata: its states, how many read bytes and how many
//! call rules (with the called rules' names): `dump_automata SCHEMA.json`.
use grammask_core::compiler::{Automata, StateId};
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};

fn main() {
    let path = std::env::args().nth(1).expect("usage: dump_automata SCHEMA.json");
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema = v.get("schema").map_or(text.clone(), ToString::to_string);
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let g = json_schema_to_grammar(&schema, &opts).unwrap();
    let a = Automata::build(&g).unwrap();
    let mut per_rule = std::collections::BTreeMap::<u32, (usize, usize, std::collections::BTreeSet<String>)>::new();
    for s in 0..a.states().len() as u32 {
        let st = a.state(StateId(s));
        let e = per_rule.entry(st.rule.0).or_default();
        e.0 += 1;
        if !a.rule_edges(StateId(s)).is_empty() {
            e.1 += 1;
        }
        for &(r, _) in a.rule_edges(StateId(s)) {
            e.2.insert(a.rule_name(r).to_string());
        }
    }
    for (r, (n, calling, callees)) in per_rule {
        let callees: Vec<_> = callees.into_iter().collect();
        println!(
            "{} states {n} calling {calling} -> {}",
            a.rule_name(grammask_core::grammar::RuleId(r)),
            callees.join(" ")
        );
    }
}
