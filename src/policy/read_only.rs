//! Read-only mode's knowledge of readers (P7): which forms of a command on the read-only
//! list still write files, run code or change the system.
//!
//! This file owns the table of such forms. The read-only list itself is configuration
//! (`permissions.read_only_commands`); the options are read with the grammar of `argv.rs`,
//! the same one that finds a wrapper's command.

use super::argv::{self, Grammar, Value, both, is_long_option, long, short_cluster_has};
use Value::{No, Optional, Required};

/// A word of a read-only command that makes it write files or run code, if any.
///
/// `find` and `sort` are the documented cases. `printf -v` and `test -v` / `[ -v` assign or
/// evaluate array subscripts, which bash expands (so `[ -v 'a[$(rm x)]' ]` runs `rm`);
/// `git ... --output` and `tree -o` write files. `uniq IN OUT` writes OUT, so a second operand
/// (or a glob or brace that could become two) counts. `rg --pre` and `--hostname-bin` run a
/// program (`--pre-glob` only selects files for `--pre`, but is refused with it). `date -s`,
/// `-f` or an operand without a leading `+` set the clock; `hostname NAME`, `-F` and `-b` set
/// the host name, while its bare form and printing flags (`-f`, `-i`, `-s`...) only read.
/// `file -C` compiles a magic file into the working directory. A word holding an expansion
/// (`$X`) could be any option, so for these commands it counts as one too.
pub fn writing_option(words: &[String]) -> Option<&str> {
    let name = words.first()?.as_str();
    let args = &words[1..];
    let expands = |w: &&String| w.contains(['$', '`']);
    let could_be_several = |w: &&String| w.contains(['*', '?', '[', '{']);
    let found = match name {
        "find" => args.iter().find(|w| {
            matches!(
                w.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fprint" | "-fprint0"
                    | "-fprintf" | "-fls"
            ) || expands(w)
                // A glob such as `-de*` could expand to `-delete`.
                || (w.starts_with('-') && w.contains(['*', '?', '[']))
        }),
        "sort" => args.iter().find(|w| {
            is_long_option(w, "output", 1)
                || is_long_option(w, "compress-program", 2)
                || short_cluster_has(w, 'o', "ktST")
                || expands(w)
        }),
        "printf" | "test" | "[" => args.iter().find(|w| {
            w.as_str() == "-v" || (name == "printf" && w.starts_with("-v")) || expands(w)
        }),
        "git" => args
            .iter()
            .find(|w| is_long_option(w, "output", 1) || expands(w)),
        "tree" => args.iter().find(|w| {
            short_cluster_has(w, 'o', "LPIHT") || is_long_option(w, "output", 1) || expands(w)
        }),
        "uniq" => args.iter().find(expands).or_else(|| {
            let Some(files) = operands(&UNIQ, args) else {
                return args.first();
            };
            files
                .iter()
                .copied()
                .find(could_be_several)
                .or(files.get(1).copied())
        }),
        "rg" => args.iter().find(|w| {
            matches!(
                w.split('=').next(),
                Some("--pre" | "--pre-glob" | "--hostname-bin")
            ) || expands(w)
        }),
        "date" => args
            .iter()
            .find(|w| {
                short_cluster_has(w, 's', "dfrI")
                    || short_cluster_has(w, 'f', "dsrI")
                    || is_long_option(w, "set", 1)
                    || is_long_option(w, "file", 1)
                    || expands(w)
            })
            .or_else(|| {
                let Some(operands) = operands(&DATE, args) else {
                    return args.first();
                };
                operands.into_iter().find(|w| !w.starts_with('+'))
            }),
        "hostname" => args
            .iter()
            .find(|w| {
                short_cluster_has(w, 'F', "")
                    || short_cluster_has(w, 'b', "")
                    || is_long_option(w, "file", 1)
                    || is_long_option(w, "boot", 1)
                    || expands(w)
            })
            .or_else(|| match operands(&HOSTNAME, args) {
                Some(operands) => operands.first().copied(),
                None => args.first(),
            }),
        "file" => args.iter().find(|w| {
            short_cluster_has(w, 'C', "eFfmP") || is_long_option(w, "compile", 2) || expands(w)
        }),
        _ => None,
    };
    found.map(String::as_str)
}

/// The operands among a reader's `args`, read with its grammar; `None` when the grammar
/// cannot read the line (the program would refuse it), which then counts as writing.
fn operands<'a>(grammar: &Grammar, args: &'a [String]) -> Option<Vec<&'a String>> {
    let parsed = argv::parse(grammar, args).ok()?;
    Some(parsed.operands.iter().map(|&i| &args[i]).collect())
}

/// `uniq [OPTION]... [INPUT [OUTPUT]]`: a second operand is a file it writes.
static UNIQ: Grammar = Grammar::permuting(&[
    both('c', "count", No),
    both('d', "repeated", No),
    both('D', "all-repeated", Optional),
    both('f', "skip-fields", Required),
    long("group", Optional),
    both('i', "ignore-case", No),
    both('s', "skip-chars", Required),
    both('u', "unique", No),
    both('z', "zero-terminated", No),
    both('w', "check-chars", Required),
    long("help", No),
    long("version", No),
]);

/// `date [OPTION]... [+FORMAT | MMDDhhmm[[CC]YY][.ss]]`: an operand without `+` sets the clock.
static DATE: Grammar = Grammar::permuting(&[
    both('d', "date", Required),
    long("debug", No),
    both('f', "file", Required),
    both('I', "iso-8601", Optional),
    long("resolution", No),
    both('R', "rfc-email", No),
    long("rfc-3339", Required),
    both('r', "reference", Required),
    both('s', "set", Required),
    both('u', "utc", No),
    long("universal", No),
    long("help", No),
    long("version", No),
]);

/// `hostname [OPTION]... [NAME]`: an operand sets the host name.
static HOSTNAME: Grammar = Grammar::permuting(&[
    both('a', "alias", No),
    both('A', "all-fqdns", No),
    both('b', "boot", No),
    both('d', "domain", No),
    both('f', "fqdn", No),
    long("long", No),
    both('F', "file", Required),
    both('i', "ip-address", No),
    both('I', "all-ip-addresses", No),
    both('s', "short", No),
    both('y', "yp", No),
    long("nis", No),
    both('h', "help", No),
    both('V', "version", No),
]);

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn writing_options_are_recognized_in_option_clusters() {
        assert_eq!(writing_option(&words("sort -rno out f")), Some("-rno"));
        assert_eq!(writing_option(&words("sort -k1o f")), None);
        assert_eq!(writing_option(&words("sort -t o f")), None);
        assert_eq!(writing_option(&words("tree -L 2")), None);
        assert_eq!(writing_option(&words("find . -de*")), Some("-de*"));
        assert_eq!(writing_option(&words("ls -o")), None);
        assert_eq!(writing_option(&words("sort --out=f")), Some("--out=f"));
        assert_eq!(writing_option(&words("sort --comp=sh")), Some("--comp=sh"));
        assert_eq!(writing_option(&words("sort --check f")), None);
        assert_eq!(writing_option(&words("git log --outp=f")), Some("--outp=f"));
        assert_eq!(writing_option(&words("git log --oneline")), None);
    }

    #[test]
    fn operands_of_readers_skip_options_and_their_values() {
        assert_eq!(writing_option(&words("uniq -f 1 a")), None);
        assert_eq!(writing_option(&words("uniq -f 1 a b")), Some("b"));
        assert_eq!(writing_option(&words("uniq --skip-f 1 a")), None);
        assert_eq!(writing_option(&words("uniq --skip-f=1 a b")), Some("b"));
        assert_eq!(writing_option(&words("uniq -cf2 a")), None);
        assert_eq!(writing_option(&words("uniq a -- b")), Some("b"));
        // An option the grammar does not know: the line is not read, so it counts.
        assert_eq!(writing_option(&words("uniq --skip a")), Some("--skip"));
        assert_eq!(writing_option(&words("date -d now +%s")), None);
        assert_eq!(writing_option(&words("date --date now 0101")), Some("0101"));
        assert_eq!(writing_option(&words("date -Iseconds")), None);
        assert_eq!(writing_option(&words("hostname -f")), None);
        assert_eq!(writing_option(&words("hostname box")), Some("box"));
    }
}
