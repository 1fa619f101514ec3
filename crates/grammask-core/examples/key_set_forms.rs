//! Checks the closed forms a lazy key-set build relies on against the generic build, per
//! any-order key-set rule `obj_N.MASK_C_S` of each schema (`key_set_forms LIST`, MaskBench
//! files or schemas, `strict_mode=False`): nullable start = the body's `""`, FOLLOW(R(M)) =
//! FOLLOW(R(0,0,false)), and the automaton's state count against the plain shape's
//! (`sep` symbols + entry-next pairs + 2). Prints per schema the rules, the mismatches, and how
//! many rules have an inlined part (state count above the plain shape's).
use grammask_core::compiler::Automata;
use grammask_core::follow::nullable_and_follow;
use grammask_core::grammar::{Expr, ExprId, Grammar, RuleId};
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};

#[path = "common/schema_list.rs"]
mod schema_list;

/// (may end, separator symbols, entry-next pairs, pairs looping back to the rule itself) of a
/// key-set rule body as `key_sets::build` writes it: `["" |] [sep] (e0 n0 | ...)` (one pair
/// without the parentheses), `""`, or one rule reference (offers nothing).
fn shape(g: &Grammar, r: RuleId) -> Option<(bool, usize, usize, usize)> {
    let body = g.rule(r).body;
    let (empty, rest) = match g.expr(body) {
        Expr::Bytes(b) if b.is_empty() => return Some((true, 0, 0, 0)),
        Expr::RuleRef(_) => return Some((false, 0, 0, 0)),
        Expr::Choice(c) if matches!(g.expr(c[0]), Expr::Bytes(b) if b.is_empty()) => (true, *c.get(1)?),
        _ => (false, body),
    };
    let symbols = |e: &ExprId| match g.expr(*e) {
        Expr::Bytes(b) => b.len(),
        _ => 1,
    };
    let (sep, pairs): (usize, Vec<ExprId>) = match g.expr(rest) {
        Expr::Choice(pairs) => (0, pairs.to_vec()),
        Expr::Seq(items) => match g.expr(*items.last()?) {
            Expr::Choice(pairs) => (items[..items.len() - 1].iter().map(symbols).sum(), pairs.to_vec()),
            _ => (items[..items.len() - 2].iter().map(symbols).sum(), vec![rest]),
        },
        _ => return None,
    };
    // A pair `e n` whose `n` is this rule: a tail-group loop back to its start.
    let loops = pairs
        .iter()
        .filter(|&&p| match g.expr(p) {
            Expr::Seq(items) => matches!(g.expr(*items.last().unwrap()), Expr::RuleRef(n) if *n == r),
            _ => false,
        })
        .count();
    Some((empty, sep, pairs.len(), loops))
}

fn main() {
    let list = std::env::args().nth(1).expect("usage: key_set_forms LIST");
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    let mut all = [0usize; 7];
    for (path, schema) in schema_list::schema_list(&list) {
        let g = json_schema_to_grammar(&schema, &opts).expect("grammar");
        let a = Automata::build_on(&g, 1).expect("automata");
        let show: usize = std::env::var("SHOW").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        if show > 0 {
            std::fs::write("/tmp/lazy59/probe.ebnf", g.to_string()).unwrap();
        }
        let mut shown = 0;
        let mut first_follow = std::collections::HashMap::new();
        let (nullable, follow) = nullable_and_follow(&a);
        let mut count = vec![0usize; a.num_rules()];
        for s in a.states() {
            count[s.rule.index()] += 1;
        }
        // (rules, nullable mismatches, FOLLOW mismatches, plain-count matches, above plain, below plain,
        // inlined)
        let mut n = [0usize; 7];
        for &r in g.own_class() {
            let name = &g.rule(r).name;
            let Some((base, _)) = name.rsplit_once('.') else { continue };
            let start = a.rule_start(r);
            if a.state(start).rule != r {
                continue;
            }
            // Inlined into its one user (an object's `R(0,0,false)`): an empty automaton.
            if count[r.index()] == 1
                && !a.state(start).is_final
                && a.byte_edges(start).is_empty()
                && a.rule_edges(start).is_empty()
            {
                n[6] += 1;
                continue;
            }
            let Some((empty, sep, pairs, loops)) = shape(&g, r) else { continue };
            n[0] += 1;
            n[1] += usize::from(nullable[start.0 as usize] != empty);
            // FOLLOW is one set per object: that of its first rule with an automaton.
            let one = *first_follow.entry(base.to_string()).or_insert(follow[r.index()]);
            n[2] += usize::from(follow[r.index()] != one);
            // `""`: one final state; the rule matching nothing: inlined, one dead state; else the
            // separator's chain, the choice, one state per pair not looping back, and the end if
            // one does not.
            let plain = if pairs == 0 { 1 } else { sep + 1 + (pairs - loops) + usize::from(pairs > loops) };
            let built = count[r.index()];
            if shown < show && built != plain {
                shown += 1;
                let r0 = g.rule_by_name(&format!("{base}.0_0_0")).unwrap_or(r);
                println!(
                    "  {name}: empty {empty} sep {sep} pairs {pairs} loops {loops} built {built} plain {plain} nullable {} follow {:?} follow0 {:?}",
                    nullable[start.0 as usize], follow[r.index()], follow[r0.index()]
                );
            }
            n[3 + usize::from(built != plain) + usize::from(built < plain)] += 1;
        }
        println!(
            "{path}: key-set rules {} nullable-mismatch {} follow-mismatch {} plain-count {} above {} below {} inlined {}",
            n[0], n[1], n[2], n[3], n[4], n[5], n[6]
        );
        for (x, y) in all.iter_mut().zip(n) {
            *x += y;
        }
    }
    println!("all: {all:?}");
}
