//! Reading bash's lexical forms: quoting, escapes, patterns and arithmetic names.

use crate::policy::word::Word;

pub(super) fn is_dev_null(word: &Word) -> bool {
    !word.dynamic && word.text == "/dev/null"
}

/// `2`, `1-` (move) or `-` (close): the target of a descriptor duplication.
pub(super) fn is_descriptor(word: &Word) -> bool {
    let digits = word.text.strip_suffix('-').unwrap_or(&word.text);
    !word.dynamic && (digits.is_empty() || digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Unquoted text that bash may replace by pathname or brace expansion.
pub(super) fn has_pattern(text: &str) -> bool {
    let closes_later = |open: char, close: char| {
        text.find(open)
            .is_some_and(|at| text[at + open.len_utf8()..].contains(close))
    };
    // A brace expands only around a comma or a `..` sequence: `{}` (find's, xargs') stays.
    let braces = text.match_indices('{').any(|(at, _)| {
        let inside = &text[at + 1..];
        inside.find('}').is_some_and(|end| {
            let body = &inside[..end];
            body.contains(',') || body.contains("..") || body.contains('{')
        })
    });
    text.contains(['*', '?', '(']) || closes_later('[', ']') || braces
}

/// The character an escape sequence stands for; a backslash-newline stands for nothing.
pub(super) fn unescape(escape: &str) -> &str {
    match escape.strip_prefix('\\') {
        Some("\n") => "",
        Some(rest) if !rest.is_empty() => rest,
        _ => escape,
    }
}

/// Whether arithmetic text reads a variable (a name or an expansion other than the numeric
/// `$#`, `$?`, `$$`, `$!`). Numeric literals such as `0x1f` or `16#ff` are not names.
pub(super) fn evaluates_variables(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'$' => match bytes.get(i + 1) {
                Some(b'#' | b'?' | b'$' | b'!') => i += 2,
                _ => return true,
            },
            b'`' => return true,
            b'0'..=b'9' => {
                while bytes
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'#' | b'@' | b'_'))
                {
                    i += 1;
                }
            }
            _ if b.is_ascii_alphabetic() || b == b'_' => return true,
            _ => i += 1,
        }
    }
    false
}

/// Decodes the body of `$'...'` as bash does, so that `$'\x72m'` is seen as `rm`.
pub(super) fn decode_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    // Reads up to `max` digits of `radix` as one number.
    fn number(
        chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
        radix: u32,
        max: usize,
    ) -> Option<u32> {
        let mut value: Option<u32> = None;
        for _ in 0..max {
            let Some(digit) = chars.peek().and_then(|c| c.to_digit(radix)) else {
                break;
            };
            chars.next();
            value = Some(
                value
                    .unwrap_or(0)
                    .saturating_mul(radix)
                    .saturating_add(digit),
            );
        }
        value
    }
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let decoded = match chars.next() {
            None => Some('\\'),
            Some('a') => Some('\x07'),
            Some('b') => Some('\x08'),
            Some('e' | 'E') => Some('\x1b'),
            Some('f') => Some('\x0c'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            Some('v') => Some('\x0b'),
            Some(c @ ('\\' | '\'' | '"' | '?')) => Some(c),
            Some(c @ '0'..='7') => {
                let mut value = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(digit) => {
                            chars.next();
                            value = value * 8 + digit;
                        }
                        None => break,
                    }
                }
                char::from_u32(value & 0xff)
            }
            Some('x') => match number(&mut chars, 16, 2) {
                Some(v) => char::from_u32(v),
                None => {
                    out.push_str("\\x");
                    continue;
                }
            },
            Some(u @ ('u' | 'U')) => match number(&mut chars, 16, if u == 'u' { 4 } else { 8 }) {
                Some(v) => Some(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER)),
                None => {
                    out.push('\\');
                    out.push(u);
                    continue;
                }
            },
            Some('c') => match chars.next() {
                Some(c) => char::from_u32(u32::from(c) & 0x1f),
                None => {
                    out.push_str("\\c");
                    continue;
                }
            },
            Some(other) => {
                out.push('\\');
                Some(other)
            }
        };
        match decoded {
            // Bash truncates the string at a NUL.
            Some('\0') => break,
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}
