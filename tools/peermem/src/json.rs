// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A minimal JSON writer: enough for the tool's two documents, with correct escaping.

use std::fmt::Write;

/// `s` as a JSON string literal, quotes included.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON object built member by member, in insertion order.
#[derive(Default)]
pub struct Object {
    members: Vec<(String, String)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a member whose value is already JSON text.
    pub fn raw(mut self, key: &str, json: String) -> Self {
        self.members.push((key.to_owned(), json));
        self
    }

    /// Adds a string member.
    pub fn str(self, key: &str, value: &str) -> Self {
        self.raw(key, string(value))
    }

    /// Adds a string member, or `null`.
    pub fn opt_str(self, key: &str, value: Option<&str>) -> Self {
        let v = value.map_or_else(|| "null".to_owned(), string);
        self.raw(key, v)
    }

    /// Adds an unsigned number member.
    pub fn num(self, key: &str, value: u64) -> Self {
        self.raw(key, value.to_string())
    }

    /// Adds a boolean member.
    pub fn bool(self, key: &str, value: bool) -> Self {
        self.raw(key, value.to_string())
    }

    /// The object as JSON text.
    pub fn finish(self) -> String {
        let body: Vec<String> = self
            .members
            .into_iter()
            .map(|(k, v)| format!("{}:{}", string(&k), v))
            .collect();
        format!("{{{}}}", body.join(","))
    }
}

/// A JSON array of values that are already JSON text.
pub fn array(items: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = items.into_iter().collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }

    #[test]
    fn objects_keep_order_and_nulls() {
        let o = Object::new()
            .num("b", 2)
            .str("a", "x")
            .opt_str("n", None)
            .bool("t", true)
            .raw("l", array(["1".to_owned(), "2".to_owned()]))
            .finish();
        assert_eq!(o, r#"{"b":2,"a":"x","n":null,"t":true,"l":[1,2]}"#);
    }
}
