//! The walk over a parsed command line that collects its segments (P1, P2, P4, P5).

mod parameter;
mod sets;

use super::scan::check_nesting;
use super::values::{
    LineSets, assigned_in_arithmetic, push_expansion, push_text, read_in_arithmetic,
};
use super::words::{
    decode_ansi_c, evaluates_variables, has_pattern, is_descriptor, is_dev_null, unescape,
};
use super::{
    MAX_INPUT_BYTES, MAX_PARSE_COST, MAX_RECURSION, ParseError, Segment, WriteTarget, guarded,
    short_error,
};
use crate::policy::word::{self, Assigned, EnvEffect, Expansion, Word, env_effect, texts};
use crate::policy::wrappers::{InnerCommand, Stdin, env_command, inner_commands};
use brush_parser::word::{self as bash_word, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions, ast};

/// Walks parsed command lines and collects their segments.
pub(super) struct Walker {
    options: ParserOptions,
    pub(super) out: Vec<Segment>,
    /// The wrappers the walk is inside of, outermost first: every segment found carries it.
    via: Vec<String>,
    depth: usize,
    /// What is left of `MAX_PARSE_COST` for all the lines parsed in this call.
    budget: u64,
    /// What the line sets, read once the whole line is walked (issue 41).
    sets: LineSets,
    /// Beside each segment of `out`, what is read once `sets` is complete.
    pending: Vec<Pending>,
    /// How many function bodies and scripts run by a wrapper the walk is inside of: there
    /// the positional parameters are a call's arguments.
    scope: usize,
    /// How many loops, function bodies and scripts run by a wrapper the walk is inside of:
    /// what is set there may be set again from itself.
    repeats: usize,
    /// The command walked now reads a stdin the line gives it (a pipe, or its wrapper's).
    fed: bool,
}

/// What a segment leaves to be read once the whole line is walked (issue 41).
#[derive(Default)]
struct Pending {
    /// Its words that hold an expansion, by index.
    words: Vec<(usize, Word)>,
    /// For an arithmetic hazard, the names its text reads when that is all it reads: the
    /// hazard goes when the line sets each of them only to numbers.
    arithmetic: Option<Vec<String>>,
}

impl Walker {
    pub(super) fn new() -> Walker {
        Walker {
            options: ParserOptions::default(),
            out: Vec::new(),
            via: Vec::new(),
            depth: 0,
            budget: MAX_PARSE_COST,
            sets: LineSets::default(),
            pending: Vec::new(),
            scope: 0,
            repeats: 0,
            fed: false,
        }
    }

    /// The segments, once the whole line is walked: each word holding a value the line
    /// chooses gets its reading, and an arithmetic hazard on names the line sets only to
    /// numbers is dropped.
    pub(super) fn finish(self) -> Vec<Segment> {
        let Walker {
            out, pending, sets, ..
        } = self;
        // `pending` runs beside `out` (every segment is added through `emit`); should it
        // ever fall short, a segment keeps its reading as written rather than being lost.
        let mut pending = pending.into_iter();
        out.into_iter()
            .map(|segment| (segment, pending.next().unwrap_or_default()))
            .filter(|(_, pending)| {
                pending.arithmetic.as_ref().is_none_or(|names| {
                    names.is_empty() || !names.iter().all(|n| sets.only_numbers(n))
                })
            })
            .map(|(mut segment, pending)| {
                segment.line_values = sets.line_values(&pending.words);
                segment
            })
            .collect()
    }

    /// Walks what may run more than once.
    fn looped(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        self.repeats += 1;
        let result = f(self);
        self.repeats -= 1;
        result
    }

    /// Adds a segment, with its words that hold an expansion to read at the end.
    fn emit(&mut self, segment: Segment, words: &[Word]) {
        self.out.push(segment);
        self.pending.push(Pending {
            words: with_pieces(words),
            arithmetic: None,
        });
    }

    /// Runs `f` one recursion level deeper, refusing to go past `MAX_RECURSION`.
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.depth >= MAX_RECURSION {
            return Err(ParseError::TooDeep { max: MAX_RECURSION });
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Parses `source` as a command line and walks it.
    pub(super) fn line(&mut self, source: &str) -> Result<(), ParseError> {
        self.nested(|w| {
            if source.len() > MAX_INPUT_BYTES {
                return Err(ParseError::TooLong {
                    what: "a nested command",
                    max_bytes: MAX_INPUT_BYTES,
                });
            }
            check_nesting(source, &mut w.budget)?;
            let options = &w.options;
            let program = guarded("the shell parser", || {
                Parser::new(source.as_bytes(), options).parse_program()
            })?
            .map_err(short_error)?;
            for list in &program.complete_commands {
                w.list(list)?;
            }
            Ok(())
        })
    }

    fn list(&mut self, list: &ast::CompoundList) -> Result<(), ParseError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), ParseError> {
        let fed = self.fed;
        for (at, command) in pipeline.seq.iter().enumerate() {
            // After a `|`, stdin is the line's; the first command keeps what it had.
            self.fed = fed || at > 0;
            let result = self.command(command);
            self.fed = fed;
            result?;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command) -> Result<(), ParseError> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.redirected(redirects.as_ref(), |w| w.compound(compound))
            }
            // A definition runs nothing by itself, but its body runs whenever the name is
            // called later in the line, which cannot be tracked; judge the body as if run.
            ast::Command::Function(def) => {
                let ast::FunctionBody(body, redirects) = &def.body;
                self.scope += 1;
                self.repeats += 1;
                let result = self.redirected(redirects.as_ref(), |w| w.compound(body));
                self.scope -= 1;
                self.repeats -= 1;
                result
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirected(redirects.as_ref(), |w| w.test(&test.expr))
            }
        }
    }

    /// Walks a compound command, then applies its redirections to what it ran: every segment
    /// inside writes through them. One that runs no simple command at all (`((1)) > f`) still
    /// truncates the file, so it becomes a segment of its own.
    fn redirected(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        body: impl FnOnce(&mut Self) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        let start = self.out.len();
        body(self)?;
        let end = self.out.len();
        let mut writes = Vec::new();
        for redirect in redirects.iter().flat_map(|list| list.0.iter()) {
            let (target, stdin) = self.redirect(redirect)?;
            writes.extend(target);
            if stdin.is_some() {
                for segment in &mut self.out[start..end] {
                    segment.fed = true;
                }
            }
        }
        if !writes.is_empty() {
            if start == end {
                let only_redirect = Segment {
                    via: self.via.clone(),
                    writes,
                    ..Segment::default()
                };
                self.out.insert(end, only_redirect);
                self.pending.insert(end, Pending::default());
            } else {
                for segment in &mut self.out[start..end] {
                    segment.writes.extend(writes.iter().cloned());
                }
            }
        }
        Ok(())
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) -> Result<(), ParseError> {
        use ast::CompoundCommand as C;
        self.nested(|w| match compound {
            C::Arithmetic(a) => w.arithmetic(&a.expr.value, &format!("(({}))", a.expr.value)),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    w.arithmetic(&expr.value, &format!("(({}))", expr.value))?;
                }
                w.looped(|w| w.list(&f.body.list))
            }
            C::BraceGroup(group) => w.list(&group.list),
            C::Subshell(subshell) => w.list(&subshell.list),
            C::ForClause(f) => {
                match &f.values {
                    Some(values) => {
                        for value in values {
                            let value = w.word(value)?;
                            w.sets.loop_value(&f.variable_name, value);
                        }
                    }
                    // `for x; do`: the positional parameters.
                    None => w
                        .sets
                        .unknown(&f.variable_name, "takes the arguments of a call"),
                }
                w.looped(|w| w.list(&f.body.list))
            }
            C::CaseClause(c) => {
                w.word(&c.value)?;
                for item in &c.cases {
                    for pattern in &item.patterns {
                        w.word(pattern)?;
                    }
                    if let Some(list) = &item.cmd {
                        w.list(list)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                w.list(&i.condition)?;
                w.list(&i.then)?;
                for clause in i.elses.iter().flatten() {
                    if let Some(condition) = &clause.condition {
                        w.list(condition)?;
                    }
                    w.list(&clause.body)?;
                }
                Ok(())
            }
            C::WhileClause(clause) | C::UntilClause(clause) => w.looped(|w| {
                w.list(&clause.0)?;
                w.list(&clause.1.list)
            }),
            C::Coprocess(coproc) => w.command(&coproc.body),
        })
    }

    /// `[[ ]]`: runs nothing itself, but its operands can hold substitutions, and its
    /// arithmetic comparisons and `-v` evaluate variables as arithmetic.
    fn test(&mut self, expr: &ast::ExtendedTestExpr) -> Result<(), ParseError> {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E, UnaryPredicate as U};
        self.nested(|w| match expr {
            E::And(a, b) | E::Or(a, b) => {
                w.test(a)?;
                w.test(b)
            }
            E::Not(a) | E::Parenthesized(a) => w.test(a),
            E::UnaryTest(predicate, operand) => {
                let operand = w.word(operand)?;
                if matches!(
                    predicate,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                ) && (operand.text.contains('[') || operand.dynamic)
                {
                    w.arithmetic_hazard(&format!("[[ -v {} ]]", operand.text));
                }
                Ok(())
            }
            E::BinaryTest(predicate, left, right) => {
                let left = w.word(left)?;
                let right = w.word(right)?;
                let arithmetic = matches!(
                    predicate,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                if arithmetic
                    && (evaluates_variables(&left.text) || evaluates_variables(&right.text))
                {
                    w.arithmetic_hazard(&format!("[[ {} {predicate} {} ]]", left.text, right.text));
                    if let (Some(pending), Some(mut names), Some(more)) = (
                        w.pending.last_mut(),
                        arithmetic_operand(&left),
                        arithmetic_operand(&right),
                    ) {
                        names.extend(more);
                        pending.arithmetic = Some(names);
                    }
                }
                Ok(())
            }
        })
    }

    fn simple(&mut self, command: &ast::SimpleCommand) -> Result<(), ParseError> {
        // Reserve the command's place so that it precedes the commands nested in its words.
        let index = self.out.len();
        self.emit(Segment::default(), &[]);
        let mut parts = Parts::default();
        if let Some(prefix) = &command.prefix {
            for item in &prefix.0 {
                self.item(item, true, &mut parts)?;
            }
        }
        if let Some(name) = &command.word_or_name {
            let name = self.word(name)?;
            parts.words.push(name);
        }
        if let Some(suffix) = &command.suffix {
            for item in &suffix.0 {
                self.item(item, false, &mut parts)?;
            }
        }
        let opaque = opaque_name(&parts.words, parts.risky_env);
        self.out[index] = Segment {
            words: texts(&parts.words),
            via: self.via.clone(),
            opaque,
            writes: std::mem::take(&mut parts.writes),
            stdin: literal(parts.stdin.as_ref()),
            assigned: std::mem::take(&mut parts.assigned),
            patterns: patterns(&parts.words),
            expanded: expanded(&parts.words),
            line_values: Vec::new(),
            fed: self.fed || parts.stdin.is_some(),
            unread_wrapper: false,
        };
        self.pending[index].words = with_pieces(&parts.words);
        self.note_sets(&parts.words);
        let stdin = parts.stdin.unwrap_or(Stdin::Unknown);
        // What the assignments before it run comes after the command, as a wrapper's
        // would, found through the environment (`env PAGER -> less`).
        if !parts.env.is_empty() {
            self.via.push("env".into());
            let env = std::mem::take(&mut parts.env);
            let result = env
                .into_iter()
                .try_for_each(|inner| self.nested(|w| w.inner(&parts.words, inner, &stdin)));
            self.via.pop();
            result?;
        }
        // What a wrapper runs reads the wrapper's stdin.
        let fed = std::mem::replace(&mut self.fed, self.out[index].fed);
        let result = self.unwrap(&parts.words, &stdin);
        self.fed = fed;
        result
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        parts: &mut Parts,
    ) -> Result<(), ParseError> {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::Word(word) => {
                let word = self.word(word)?;
                // Issue 41: `X=...; export X` exports a value the judge did not read.
                if !in_prefix && word::exports(&parts.words) {
                    word::note_export(&word, &mut parts.assigned);
                }
                parts.words.push(word);
            }
            // Before the name it is an assignment (not a word); after it, an argument such
            // as `export X=1` or `declare a=(1 2)`.
            I::AssignmentWord(assignment, word) => {
                if in_prefix {
                    let value = self.assignment(assignment)?;
                    let name = assignment_name(assignment);
                    self.note_assignment(assignment, value.as_ref());
                    // P3b, issue 41: a variable whose value the command will run as a
                    // command line (`PAGER=`, `GIT_SSH_COMMAND=`) is judged by that value
                    // below, so it does not make the command unknown: `PAGER=cat git log`
                    // is `git log` and `cat`, as `export PAGER=cat; git log` is.
                    // Issue 41: by an allowlist; a variable the judge has not met may make
                    // the program run other code, and is judged as such (P8).
                    match env_effect(name, value.as_ref()) {
                        EnvEffect::Harmless | EnvEffect::JudgedByValue => {}
                        EnvEffect::ChangesCode => parts.risky_env = true,
                        effect @ (EnvEffect::WritesFile | EnvEffect::Unknown) => {
                            parts.assigned.push(Assigned {
                                name: name.to_owned(),
                                effect,
                            })
                        }
                    }
                    // P3b: a variable whose value the command will run (`PAGER=`,
                    // `GIT_SSH_COMMAND=`, `BASH_ENV=`) is judged as what it runs.
                    if let Some(value) = value {
                        let assigned = Word {
                            text: format!("{name}={}", value.text),
                            ..value
                        };
                        parts.env.extend(env_command(&assigned));
                    }
                } else {
                    // `export PAGER=...`, `declare -x GIT_SSH_COMMAND=...`: the variable
                    // reaches the commands after it, which run its value (P3b).
                    let word = self.word(word)?;
                    self.note_declared(assignment, &word, &parts.words);
                    parts.env.extend(env_command(&word));
                    // P8, issue 41: an exported variable reaches the commands after it as
                    // one set in front of them does (`export LUA_INIT=...; lua -e 1`), so
                    // one not shown harmless is flagged on this segment the same way:
                    // asked in auto under a deny or ask rule, refused in read-only.
                    if word::exports(&parts.words) {
                        word::note_export(&word, &mut parts.assigned);
                    }
                    parts.words.push(word);
                }
            }
            I::IoRedirect(redirect) => {
                let (target, stdin) = self.redirect(redirect)?;
                parts.writes.extend(target);
                // The last redirection of stdin is the one the command reads.
                if stdin.is_some() {
                    parts.stdin = stdin;
                }
            }
            I::ProcessSubstitution(kind, subshell) => {
                self.nested(|w| w.list(&subshell.list))?;
                parts.words.push(Word {
                    text: format!("{kind}({})", subshell.list),
                    dynamic: true,
                    ..Word::default()
                });
            }
        }
        Ok(())
    }

    /// Walks an assignment's words; returns its value when it is a scalar.
    fn assignment(&mut self, assignment: &ast::Assignment) -> Result<Option<Word>, ParseError> {
        if let ast::AssignmentName::ArrayElementName(name, index) = &assignment.name {
            self.arithmetic(index, &format!("{name}[{index}]="))?;
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(value) => {
                return self.word(value).map(Some);
            }
            ast::AssignmentValue::Array(elements) => {
                for (key, value) in elements {
                    if let Some(key) = key {
                        self.word(key)?;
                    }
                    self.word(value)?;
                }
            }
        }
        Ok(None)
    }

    /// Walks a redirection's words. Says where it writes, when it writes to a file, and
    /// what it gives the command as stdin when it redirects stdin.
    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
    ) -> Result<(Option<WriteTarget>, Option<Stdin>), ParseError> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        let is_stdin = |fd: &Option<i32>| fd.is_none_or(|fd| fd == 0);
        Ok(match redirect {
            R::File(fd, kind, target) => {
                let output = matches!(
                    kind,
                    K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput
                );
                let input = matches!(kind, K::Read | K::ReadAndWrite | K::DuplicateInput);
                let stdin = (input && is_stdin(fd)).then_some(Stdin::Unknown);
                let writes = match target {
                    T::Filename(word) | T::Duplicate(word) => {
                        let target = self.word(word)?;
                        // `>&2`, `2>&1-`, `>&-` duplicate or close descriptors; `>&file` is
                        // bash for `&>file`.
                        let duplicates = matches!(kind, K::DuplicateOutput | K::DuplicateInput)
                            && is_descriptor(&target);
                        (output && !duplicates && !is_dev_null(&target))
                            .then(|| write_target(target))
                    }
                    T::Fd(_) => None,
                    // What `> >(cmd)` writes reaches `cmd`'s stdin, not a file: the
                    // commands inside write their own files, as segments of their own.
                    T::ProcessSubstitution(_, subshell) => {
                        self.nested(|w| w.list(&subshell.list))?;
                        None
                    }
                };
                (writes, stdin)
            }
            R::HereDocument(fd, doc) => {
                let body = &doc.doc.value;
                // An expanding body is literal only when it has nothing to expand.
                let literal = !doc.requires_expansion || !body.contains(['$', '`', '\\']);
                if doc.requires_expansion {
                    self.heredoc(body)?;
                }
                let stdin = literal.then(|| Stdin::Literal(body.clone()));
                (None, is_stdin(fd).then(|| stdin.unwrap_or(Stdin::Unknown)))
            }
            R::HereString(fd, word) => {
                let word = self.word(word)?;
                let stdin = if word.dynamic {
                    Stdin::Unknown
                } else {
                    Stdin::Literal(word.text)
                };
                (None, is_stdin(fd).then_some(stdin))
            }
            R::OutputAndError(word, _) => {
                let target = self.word(word)?;
                ((!is_dev_null(&target)).then(|| write_target(target)), None)
            }
        })
    }

    fn word(&mut self, word: &ast::Word) -> Result<Word, ParseError> {
        self.word_text(&word.value)
    }

    /// Parses raw word text into pieces, walking every substitution in it.
    fn word_text(&mut self, raw: &str) -> Result<Word, ParseError> {
        // Most words are plain (`-rf`, `build`, `status`): nothing in them quotes, expands
        // or matches, so they are their own value. Skipping the word parser for them is
        // most of the walk's time on a long line.
        if raw.bytes().all(|b| !PLAIN_WORD_EXCLUDES.contains(&b)) {
            return Ok(Word::literal(raw));
        }
        // A word that is one single-quoted string (`'^??'`, `'cd src && make'`) is its
        // text between the quotes, as the word parser would find it, with nothing dynamic
        // and no pattern: skipping the parser (and its cache, which copies the word and
        // every result) for it is cheap on a line agents write full of such arguments.
        if let Some(inner) = raw
            .strip_prefix('\'')
            .and_then(|rest| rest.strip_suffix('\''))
            .filter(|inner| !inner.contains('\''))
        {
            return Ok(Word::literal(inner));
        }
        self.nested(|w| {
            let options = &w.options;
            let pieces = guarded("the word parser", || bash_word::parse(raw, options))?
                .map_err(short_error)?;
            let mut word = Word::default();
            w.pieces(raw, &pieces, false, &mut word)?;
            Ok(word)
        })
    }

    /// A here-document body that expands: only its substitutions matter.
    fn heredoc(&mut self, body: &str) -> Result<(), ParseError> {
        self.nested(|w| {
            let options = &w.options;
            let pieces = guarded("the here-document parser", || {
                bash_word::parse_heredoc(body, options)
            })?
            .map_err(short_error)?;
            w.pieces(body, &pieces, true, &mut Word::default())
        })
    }

    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        word: &mut Word,
    ) -> Result<(), ParseError> {
        for piece in pieces {
            // Piece indices are offsets into `raw`, also for pieces nested in double quotes.
            let source = raw
                .get(piece.start_index..piece.end_index)
                .unwrap_or_default();
            match &piece.piece {
                WordPiece::Text(text) => {
                    word.pattern |= !quoted && has_pattern(text);
                    push_text(word, text);
                }
                WordPiece::SingleQuotedText(text) => push_text(word, text),
                WordPiece::AnsiCQuotedText(text) => push_text(word, &decode_ansi_c(text)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, true, word)?;
                }
                // `~` depends only on the user's home, not on anything the command controls.
                WordPiece::TildeExpansion(_) => push_text(word, source),
                WordPiece::ParameterExpansion(expr) => {
                    word.dynamic = true;
                    let kind = self.parameter(expr, source)?;
                    push_expansion(word, source, kind, quoted);
                }
                WordPiece::CommandSubstitution(body)
                | WordPiece::BackquotedCommandSubstitution(body) => {
                    word.dynamic = true;
                    let before = self.out.len();
                    self.line(body)?;
                    // Quoted, its value is one word: the text when `cat` only prints a
                    // here-document the line shows (unquoted, bash would split it).
                    let kind = match printed_text(&self.out[before..]) {
                        Some(text) if quoted => Expansion::Printed(text),
                        _ => Expansion::Output,
                    };
                    push_expansion(word, source, kind, quoted);
                }
                WordPiece::EscapeSequence(escape) => push_text(word, unescape(escape)),
                WordPiece::ArithmeticExpression(expr) => {
                    word.dynamic = true;
                    push_expansion(word, source, Expansion::Fixed, quoted);
                    self.arithmetic(&expr.value, source)?;
                }
            }
        }
        Ok(())
    }

    /// Arithmetic text (`$(( ))`, `(( ))`, subscripts): walks its substitutions, and adds a
    /// hazard segment when it reads variables.
    fn arithmetic(&mut self, text: &str, display: &str) -> Result<(), ParseError> {
        // Quotes are not special in arithmetic, so the here-document grammar (which only
        // knows `$`, backticks and backslashes) finds the substitutions without choking on
        // operators that a word cannot contain.
        self.heredoc(text)?;
        for name in assigned_in_arithmetic(text) {
            self.sets.number(name);
        }
        if evaluates_variables(text) {
            self.arithmetic_hazard(display);
            // Issue 41: a name the line sets only to numbers evaluates to a number.
            if let Some(pending) = self.pending.last_mut() {
                pending.arithmetic = read_in_arithmetic(text)
                    .map(|names| names.into_iter().map(str::to_owned).collect());
            }
        }
        Ok(())
    }

    /// Bash evaluates a variable used in arithmetic as an expression in turn, and array
    /// subscripts in that expression run command substitutions: after
    /// `x='a[$(rm -rf ~)]'`, `echo $((x))` runs `rm`. What a variable holds cannot be known
    /// statically, so such an evaluation is a segment whose command is unknown.
    fn arithmetic_hazard(&mut self, display: &str) {
        self.emit(
            Segment {
                words: vec![display.to_owned()],
                via: self.via.clone(),
                opaque: Some("arithmetic on a variable's value, which can run commands".into()),
                ..Segment::default()
            },
            &[],
        );
    }

    /// Adds the commands that the command `words` runs through a wrapper (P3, P4), or in
    /// its options, config keys and arguments (P3b), each with the program added to its
    /// chain.
    fn unwrap(&mut self, words: &[Word], stdin: &Stdin) -> Result<(), ParseError> {
        let inner = inner_commands(words, stdin);
        self.found(words, inner, stdin)
    }

    /// Adds `inner`, found in or through the command `words`, as more segments.
    fn found(
        &mut self,
        words: &[Word],
        inner: Vec<InnerCommand>,
        stdin: &Stdin,
    ) -> Result<(), ParseError> {
        if inner.is_empty() {
            return Ok(());
        }
        let name = words
            .first()
            .map(|w| w.base_name().to_owned())
            .unwrap_or_default();
        self.via.push(name);
        let result = inner
            .into_iter()
            .try_for_each(|inner| self.nested(|w| w.inner(words, inner, stdin)));
        self.via.pop();
        result
    }

    /// One command that the command `words` runs; the last entry of `via` is its program.
    fn inner(
        &mut self,
        words: &[Word],
        inner: InnerCommand,
        stdin: &Stdin,
    ) -> Result<(), ParseError> {
        match inner {
            InnerCommand::Command {
                words,
                risky_env,
                assigned,
            } => {
                let segment = Segment {
                    words: texts(&words),
                    via: self.via.clone(),
                    opaque: opaque_name(&words, risky_env),
                    writes: Vec::new(),
                    stdin: literal(Some(stdin)),
                    assigned,
                    patterns: patterns(&words),
                    expanded: expanded(&words),
                    line_values: Vec::new(),
                    fed: self.fed,
                    unread_wrapper: false,
                };
                self.emit(segment, &words);
                // What a wrapper runs inherits the wrapper's stdin.
                self.unwrap(&words, stdin)
            }
            // Its positional parameters are the wrapper's arguments (`bash -c '..$1' _ x`).
            InnerCommand::Script(script) => {
                self.scope += 1;
                self.repeats += 1;
                let result = self.line(&script);
                self.scope -= 1;
                self.repeats -= 1;
                result
            }
            // The wrapper's whole command, with its words, so that the values the line
            // gives them are read at the end (`finish`) and judged (`line_values.rs`).
            InnerCommand::Unread { why } => {
                let segment = Segment {
                    words: texts(words),
                    via: self.via.clone(),
                    opaque: Some(why),
                    stdin: literal(Some(stdin)),
                    patterns: patterns(words),
                    expanded: expanded(words),
                    fed: self.fed,
                    unread_wrapper: true,
                    ..Segment::default()
                };
                self.emit(segment, words);
                Ok(())
            }
            InnerCommand::Opaque { words: inner, why } => {
                // With no words of its own (`bash` reading stdin) it stands for the
                // wrapper's whole line.
                let shown = if inner.is_empty() { words } else { &inner[..] };
                let segment = Segment {
                    words: texts(shown),
                    via: self.via.clone(),
                    opaque: Some(why),
                    ..Segment::default()
                };
                self.emit(segment, &[]);
                Ok(())
            }
            // The chain names the place: `tar --to-command -> rm`, `env PAGER -> less`.
            // A variable set by `env` (or before the command) is `env NAME`; one set by
            // another wrapper follows it: `sudo -> env EDITOR -> rm`.
            InnerCommand::Through { how, inner } => {
                let program = self.via.last().cloned().unwrap_or_default();
                let variable = how.starts_with("env ");
                let replace = !variable || program == "env";
                if replace {
                    self.via.pop();
                }
                self.via.push(if variable {
                    how
                } else {
                    format!("{program} {how}")
                });
                let result = self.nested(|w| w.inner(words, *inner, stdin));
                self.via.pop();
                if replace {
                    self.via.push(program);
                }
                result
            }
        }
    }
}

/// Bytes that make a word more than its own text: quoting, escapes, expansions, patterns,
/// tilde and process substitution.
const PLAIN_WORD_EXCLUDES: &[u8] = b"$`'\"\\*?[]{}~()<>";

/// What one simple command is made of, collected while walking it.
#[derive(Default)]
struct Parts {
    words: Vec<Word>,
    /// Where its own redirections write.
    writes: Vec<WriteTarget>,
    risky_env: bool,
    /// The variables set in front of it that are not shown harmless.
    assigned: Vec<Assigned>,
    /// What its own redirections give it as stdin, if any.
    stdin: Option<Stdin>,
    /// What the variables assigned before it run (P3b).
    env: Vec<InnerCommand>,
}

/// The words that hold an expansion, by index, for reading once the line is walked.
fn with_pieces(words: &[Word]) -> Vec<(usize, Word)> {
    words
        .iter()
        .enumerate()
        .filter(|(_, w)| !w.pieces.is_empty() && w.dynamic)
        .map(|(at, w)| (at, w.clone()))
        .collect()
}

/// The names an operand of `[[ a -lt b ]]` reads as arithmetic, when that is all it reads.
fn arithmetic_operand(word: &Word) -> Option<Vec<String>> {
    match word.pieces.as_slice() {
        [] => read_in_arithmetic(&word.text).map(|n| n.into_iter().map(str::to_owned).collect()),
        [
            word::Piece::Expansion {
                kind: Expansion::Variable(name),
                ..
            },
        ] => Some(vec![name.clone()]),
        _ => None,
    }
}

/// Why a command named by `words` cannot be known before it runs, if it cannot (P5).
fn opaque_name(words: &[Word], risky_env: bool) -> Option<String> {
    if risky_env {
        return Some("it sets a variable that changes which program runs (PATH, LD_*, ...)".into());
    }
    let name = words.first()?;
    if name.dynamic {
        Some("its command name is built from an expansion".into())
    } else if name.pattern {
        Some("its command name is a glob or brace pattern".into())
    } else if name.text.is_empty() {
        Some("its command name is empty".into())
    } else {
        None
    }
}

/// The indices of the words bash expands as patterns.
fn patterns(words: &[Word]) -> Vec<usize> {
    indices(words, |w| w.pattern)
}

/// The indices of `words` whose text is the source of an expansion bash performs
/// (`"$PWD"`, `$(date)`): what the program gets is their value, not their text.
fn expanded(words: &[Word]) -> Vec<usize> {
    indices(words, |w| w.dynamic)
}

/// The indices of `words` for which `holds` is true.
fn indices(words: &[Word], holds: impl Fn(&Word) -> bool) -> Vec<usize> {
    (0..words.len()).filter(|&i| holds(&words[i])).collect()
}

fn assignment_name(assignment: &ast::Assignment) -> &str {
    match &assignment.name {
        ast::AssignmentName::VariableName(name) => name,
        ast::AssignmentName::ArrayElementName(name, _) => name,
    }
}

/// The target of a redirection to the file `word` names: the word as written when bash
/// opens exactly that name, else unknown (an expansion, a pathname or brace pattern).
fn write_target(word: Word) -> WriteTarget {
    if word.dynamic || word.pattern {
        WriteTarget::Unknown
    } else {
        WriteTarget::File(word.text)
    }
}

/// The text of a literal here-document or here-string, if that is what stdin is.
fn literal(stdin: Option<&Stdin>) -> Option<String> {
    match stdin {
        Some(Stdin::Literal(text)) => Some(text.clone()),
        _ => None,
    }
}

/// The text a command substitution's `segments` print when they are one `cat` with no
/// argument, no redirection out and no assignment, fed a here-document or here-string the
/// line shows: that text, without the trailing newlines bash removes from the output.
fn printed_text(segments: &[Segment]) -> Option<String> {
    let [segment] = segments else {
        return None;
    };
    let text = segment.stdin.as_ref()?;
    (segment.words == ["cat"]
        && segment.opaque.is_none()
        && segment.writes.is_empty()
        && segment.assigned.is_empty()
        && !text.contains('\0'))
    .then(|| text.trim_end_matches('\n').to_owned())
}
