//! The parsed form of a pattern: what [`super::parser`] produces and what both the NFA builder
//! ([`super::nfa`]) and the direct EBNF printer ([`super::emit`]) consume. Case folding and `.` are
//! already resolved into [`CharSet`]s, so every node has one meaning independent of flags.
//!
//! Invariant: the tree depth is at most `3 * MAX_NESTING + 3` (one group, one alternation and one
//! repetition per parenthesis level), so recursive walks over it are bounded.
use super::charset::CharSet;

/// A zero-width assertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assertion {
    /// `^` (start of input; patterns are never multiline).
    Start,
    /// `$` (end of input).
    End,
    /// `\b` with ECMA-262 ASCII word characters.
    WordBoundary,
    /// `\B`.
    NotWordBoundary,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Node {
    /// The empty string.
    Empty,
    /// One codepoint from the set (an empty set matches nothing).
    Set(CharSet),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    /// `min..=max` copies of `sub`; `max == None` is unbounded. Invariant: `min <= max`.
    Repeat {
        sub: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
    Assert(Assertion),
}

/// Drops without recursion, so a deep tree cannot overflow the caller's stack.
impl Drop for Node {
    fn drop(&mut self) {
        let mut stack: Vec<Node> = Vec::new();
        let take = |n: &mut Node, stack: &mut Vec<Node>| match n {
            Node::Concat(v) | Node::Alt(v) => stack.append(v),
            Node::Repeat { sub, .. } => stack.push(std::mem::replace(&mut **sub, Node::Empty)),
            _ => {}
        };
        take(self, &mut stack);
        while let Some(mut n) = stack.pop() {
            take(&mut n, &mut stack);
        }
    }
}

impl Node {
    /// Whether any assertion occurs in the tree.
    pub fn has_assertion(&self, want: &dyn Fn(Assertion) -> bool) -> bool {
        match self {
            Node::Empty | Node::Set(_) => false,
            Node::Assert(a) => want(*a),
            Node::Concat(v) | Node::Alt(v) => {
                for n in v {
                    if n.has_assertion(want) {
                        return true;
                    }
                }
                false
            }
            Node::Repeat { sub, .. } => sub.has_assertion(want),
        }
    }
}
