//! What the text loaders share about the bytes of a line: the UTF-8 byte-order mark, how
//! a field that is not a number is shown in an error, and why a CSV header has fewer than
//! two columns.
//!
//! * **Byte-order mark.** A UTF-8 byte-order mark (BOM: U+FEFF, the bytes `EF BB BF`)
//!   at the very start of a file is ignored by every text loader of the workspace
//!   ([`strip_bom`]): editors on Windows write one, the CSV reader skips it, and RFC 8259
//!   §8.1 lets a JSON reader ignore it. Anywhere else it is data, and an error names it
//!   ("a byte-order mark (U+FEFF) …", [`quote_field`]) instead of printing an invisible
//!   character.
//! * **Narrow headers.** A CSV header of fewer than two columns is explained by
//!   [`narrow_header`]: the file is empty, or its first line is separated by another
//!   character than the comma (`;`, tab, spaces, `|`), named.

/// The byte-order mark, U+FEFF.
pub const BOM: char = '\u{feff}';

/// `text` without a byte-order mark at its start (see the module docs).
///
/// ```
/// use dgp_traits::data::strip_bom;
/// assert_eq!(strip_bom("\u{feff}1 2\n"), "1 2\n");
/// assert_eq!(strip_bom("1 \u{feff}2"), "1 \u{feff}2");
/// ```
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// `bytes` without a UTF-8 byte-order mark at their start.
pub fn strip_bom_bytes(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
}

/// A field for an error message: quoted, with a byte-order mark written as `<BOM>` and
/// other invisible or control characters escaped (`\t`, `\u{200b}`), followed by a
/// sentence naming the byte-order mark when the field holds one.
///
/// ```
/// use dgp_traits::data::quote_field;
/// assert_eq!(quote_field("x1"), "'x1'");
/// assert!(quote_field("\u{feff}1.5").contains("byte-order mark (U+FEFF"));
/// ```
pub fn quote_field(field: &str) -> String {
    let mut shown = String::with_capacity(field.len() + 2);
    for c in field.chars() {
        match c {
            BOM => shown.push_str("<BOM>"),
            c if c.is_control() || is_invisible(c) => {
                shown.extend(c.escape_default());
            }
            c => shown.push(c),
        }
    }
    if field.contains(BOM) {
        format!(
            "'{shown}' (it holds a byte-order mark (U+FEFF, the bytes EF BB BF) that is not \
             at the start of the file: a file appended to another one? Remove the mark)"
        )
    } else {
        format!("'{shown}'")
    }
}

/// Characters that print as nothing (zero-width spaces and joiners, bidirectional marks).
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}')
}

/// Why a CSV file's header has fewer than two columns, in words: `first_line` is the
/// file's first line (the header as read, without its line break), `empty` whether the
/// file holds nothing but white space. Names the separator the line seems to use when
/// it is not the comma (`;`, a tab, spaces, `|`), or the emptiness.
///
/// ```
/// use dgp_traits::data::narrow_header;
/// assert!(narrow_header("a;b;y", false).contains("';' (semicolons)"));
/// assert!(narrow_header("", true).contains("empty"));
/// ```
pub fn narrow_header(first_line: &str, empty: bool) -> String {
    if empty {
        return "the file is empty (no header row, no data rows): a CSV file needs a header \
                of at least two comma-separated column names (features and a target) and \
                one row of numbers per line"
            .into();
    }
    let line = strip_bom(first_line).trim_end_matches(['\r', '\n']);
    let seps: [(char, &str); 4] = [
        (';', "';' (semicolons)"),
        ('\t', "tabs"),
        ('|', "'|' (vertical bars)"),
        (' ', "spaces"),
    ];
    let trimmed = line.trim();
    for (c, name) in seps {
        let parts = trimmed.split(c).filter(|p| !p.trim().is_empty()).count();
        if parts >= 2 {
            return format!(
                "the header has one column, '{}': its columns look separated by {name}, \
                 not by commas; a CSV file here is comma-separated (replace the \
                 separator, e.g. `tr '{}' ','`, or for a whitespace-separated table of \
                 numbers give a UCI folder)",
                short(trimmed),
                if c == '\t' {
                    "\\t".to_string()
                } else {
                    c.to_string()
                }
            );
        }
    }
    format!(
        "the header has one column, {}: a CSV file needs at least two columns, separated \
         by commas (features and a target)",
        quote_field(short(trimmed))
    )
}

/// At most the first 60 characters of `s`.
fn short(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_shown() {
        assert_eq!(quote_field("a\tb"), "'a\\tb'");
        assert_eq!(quote_field("1\u{200b}"), "'1\\u{200b}'");
        assert!(quote_field("2\u{feff}").starts_with("'2<BOM>'"));
        assert_eq!(strip_bom_bytes(b"\xef\xbb\xbfa"), b"a");
    }

    #[test]
    fn narrow_headers_name_the_separator() {
        assert!(narrow_header("x0\tx1\ty", false).contains("tabs"));
        assert!(narrow_header("x0 x1  y", false).contains("spaces"));
        assert!(narrow_header("a|y", false).contains("vertical bars"));
        let one = narrow_header("y", false);
        assert!(one.contains("'y'") && one.contains("at least two"), "{one}");
    }
}
