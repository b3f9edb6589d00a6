//! The bash judge: a command line segment by segment (P1-P8).

use super::line_values::{self, SHELL_ONLY};
use crate::config::{Decision, Mode};
use crate::policy::shell::{self, Segment};
use crate::policy::{
    Cause, Grant, Judgement, Policy, Rule, RuleRef, SegmentJudgement, Verdict, embedded, globs,
    grant_for, inline, quote_segment, shorten, summarize, tokens, variable_names, word, wrappers,
};
use word::base_name;

impl Policy {
    pub(in crate::policy) fn judge_bash(
        &self,
        command: &str,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Judgement {
        let mut segments = match shell::segments(command) {
            Ok(segments) => segments,
            // Unknown as a whole: one opaque segment standing for the line, never allowed
            // by a prefix rule, and nothing can be granted.
            Err(why) => vec![Segment {
                words: vec![command.to_owned()],
                opaque: Some(format!("the command cannot be parsed: {why}")),
                ..Segment::default()
            }],
        };
        // Issue 41: a path the line itself may have written is no known program.
        self.mark_programs_made_on_the_line(&mut segments);
        // Issue 41: an assignment with no command reaches the programs after it when the
        // variable is exported, by the line or by the environment the line inherits.
        keep_standalone_assignments_that_may_be_exported(&mut segments);
        // Issue 41: what xargs reads is the line's choice only when the line prints it.
        line_values::piped_words_of_the_project(command, &mut segments);
        if segments.is_empty() {
            return match self.tool_wide("bash").max_by_key(|r| r.action) {
                Some(rule) => Judgement {
                    cause: rule.cause(),
                    ..Judgement::of_call(
                        rule.action,
                        format!("{} matches a command that runs nothing", rule.describe()),
                    )
                },
                None => Judgement {
                    cause: Cause::RunsNothing,
                    ..Judgement::of_call(Decision::Allow, "the command runs nothing".into())
                },
            };
        }
        let mut grants_on_allow_always: Vec<Grant> = Vec::new();
        // P8 (issue 41): code the line writes to a file and runs (`judge/written.rs`).
        let mut writes_code = self.written_code(command, &segments, mode);
        let judged: Vec<SegmentJudgement> = segments
            .into_iter()
            .enumerate()
            .map(|(at, segment)| {
                let mut verdict = self.judge_segment(&segment, mode, grants, globs);
                if let Some(found) = writes_code.iter().position(|(w, _)| *w == at) {
                    let (_, flagged) = writes_code.swap_remove(found);
                    if flagged.decision > verdict.decision {
                        verdict = flagged;
                    }
                }
                if let Some(grant) = verdict
                    .grant
                    .filter(|g| !grants_on_allow_always.contains(g))
                {
                    grants_on_allow_always.push(grant);
                }
                SegmentJudgement {
                    writes_redirect: segment.writes_redirect(),
                    words: segment.words,
                    via: segment.via,
                    opaque: segment.opaque,
                    decision: verdict.decision,
                    reason: verdict.reason,
                    cause: verdict.cause,
                }
            })
            .collect();
        let decision = judged
            .iter()
            .map(|s| s.decision)
            .max()
            .unwrap_or(Decision::Allow);
        if decision != Decision::Ask {
            grants_on_allow_always.clear();
        }
        let cause = judged
            .iter()
            .find(|s| s.decision == decision)
            .map(|s| s.cause.clone())
            .unwrap_or(Cause::Call);
        Judgement {
            decision,
            reason: summarize(&judged, decision),
            cause,
            grants_on_allow_always,
            segments: judged,
            escalation: None,
        }
    }

    /// One segment's verdict.
    pub(in crate::policy) fn judge_segment(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Verdict {
        let shown = quote_segment(segment);
        // What matches: tool-wide rules always; prefix rules and grants only when the
        // command is known; deny rules also by their words inside an opaque segment.
        let named = segment.opaque.is_none() && !segment.words.is_empty();
        let opaque_tokens = segment.opaque.as_ref().map(|_| tokens(&segment.words));
        let rule = self
            .rules
            .iter()
            .filter(|r| r.covers_tool("bash"))
            .filter(|r| r.applies(&segment.words, opaque_tokens.as_deref()))
            .max_by_key(|r| r.action);
        let grant = grants.iter().find(|g| {
            g.words()
                .is_some_and(|w| named && !w.is_empty() && segment.words.starts_with(w))
        });
        // A grant acts as an allow rule, so it only decides when no rule matched.
        let matched = match (rule, grant) {
            (Some(rule), _) => Some(Verdict::new(
                rule.action,
                match &segment.opaque {
                    Some(why) => format!(
                        "{} matches {shown}, which cannot be known before it runs: {why}",
                        rule.describe()
                    ),
                    None => format!("{} matches {shown}", rule.describe()),
                },
                rule.cause(),
            )),
            (None, Some(grant)) => Some(Verdict::new(
                Decision::Allow,
                format!(
                    "`{}` is allowed always in this session and matches {shown}",
                    grant.display()
                ),
                Cause::Grant {
                    prefix: grant.display(),
                },
            )),
            (None, None) => None,
        };

        if mode == Mode::ReadOnly {
            if let Some((why, cause)) = self.not_read_only(segment) {
                return Verdict::new(
                    Decision::Deny,
                    format!("read-only mode: {shown} {why}"),
                    cause,
                );
            }
            // P8: code on the line not shown harmless is refused, even under a reader of
            // the read-only list (`rg --pre`).
            if named
                && let Some(code) = code_of(segment)
                && let inline::Reading::Opaque(why) = &code.reading
            {
                return Verdict::new(
                    Decision::Deny,
                    format!(
                        "read-only mode: the {} code of {shown} is not shown harmless: {why}",
                        code.language
                    ),
                    Cause::InlineCode {
                        language: code.language.into(),
                        why: why.clone(),
                        rule: None,
                    },
                );
            }
            return matched.unwrap_or_else(|| {
                Verdict::new(
                    Decision::Allow,
                    format!("read-only mode: {shown} only reads"),
                    Cause::ReadOnly,
                )
            });
        }
        // P8: inline code is read: code not shown harmless is denied when a deny rule's
        // words stand in it, else asked in mode auto when a deny or ask rule exists.
        if let Some(flagged) = named
            .then(|| self.inline_code(segment, mode))
            .flatten()
            .filter(|f| matched.as_ref().is_none_or(|m| f.decision > m.decision))
        {
            return flagged;
        }
        // P8: a variable set in front of it that the judge has not met may make it run
        // other code (`PERL5DB=...`, `LUA_INIT=...`): judged as code not shown harmless.
        // So is one set with no command, which the programs after it may inherit.
        let standalone = segment.words.is_empty() && segment.opaque.is_none();
        if let Some(flagged) = (named || standalone)
            .then(|| self.unknown_environment(segment, mode))
            .flatten()
            .filter(|f| matched.as_ref().is_none_or(|m| f.decision > m.decision))
        {
            return flagged;
        }
        // P6: under a program that is not a known wrapper, an argument that names what a
        // deny rule names may be run by it (`flock F rm x`): never less than ask. P3b: so
        // may an argument that parses as a command line naming it (`lockrun f 'rm x'`).
        let unknown_wrapper = named
            .then(|| {
                self.names_denied_command(segment, globs)
                    .or_else(|| self.runs_denied_argument(&segment.words))
                    .or_else(|| self.runs_opaque_argument(segment, mode))
                    // Issue 41: the values the line chooses, read as written out.
                    .or_else(|| self.judge_line_values(segment, mode, grants, globs))
                    // Issue 41: a shell or an interpreter it is handed.
                    .or_else(|| self.runs_code_through_argument(segment, mode, globs))
            })
            .flatten();
        match (matched, unknown_wrapper) {
            (Some(matched), Some(flagged)) if matched.decision < Decision::Ask => return flagged,
            (Some(matched), _) => return matched,
            (None, Some(flagged)) => return flagged,
            (None, None) => {}
        }
        if segment.words.is_empty() && !segment.writes_redirect() && segment.opaque.is_none() {
            return Verdict::new(
                Decision::Allow,
                format!("{shown} runs nothing"),
                Cause::RunsNothing,
            );
        }
        if let Some(why) = &segment.opaque {
            // Issue 41: a wrapper unread for a word the line gives known values is judged
            // on the line each value makes.
            if let Some(by_value) = self.unread_wrapper_by_value(segment, mode, grants, globs) {
                return by_value;
            }
            // The command could be anything, including what a deny or ask rule names, so
            // it is never allowed silently (P5).
            return Verdict::new(
                Decision::Ask,
                format!("{shown} cannot be known before it runs: {why}"),
                Cause::Opaque { why: why.clone() },
            );
        }
        match mode {
            Mode::Auto => Verdict::new(
                Decision::Allow,
                format!("no rule matches {shown} (mode auto)"),
                Cause::Mode { mode },
            ),
            _ => Verdict {
                grant: grant_for(&segment.words),
                ..Verdict::new(
                    Decision::Ask,
                    format!("no rule matches {shown} (mode {})", mode.id()),
                    Cause::Mode { mode },
                )
            },
        }
    }

    /// P6: the first argument of a segment whose program is not a known wrapper that names
    /// the command of a deny rule, as an ask. An argument bash expands (`/usr/bin/r[m]`,
    /// `r{m,x}`) is read as what it expands to ([`globs::program_names`]).
    pub(in crate::policy) fn names_denied_command(
        &self,
        segment: &Segment,
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        let words = &segment.words;
        let program = base_name(words.first()?);
        if wrappers::is_wrapper(program) {
            return None;
        }
        words.iter().enumerate().skip(1).find_map(|(at, word)| {
            // Only a word bash expands costs an expansion; the others are their base name.
            let expanded = segment
                .patterns
                .contains(&at)
                .then(|| globs::program_names(word, &self.denied_names, globs));
            let names_it = |name: &str| match &expanded {
                Some(names) => names.iter().any(|n| n == name),
                None => base_name(word) == name,
            };
            let rule = self.rules.iter().find(|r| {
                r.covers_tool("bash")
                    && r.action == Decision::Deny
                    && r.prefix
                        .as_ref()
                        .and_then(|p| p.first())
                        .is_some_and(|first| first != "*" && names_it(first))
            })?;
            Some(Verdict::new(
                Decision::Ask,
                format!(
                    "`{program}` is not a known wrapper, and its argument `{word}` is what {} names",
                    rule.describe()
                ),
                Cause::UnknownWrapper {
                    word: word.clone(),
                    index: rule.index,
                    rule: rule.describe(),
                    origin: rule.origin.clone(),
                },
            ))
        })
    }

    /// The deny rules for bash that name a command (their first word is not `*`): what P3b's
    /// safety net and P8's reading look for.
    pub(in crate::policy) fn naming_deny_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| {
            r.covers_tool("bash")
                && r.action == Decision::Deny
                && r.prefix
                    .as_ref()
                    .and_then(|p| p.first())
                    .is_some_and(|first| first != "*")
        })
    }

    /// P3b's safety net: for a program with no row (neither a wrapper nor in
    /// `embedded/`), an argument (or the value of `--opt=value`, `key=value`) that parses
    /// as a command line in which a deny rule names a segment, as an ask. Only arguments
    /// holding a deny rule's first word as a word are parsed, so lines without one cost
    /// nothing.
    pub(in crate::policy) fn runs_denied_argument(&self, words: &[String]) -> Option<Verdict> {
        let program = base_name(words.first()?);
        if wrappers::is_wrapper(program)
            || embedded::has_row(program)
            || inline::is_interpreter(program)
        {
            return None;
        }
        let firsts = &self.denied_names;
        if firsts.is_empty() {
            return None;
        }
        words[1..].iter().find_map(|word| {
            let value = word.split_once('=').map(|(_, v)| v);
            [Some(word.as_str()), value]
                .into_iter()
                .flatten()
                // A first word standing as a word (`'rm x'`, `--run=/bin/rm`), not inside
                // one (`--format`): only then is the text worth parsing.
                .filter(|text| {
                    firsts.iter().any(|f| text.contains(f.as_str()))
                        && inline::code_words(text)
                            .iter()
                            .any(|w| firsts.iter().any(|f| f == base_name(w)))
                })
                .find_map(|text| {
                    let segments = shell::segments(text).ok()?;
                    let rule = segments.iter().find_map(|s| {
                        let opaque = s.opaque.as_ref().map(|_| tokens(&s.words));
                        self.naming_deny_rules()
                            .find(|r| r.applies(&s.words, opaque.as_deref()))
                    })?;
                    Some(Verdict::new(
                        Decision::Ask,
                        format!(
                            "`{program}` has no row in the tables, and its argument `{}` is a command line that {} names",
                            shorten(word),
                            rule.describe()
                        ),
                        Cause::CommandInArgument {
                            argument: word.clone(),
                            index: rule.index,
                            rule: rule.describe(),
                            origin: rule.origin.clone(),
                        },
                    ))
                })
        })
    }

    /// P3b's safety net, the other half (issue 41): for a program with no row, not a
    /// reader of the read-only list, an argument (or the value of `--opt=value`) holding
    /// an expansion that parses as a command line with a segment that cannot be known
    /// (`sem --fg 'x=r; ${x}m c'`, `logsave /dev/null sh -c '...'`): the program may run it,
    /// and what it would run hides its name, so it is asked in mode `auto` under a deny or
    /// ask rule, as P5 asks such a segment on the line itself.
    pub(in crate::policy) fn runs_opaque_argument(
        &self,
        segment: &Segment,
        mode: Mode,
    ) -> Option<Verdict> {
        let program = self.unknown_program(segment, mode)?;
        let words = &segment.words;
        // A word the shell expands gives the program a value, not code (`"$PWD":/src`).
        let literal = |at: &usize| !segment.expanded.contains(at);
        (1..words.len()).filter(literal).find_map(|at| {
            let word = &words[at];
            let value = word.split_once('=').map(|(_, v)| v);
            [Some(word.as_str()), value]
                .into_iter()
                .flatten()
                // Only text the program would expand can hide a name: the rest is read
                // by the safety net above.
                .filter(|text| text.contains(['$', '`']))
                .find_map(|text| {
                    let segments = shell::segments(text).ok()?;
                    let why = segments.iter().find_map(|s| s.opaque.clone())?;
                    Some(Verdict::new(
                        Decision::Ask,
                        format!(
                            "`{program}` has no row in the tables, and its argument `{}` is a command line that cannot be known before it runs: {why}",
                            shorten(word)
                        ),
                        Cause::Opaque { why },
                    ))
                })
        })
    }

    /// P8: the verdict on the inline code of a segment (given on its line or fed on its
    /// stdin by the line), if it holds code that is not shown harmless: deny when a deny
    /// rule's words stand in it as words, else ask in mode `auto` when a deny or ask rule
    /// exists (with neither, `auto` allows what no rule names; mode `ask` asks everything
    /// no rule allows already; read-only mode is judged before).
    pub(in crate::policy) fn inline_code(&self, segment: &Segment, mode: Mode) -> Option<Verdict> {
        let code = code_of(segment)?;
        let inline::Reading::Opaque(why) = &code.reading else {
            return None;
        };
        let tokens: Vec<&str> = code.words.iter().map(String::as_str).collect();
        let program = base_name(segment.words.first()?);
        if let Some(rule) = self.naming_deny_rules().find(|r| r.appears_in(&tokens)) {
            return Some(Verdict::new(
                Decision::Deny,
                format!(
                    "the {} code given to `{program}` holds the words of {}",
                    code.language,
                    rule.describe()
                ),
                Cause::InlineCode {
                    language: code.language.into(),
                    why: why.clone(),
                    rule: Some(RuleRef {
                        index: rule.index,
                        rule: rule.describe(),
                        origin: rule.origin.clone(),
                    }),
                },
            ));
        }
        (self.guarded() && mode == Mode::Auto).then(|| {
            Verdict::new(
                Decision::Ask,
                format!(
                    "the {} code given to `{program}` is not shown harmless ({why}), and a rule cannot see into it",
                    code.language
                ),
                Cause::InlineCode {
                    language: code.language.into(),
                    why: why.clone(),
                    rule: None,
                },
            )
        })
    }

    /// Whether a deny or ask rule for bash exists: only then does mode `auto` ask about
    /// what it cannot show harmless (P8); without one, `auto` allows what no rule names.
    pub(in crate::policy) fn guarded(&self) -> bool {
        !self.denied_names.is_empty()
            || self
                .rules
                .iter()
                .any(|r| r.covers_tool("bash") && r.action == Decision::Ask)
    }

    /// P8: the ask for a segment given variables the judge has not met, in mode `auto`
    /// under a deny or ask rule. A variable naming a file to write is no code: only
    /// read-only mode refuses it ([`Policy::not_read_only`]).
    pub(in crate::policy) fn unknown_environment(
        &self,
        segment: &Segment,
        mode: Mode,
    ) -> Option<Verdict> {
        let unknown: Vec<word::Assigned> = segment
            .assigned
            .iter()
            // Only an export carries one that changes which program runs (in front of a
            // command it makes the command opaque).
            .filter(|a| {
                matches!(
                    a.effect,
                    word::EnvEffect::Unknown | word::EnvEffect::ChangesCode
                )
            })
            .cloned()
            .collect();
        if unknown.is_empty() || mode != Mode::Auto || !self.guarded() {
            return None;
        }
        Some(Verdict::new(
            Decision::Ask,
            format!(
                "{} sets {}, which the judge does not know to be harmless: a variable can make a program run other code",
                quote_segment(segment),
                variable_names(&unknown)
            ),
            Cause::Environment { variables: unknown },
        ))
    }

    /// Why `segment` is not known to be read-only (and what decided so), or `None` when it
    /// is (P7).
    pub(in crate::policy) fn not_read_only(&self, segment: &Segment) -> Option<(String, Cause)> {
        if let Some(why) = &segment.opaque {
            return Some((
                format!("cannot be known before it runs: {why}"),
                Cause::Opaque { why: why.clone() },
            ));
        }
        // P8: a variable the judge has not met may make the command run code, and one
        // naming a file (`GIT_TRACE2=/tmp/t`) makes it write there; set with no command,
        // it does so to the programs after it that inherit it.
        if !segment.assigned.is_empty() {
            let writes = segment
                .assigned
                .iter()
                .all(|a| a.effect == word::EnvEffect::WritesFile);
            return Some((
                format!(
                    "sets {}, which {}",
                    variable_names(&segment.assigned),
                    if writes {
                        "names a file the program writes"
                    } else {
                        "the judge does not know to be harmless"
                    }
                ),
                Cause::Environment {
                    variables: segment.assigned.clone(),
                },
            ));
        }
        let why = if segment.writes_redirect() {
            Some("writes through a redirection".to_owned())
        } else if segment.words.is_empty() {
            // Only assignments (or an input redirection): nothing runs. Assignments that
            // change what later commands run (`PATH=...`) make the segment opaque.
            None
        } else if !self.on_read_only_list(segment) {
            Some("is not known to be read-only".to_owned())
        } else {
            line_values::writing_option(segment).map(|option| {
                format!(
                    "is not known to be read-only (`{option}` writes, runs code or changes the system)"
                )
            })
        };
        why.map(|why| (why, Cause::ReadOnly))
    }

    /// Whether `segment`'s words begin with a command of the read-only list (P7).
    fn on_read_only_list(&self, segment: &Segment) -> bool {
        self.read_only
            .iter()
            .any(|prefix| segment.words.starts_with(prefix))
    }

    /// Whether `segment`'s words are a reader's (P7): on the read-only list, with no option
    /// that writes, runs code or changes the system. What its redirections and variables do
    /// is the caller's to judge: for `judge/written/`, `ls > files.txt` moves no text
    /// between files the line names.
    pub(in crate::policy) fn reads_only(&self, segment: &Segment) -> bool {
        self.on_read_only_list(segment) && line_values::writing_option(segment).is_none()
    }
}

/// Issue 41: a standalone assignment (`X=...` with no command) changes what the programs
/// after it see when `X` is exported: by the line (`export X`, judged there), by `set -a`,
/// or by the environment the line inherits, which the judge cannot see. So its variables
/// are judged as ones set in front of a command when a program runs after it on the line
/// (a builtin of [`SHELL_ONLY`] reads no environment: `X=1; echo $X`), except names
/// holding a lowercase letter when the line does not export everything: POSIX keeps those
/// for applications ("names used by the utilities consist solely of uppercase letters,
/// digits, and the underscore"), which is how `n=r` or `dir=build` stay shell variables.
fn keep_standalone_assignments_that_may_be_exported(segments: &mut [Segment]) {
    let is_set = |s: &Segment| s.words.first().is_some_and(|w| w == "set");
    let exports_all = segments.iter().filter(|s| is_set(s)).any(|s| {
        s.words
            .windows(2)
            .any(|w| w[0] == "-o" && w[1] == "allexport")
            || s.words[1..].iter().any(|w| {
                w.strip_prefix('-')
                    .is_some_and(|flags| !flags.starts_with('-') && flags.contains('a'))
            })
    });
    for at in 0..segments.len() {
        if !segments[at].words.is_empty() || segments[at].assigned.is_empty() {
            continue;
        }
        let inherited_later = segments[at + 1..].iter().any(|s| {
            s.words
                .first()
                .is_some_and(|w| !SHELL_ONLY.contains(&w.as_str()))
        });
        segments[at].assigned.retain(|a| {
            inherited_later && (exports_all || !a.name.chars().any(|c| c.is_ascii_lowercase()))
        });
    }
}

/// The inline code of `segment` ([`inline::inline_code`]), opaque when what the program
/// gets as code depends on a word the shell expands when the line runs (P8, issue 41):
/// `perl -e "$(printf 'system(\"%s\")' 'rm c')"` is not the perl its text reads as. Told
/// by reading the segment again with two different values in place of those words: code
/// that changes with them is built at run time; a word that is data (`python3 -c '...'
/// "$FILE"`) changes nothing.
pub(in crate::policy) fn code_of(segment: &Segment) -> Option<inline::Code> {
    let code = inline::inline_code(&segment.words, segment.stdin.as_deref())?;
    let expanded: Vec<usize> = segment
        .expanded
        .iter()
        .copied()
        .filter(|&i| i > 0)
        .collect();
    if expanded.is_empty() || !code.is_harmless() {
        return Some(code);
    }
    let read_with = |value: &str| {
        let mut words = segment.words.clone();
        for &i in &expanded {
            if let Some(word) = words.get_mut(i) {
                *word = value.to_owned();
            }
        }
        inline::inline_code(&words, segment.stdin.as_deref()).map(|c| c.words)
    };
    if read_with("dshvalueone") == read_with("dshvaluetwo") {
        return Some(code);
    }
    Some(inline::Code {
        reading: inline::Reading::Opaque(
            "its code is built by the shell when the line runs (an expansion)".into(),
        ),
        ..code
    })
}
