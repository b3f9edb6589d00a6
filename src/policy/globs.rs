//! Words as bash will expand them before a program sees them: brace expansion and
//! pathname patterns (P6). Under a program that is not a known wrapper, an argument
//! `/usr/bin/r[m]` is `/usr/bin/rm` by the time it runs (`logsave /dev/null /usr/bin/r[m]
//! x`), so the judge's safety net must read it as that.
//!
//! The judge stays pure: matching a pattern against a name is here, reading directories is
//! the caller's ([`Globs`], implemented over the real file system by the policy hook in
//! `hooks/rules.rs`). Without one, or when the disk holds too much to read, a pattern is
//! matched against the names the deny rules give: what could expand to `rm` is taken as
//! `rm`, which only asks more.

/// Expands pathname patterns against a file system, as bash would when the line runs.
pub trait Globs: std::fmt::Debug + Sync {
    /// The paths `pattern` (a word holding `*`, `?` or `[`, braces already expanded)
    /// matches, in bash's spelling (relative patterns give relative paths); `Some(vec![])`
    /// when it matches nothing (bash then passes the word as it is); `None` when they could
    /// not all be read (too many entries), so the caller must assume the worst.
    fn expand(&self, pattern: &str) -> Option<Vec<String>>;
}

/// Most words one brace expansion may give; a word that would give more is kept whole
/// (the judge then matches it as a pattern, which only asks more).
const MAX_BRACE_WORDS: usize = 256;

/// Whether `text` holds a character that makes it a pathname pattern.
pub fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// `text` after brace expansion (`r{m,x}` is `rm`, `rx`; `{a..c}` is `a`, `b`, `c`),
/// or `text` itself when it has none or would give more than [`MAX_BRACE_WORDS`].
pub fn brace_expand(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    if expand_into(text, &mut out) {
        out
    } else {
        vec![text.to_owned()]
    }
}

/// Expands the first brace group of `text` into `out`, recursively; `false` when the
/// words would be too many.
fn expand_into(text: &str, out: &mut Vec<String>) -> bool {
    let Some((open, close)) = first_group(text) else {
        if out.len() >= MAX_BRACE_WORDS {
            return false;
        }
        out.push(text.to_owned());
        return true;
    };
    let (before, inner, after) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
    let alternatives = match sequence(inner) {
        Some(items) => items,
        None => split_top(inner),
    };
    alternatives
        .iter()
        .all(|alt| expand_into(&format!("{before}{alt}{after}"), out))
}

/// The first `{...}` holding a top-level `,` or `..`: byte offsets of its braces.
fn first_group(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    for (open, &b) in bytes.iter().enumerate() {
        if b != b'{' {
            continue;
        }
        let mut depth = 0usize;
        for (at, &c) in bytes.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = &text[open + 1..at];
                        if split_top(inner).len() > 1 || sequence(inner).is_some() {
                            return Some((open, at));
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// `inner` split at its top-level commas.
fn split_top(inner: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0usize;
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// `a..e` or `1..20` (one letter, or numbers): its items, if it is a sequence of at most
/// [`MAX_BRACE_WORDS`].
fn sequence(inner: &str) -> Option<Vec<String>> {
    let (from, to) = inner.split_once("..")?;
    if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let (lo, hi) = (a.min(b), a.max(b));
        if hi - lo >= MAX_BRACE_WORDS as i64 {
            return None;
        }
        return Some((lo..=hi).map(|n| n.to_string()).collect());
    }
    let (mut a, mut b) = (from.chars(), to.chars());
    match (a.next(), a.next(), b.next(), b.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (lo, hi) = (x.min(y), x.max(y));
            Some((lo..=hi).map(String::from).collect())
        }
        _ => None,
    }
}

/// Whether the pathname pattern `pattern` (one path component) matches `name`, as bash's
/// globbing does: `*` any run, `?` one character, `[...]` one of a set (ranges, `!` or
/// `^` to negate, `[:class:]`), `\x` the character x.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Classic backtracking over the last `*`: linear in practice, bounded by p x n.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => match bracket(&p[pi..], n[ni]) {
                Some((true, len)) => Some(pi + len),
                Some((false, _)) => None,
                // An unclosed `[` is itself.
                None => (n[ni] == '[').then_some(pi + 1),
            },
            Some('\\') if pi + 1 < p.len() => (p[pi + 1] == n[ni]).then_some(pi + 2),
            Some(&c) => (c == n[ni]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ni += 1;
            }
            (None, Some((sp, sn))) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A bracket expression at the start of `p` against `c`: whether it matches, and its
/// length; `None` when it is not closed.
fn bracket(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negated = matches!(p.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while let Some(&x) = p.get(i) {
        if x == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if x == '[' && p.get(i + 1) == Some(&':') {
            let rest: String = p[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]") {
                let class = &rest[..end];
                matched |= match class {
                    "alpha" => c.is_alphabetic(),
                    "digit" => c.is_ascii_digit(),
                    "alnum" => c.is_alphanumeric(),
                    "lower" => c.is_lowercase(),
                    "upper" => c.is_uppercase(),
                    "space" => c.is_whitespace(),
                    "punct" => c.is_ascii_punctuation(),
                    "xdigit" => c.is_ascii_hexdigit(),
                    // A class the judge does not know: it may match.
                    _ => true,
                };
                i += 2 + class.chars().count() + 2;
                continue;
            }
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|e| *e != ']') {
            let end = p[i + 2];
            matched |= x <= c && c <= end;
            i += 3;
            continue;
        }
        matched |= x == c;
        i += 1;
    }
    None
}

/// The program names `word` (an argument that bash expands) may stand for when it runs:
/// the base names of its expansions. With `globs`, patterns are expanded against the file
/// system; without (or when it cannot say), a pattern's base name is matched against
/// `names` (the commands deny rules name) and each it may match is returned.
pub fn program_names(word: &str, names: &[String], globs: Option<&dyn Globs>) -> Vec<String> {
    let mut out = Vec::new();
    for text in brace_expand(word) {
        if !is_pattern(&text) {
            out.push(super::word::base_name(&text).to_owned());
            continue;
        }
        match globs.and_then(|g| g.expand(&text)) {
            Some(paths) if paths.is_empty() => {
                out.push(super::word::base_name(&text).to_owned());
            }
            Some(paths) => out.extend(paths.iter().map(|p| super::word::base_name(p).to_owned())),
            None => {
                let base = super::word::base_name(&text);
                out.extend(names.iter().filter(|n| matches(base, n)).cloned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_bash_globs_them() {
        assert!(matches("r[m]", "rm"));
        assert!(matches("r?", "rm"));
        assert!(matches("*", "rm"));
        assert!(matches("[q-s]m", "rm"));
        assert!(matches("[!a]m", "rm"));
        assert!(matches("[[:alpha:]]m", "rm"));
        assert!(matches("r\\m", "rm"));
        assert!(!matches("r[!m]", "rm"));
        assert!(!matches("*.txt", "rm"));
        assert!(!matches("r[", "rm"));
        assert!(matches("r[", "r["));
    }

    #[test]
    fn braces_expand_before_globbing() {
        assert_eq!(brace_expand("/bin/r{m,x}"), vec!["/bin/rm", "/bin/rx"]);
        assert_eq!(brace_expand("{q..s}m"), vec!["qm", "rm", "sm"]);
        assert_eq!(brace_expand("a{b,{c,d}}"), vec!["ab", "ac", "ad"]);
        assert_eq!(brace_expand("{x}"), vec!["{x}"]);
        assert_eq!(brace_expand("{1..100000}"), vec!["{1..100000}"]);
    }

    /// Without the file system, a pattern that may expand to a denied name is that name.
    #[test]
    fn p6_without_a_disk_a_pattern_stands_for_the_names_it_may_match() {
        let names = vec!["rm".to_owned()];
        assert_eq!(program_names("/usr/bin/r[m]", &names, None), vec!["rm"]);
        assert_eq!(
            program_names("/usr/bin/r{m,x}", &names, None),
            vec!["rm", "rx"]
        );
        assert!(program_names("*.txt", &names, None).is_empty());
    }
}
