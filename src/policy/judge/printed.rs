//! What `echo` and `printf` print (issue 41): the text a line writes to a file with them is
//! read as code when the line runs that file (`written.rs`), so it must be the text the file
//! gets, escapes decoded as bash decodes them (`printf 'os.system("\x72m c")'` writes `rm`).
//! Where the judge does not follow the program (a width, a number, `\c`) it says so
//! (`None`), and the writer's text counts as not shown.

/// What bash's `echo ARGS` prints, or `None` when the judge cannot tell.
pub(super) fn echo(args: &[String]) -> Option<String> {
    let mut escapes = false;
    let mut decided = false;
    let mut newline = true;
    let mut at = 0;
    while let Some(flags) = args.get(at).and_then(|a| a.strip_prefix('-')) {
        if flags.is_empty() || !flags.chars().all(|c| matches!(c, 'n' | 'e' | 'E')) {
            break;
        }
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => (escapes, decided) = (true, true),
                _ => (escapes, decided) = (false, true),
            }
        }
        at += 1;
    }
    let text = args[at..].join(" ");
    // Without `-e` or `-E`, bash decodes escapes only under `shopt -s xpg_echo`, which the
    // line may have set: a backslash makes the text one of two.
    if !decided && text.contains('\\') {
        return None;
    }
    let mut out = if escapes { decode(&text, true)? } else { text };
    if newline {
        out.push('\n');
    }
    Some(out)
}

/// What bash's `printf FORMAT ARGS` prints when its format uses only `%s`, `%b` and `%%`;
/// `None` otherwise (a width, a number: the judge does not compute them).
pub(super) fn printf(args: &[String]) -> Option<String> {
    let args = match args.first() {
        Some(dashes) if dashes == "--" => &args[1..],
        Some(option) if option.starts_with('-') => return None,
        _ => args,
    };
    let (format, mut rest) = args.split_first()?;
    let format = decode(format, false)?;
    let mut out = String::new();
    loop {
        let mut used = false;
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('%') => out.push('%'),
                Some(directive @ ('s' | 'b')) => {
                    used = true;
                    let arg = rest.first().map(String::as_str).unwrap_or("");
                    rest = rest.get(1..).unwrap_or(&[]);
                    if directive == 'b' {
                        out.push_str(&decode(arg, true)?);
                    } else {
                        out.push_str(arg);
                    }
                }
                _ => return None,
            }
        }
        if !used || rest.is_empty() {
            return Some(out);
        }
    }
}

/// `text` with the backslash escapes of `echo -e` (`echo_style`: octal as `\0NNN`) or of a
/// `printf` format (`\NNN`) decoded; `None` for `\c`, which cuts the output short in ways
/// the judge does not follow.
fn decode(text: &str, echo_style: bool) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        // Up to `most` more digits in `radix` after `start`, and how many were read.
        let mut number = |radix: u32, most: usize, start: u32| {
            let mut value = start;
            let mut digits = 0;
            while digits < most
                && let Some(d) = chars.peek().and_then(|c| c.to_digit(radix))
            {
                value = value * radix + d;
                digits += 1;
                chars.next();
            }
            (digits, value)
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            'e' | 'E' => out.push('\x1b'),
            '\\' => out.push('\\'),
            '"' if !echo_style => out.push('"'),
            '\'' if !echo_style => out.push('\''),
            'c' => return None,
            'x' | 'u' | 'U' => {
                let most = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                match number(16, most, 0) {
                    (0, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                    (_, value) => out.push(char::from_u32(value)?),
                }
            }
            // echo: `\0` then up to three octal digits; printf: up to three in all.
            '0' if echo_style => out.push(char::from_u32(number(8, 3, 0).1)?),
            '0'..='7' if !echo_style => {
                let first = e.to_digit(8).unwrap_or(0);
                out.push(char::from_u32(number(8, 2, first).1)?);
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &[&str]) -> Vec<String> {
        line.iter().map(|w| w.to_string()).collect()
    }

    /// Each expectation is what bash 5 prints for the same words (checked by hand with
    /// `printf ... | od -c`).
    #[test]
    fn echo_and_printf_print_what_bash_prints() {
        assert_eq!(echo(&words(&["a", "b"])).as_deref(), Some("a b\n"));
        assert_eq!(echo(&words(&["-nE", r"a\x72"])).as_deref(), Some(r"a\x72"));
        // `shopt -s xpg_echo` may decode it, or not.
        assert_eq!(echo(&words(&["-n", r"a\x72"])), None);
        assert_eq!(
            echo(&words(&["-ne", r"a\x72\0101"])).as_deref(),
            Some("arA")
        );
        assert_eq!(echo(&words(&["-eE", r"\n"])).as_deref(), Some("\\n\n"));
        assert_eq!(echo(&words(&["-x", "a"])).as_deref(), Some("-x a\n"));
        assert_eq!(
            printf(&words(&[r"%s\n", "import os", "x"])).as_deref(),
            Some("import os\nx\n")
        );
        assert_eq!(
            printf(&words(&[r"\x72m \162m %%"])).as_deref(),
            Some("rm rm %")
        );
        assert_eq!(printf(&words(&["%b", r"\x72m"])).as_deref(), Some("rm"));
        assert_eq!(printf(&words(&["--", "%s", "a"])).as_deref(), Some("a"));
        // Not followed: said so, never guessed.
        assert_eq!(printf(&words(&["%5s", "a"])), None);
        assert_eq!(printf(&words(&["-v", "x", "a"])), None);
        assert_eq!(printf(&words(&[r"a\cb"])), None);
    }
}
