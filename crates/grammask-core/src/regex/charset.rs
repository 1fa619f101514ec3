//! Sets of Unicode scalar values as sorted ranges: the alphabet of the regex AST and of
//! [`super::CharDfa`] transitions, plus the predefined classes (`\d \w \s`, `.`, `\p{..}`) and
//! simple case folding. Unicode property tables come from `regex-syntax`; nothing else does.
use crate::error::{Error, ErrorKind, Result};

/// Largest Unicode scalar value.
pub const MAX_CHAR: u32 = 0x10_FFFF;
const SURROGATE_LO: u32 = 0xD800;
const SURROGATE_HI: u32 = 0xDFFF;

/// A set of Unicode scalar values.
///
/// Invariant: `ranges` is sorted, every range is `lo <= hi`, ranges neither overlap nor touch
/// (`hi + 1 < next.lo`), and no range contains a surrogate (U+D800..U+DFFF).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    #[must_use]
    pub fn empty() -> CharSet {
        CharSet { ranges: Vec::new() }
    }

    /// Every scalar value.
    #[must_use]
    pub fn full() -> CharSet {
        CharSet { ranges: vec![(0, SURROGATE_LO - 1), (SURROGATE_HI + 1, MAX_CHAR)] }
    }

    #[must_use]
    pub fn single(c: u32) -> CharSet {
        CharSet::from_ranges([(c, c)])
    }

    /// Builds a set from arbitrary ranges: sorts, merges, drops surrogates and values past U+10FFFF,
    /// and ignores reversed ranges.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> CharSet {
        let ranges = ranges.into_iter();
        let mut v: Vec<(u32, u32)> = Vec::with_capacity(ranges.size_hint().0);
        for (lo, hi) in ranges {
            let hi = hi.min(MAX_CHAR);
            if lo > hi {
                continue;
            }
            // Split around the surrogate block.
            if lo < SURROGATE_LO {
                v.push((lo, hi.min(SURROGATE_LO - 1)));
            }
            if hi > SURROGATE_HI {
                v.push((lo.max(SURROGATE_HI + 1), hi));
            }
        }
        v.sort_unstable();
        // Merged in place (`kept` ranges so far, the last one open).
        let mut kept = 0;
        for i in 0..v.len() {
            let (lo, hi) = v[i];
            // Touching across the surrogate gap counts as adjacent only for real neighbours.
            if kept > 0 && lo <= v[kept - 1].1.saturating_add(1) {
                v[kept - 1].1 = v[kept - 1].1.max(hi);
            } else {
                v[kept] = (lo, hi);
                kept += 1;
            }
        }
        v.truncate(kept);
        CharSet { ranges: v }
    }

    #[must_use]
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    #[must_use]
    pub fn contains(&self, c: u32) -> bool {
        self.ranges
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    /// Number of scalar values in the set.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|&(lo, hi)| u64::from(hi - lo) + 1).sum()
    }

    /// The only member, if the set has exactly one.
    #[must_use]
    pub fn as_single(&self) -> Option<u32> {
        match self.ranges.as_slice() {
            [(lo, hi)] if lo == hi => Some(*lo),
            _ => None,
        }
    }

    #[must_use]
    pub fn union(&self, other: &CharSet) -> CharSet {
        CharSet::from_ranges(self.ranges.iter().chain(other.ranges.iter()).copied())
    }

    #[must_use]
    pub fn negate(&self) -> CharSet {
        let mut out = Vec::with_capacity(self.ranges.len() + 2);
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= MAX_CHAR {
            out.push((next, MAX_CHAR));
        }
        CharSet::from_ranges(out)
    }

    #[must_use]
    pub fn intersect(&self, other: &CharSet) -> CharSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        CharSet { ranges: out }
    }

    #[must_use]
    pub fn difference(&self, other: &CharSet) -> CharSet {
        self.intersect(&other.negate())
    }

    /// Closes the set under simple case folding (every member's case-fold orbit is added).
    #[must_use]
    pub fn case_fold(&self) -> CharSet {
        use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
        let mut cls = ClassUnicode::new(self.ranges.iter().map(|&(lo, hi)| {
            ClassUnicodeRange::new(char::from_u32(lo).unwrap_or('\0'), char::from_u32(hi).unwrap_or('\0'))
        }));
        cls.case_fold_simple();
        CharSet::from_ranges(cls.iter().map(|r| (r.start() as u32, r.end() as u32)))
    }
}

/// ECMA-262 `\d`.
#[must_use]
pub fn digit() -> CharSet {
    CharSet::from_ranges([(0x30, 0x39)])
}

/// ECMA-262 `\w` (ASCII word characters).
#[must_use]
pub fn word() -> CharSet {
    CharSet::from_ranges([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
}

/// ECMA-262 `\s`: `WhiteSpace` and `LineTerminator`, including the Unicode space separators and U+FEFF.
#[must_use]
pub fn space() -> CharSet {
    CharSet::from_ranges([
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

/// ECMA-262 `.`: every scalar value except the line terminators, unless `dot_all`.
#[must_use]
pub fn dot(dot_all: bool) -> CharSet {
    if dot_all {
        CharSet::full()
    } else {
        CharSet::from_ranges([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]).negate()
    }
}

/// The set named by `\p{name}`: general categories (`L`, `Lu`, `Letter`, `gc=Lu`), scripts
/// (`Greek`, `sc=Greek`, `Script=Greek`, `scx=Greek`) and binary properties (`Alphabetic`).
/// Unknown names are a `RegexSyntax` error (the caller adds the position).
pub fn unicode_property(name: &str) -> Result<CharSet> {
    use regex_syntax::hir::{Class, HirKind};
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '=' || c == ' ' || c == '-');
    if !valid {
        return Err(Error::new(ErrorKind::RegexSyntax, format!("invalid Unicode property name `{name}`")));
    }
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&format!("\\p{{{name}}}"))
        .map_err(|_| Error::new(ErrorKind::RegexSyntax, format!("unknown Unicode property `{name}`")))?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => {
            Ok(CharSet::from_ranges(cls.iter().map(|r| (r.start() as u32, r.end() as u32))))
        }
        _ => Err(Error::new(ErrorKind::RegexSyntax, format!("unknown Unicode property `{name}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_algebra() {
        let a = CharSet::from_ranges([(10, 20), (30, 40)]);
        let b = CharSet::from_ranges([(15, 35)]);
        assert_eq!(a.intersect(&b).ranges(), &[(15, 20), (30, 35)]);
        assert_eq!(a.union(&b).ranges(), &[(10, 40)]);
        assert_eq!(a.difference(&b).ranges(), &[(10, 14), (36, 40)]);
        assert_eq!(a.negate().negate(), a);
        assert_eq!(CharSet::full().negate(), CharSet::empty());
        assert!(CharSet::from_ranges([(0xD800, 0xDFFF)]).is_empty());
        assert!(a.contains(10) && a.contains(40) && !a.contains(25));
    }

    #[test]
    fn folding_and_properties() {
        let k = CharSet::single('k' as u32).case_fold();
        assert!(k.contains('K' as u32) && k.contains(0x212A)); // KELVIN SIGN
        let lu = unicode_property("Lu").unwrap();
        assert!(lu.contains('A' as u32) && !lu.contains('a' as u32));
        let greek = unicode_property("Script=Greek").unwrap();
        assert!(greek.contains('α' as u32));
        assert!(unicode_property("NoSuchProperty").is_err());
        assert!(space().contains(0xFEFF) && space().contains(0xA0));
        assert!(!dot(false).contains('\n' as u32) && dot(true).contains('\n' as u32));
    }
}
