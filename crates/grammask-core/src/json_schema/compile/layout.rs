//! Layout: the separators, brackets and indentation of the output JSON (`indent`, `separators`,
//! `any_whitespace`), by nesting depth.
//!
//! Pipeline place: used by the array, object and value writers.
use super::*;

impl Conv<'_> {
    /// Layout depth of a container's children: only `indent` layouts depend on depth.
    pub(super) fn child_depth(&self, depth: u32) -> u32 {
        if self.opts.indent.is_some() && !self.opts.any_whitespace {
            depth + 1
        } else {
            0
        }
    }

    pub(super) fn sep_item(&self, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{0} \",\" {0}", self.ws);
        }
        emit::lit(&self.sep_item_text(depth))
    }
    /// The text [`Self::sep_item`] matches, without `any_whitespace`.
    pub(super) fn sep_item_text(&self, depth: u32) -> String {
        let item =
            self.opts.separators.as_ref().map_or(if self.opts.indent.is_some() { "," } else { ", " }, |s| s.0.as_str());
        match self.opts.indent {
            Some(n) => format!("{item}\n{}", " ".repeat((n * (depth + 1)) as usize)),
            None => item.to_string(),
        }
    }
    pub(super) fn sep_kv(&self) -> String {
        if self.opts.any_whitespace {
            return format!("{0} \":\" {0}", self.ws);
        }
        emit::lit(self.opts.separators.as_ref().map_or(": ", |s| s.1.as_str()))
    }
    pub(super) fn open(&self, c: char, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{} {}", emit::lit(&c.to_string()), self.ws);
        }
        match self.opts.indent {
            Some(n) => emit::lit(&format!("{c}\n{}", " ".repeat((n * (depth + 1)) as usize))),
            None => emit::lit(&c.to_string()),
        }
    }
    pub(super) fn close(&self, c: char, depth: u32) -> String {
        if self.opts.any_whitespace {
            return format!("{} {}", self.ws, emit::lit(&c.to_string()));
        }
        match self.opts.indent {
            Some(n) => emit::lit(&format!("\n{}{c}", " ".repeat((n * depth) as usize))),
            None => emit::lit(&c.to_string()),
        }
    }
    pub(super) fn empty(&self, o: char, c: char) -> String {
        if self.opts.any_whitespace {
            format!("{} {} {}", emit::lit(&o.to_string()), self.ws, emit::lit(&c.to_string()))
        } else {
            emit::lit(&format!("{o}{c}"))
        }
    }
}
