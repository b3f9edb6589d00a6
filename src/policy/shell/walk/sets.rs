//! What the line sets, noted while walking it (issue 41): assignments, `declare` and its
//! kin, and the builtins that set variables or the positional parameters.

use super::super::values::assigned_in_arithmetic;
use super::{Walker, assignment_name};
use crate::policy::word::{self, Word};
use brush_parser::ast;

impl Walker {
    /// Issue 41: what an assignment in front of a command (or alone) sets.
    pub(super) fn note_assignment(&mut self, assignment: &ast::Assignment, value: Option<&Word>) {
        let name = assignment_name(assignment);
        match value {
            Some(value)
                if !assignment.append
                    && matches!(assignment.name, ast::AssignmentName::VariableName(_)) =>
            {
                self.sets.assign(name, value.clone(), self.repeats > 0)
            }
            _ => self
                .sets
                .unknown(name, "is set as an array, an element or by appending"),
        }
    }

    /// Issue 41: what `declare x=...`, `local x=...`, `export x=...` set. An option that
    /// changes the value (`-i` evaluates it, `-l`/`-u` change its case, `-n` makes a
    /// reference) leaves it unknown.
    pub(super) fn note_declared(
        &mut self,
        assignment: &ast::Assignment,
        word: &Word,
        words: &[Word],
    ) {
        let name = assignment_name(assignment);
        let plain_options = words
            .get(1..)
            .unwrap_or_default()
            .iter()
            .filter(|w| w.text.starts_with(['-', '+']))
            .all(|w| w.text[1..].chars().all(|c| matches!(c, 'x' | 'r' | 'g')));
        let value = word.text.split_once('=').and_then(|(_, value)| {
            // The value is the word less `name=`, which a text piece holds.
            let mut pieces = word.pieces.clone();
            if let Some(word::Piece::Text(first)) = pieces.first_mut() {
                let (_, rest) = first.split_once('=')?;
                *first = rest.to_owned();
            } else if !word.pieces.is_empty() {
                return None;
            }
            Some(Word {
                text: value.to_owned(),
                dynamic: word.dynamic,
                pattern: false,
                pieces,
            })
        });
        match value {
            Some(value)
                if plain_options
                    && !assignment.append
                    && matches!(assignment.name, ast::AssignmentName::VariableName(_)) =>
            {
                self.sets.assign(name, value, self.repeats > 0)
            }
            _ => self.sets.unknown(
                name,
                "is declared with an option that changes its value, as an array or by appending",
            ),
        }
    }

    /// Issue 41: what a builtin sets by its arguments: `read`, `mapfile`, `getopts`,
    /// `printf -v` (values the judge does not follow), `set` (the positional parameters),
    /// `let` (numbers).
    pub(super) fn note_sets(&mut self, words: &[Word]) {
        let Some(name) = words.first().filter(|w| !w.dynamic) else {
            return;
        };
        let args = &words[1..];
        let operands = || args.iter().filter(|w| !w.text.starts_with('-'));
        match name.text.as_str() {
            // Every word that is no option may be a name it sets (option values too: a
            // superset).
            "read" | "mapfile" | "readarray" | "getopts" => {
                for word in operands() {
                    self.sets.unknown(&word.text, "is read from input");
                }
            }
            "printf" => {
                let Some(at) = args.iter().position(|w| w.text == "-v") else {
                    return;
                };
                let Some(target) = args.get(at + 1) else {
                    return;
                };
                let format = &args[at + 2..];
                match format {
                    // A format with nothing to convert is its own value.
                    [only] if !only.dynamic && !only.text.contains(['%', '\\']) => self
                        .sets
                        .assign(&target.text, only.clone(), self.repeats > 0),
                    _ => self.sets.unknown(&target.text, "is set by `printf -v`"),
                }
            }
            "set" if self.scope == 0 => {
                let mut rest = args.iter().peekable();
                while let Some(word) = rest.next_if(|w| w.text.starts_with(['-', '+'])) {
                    if word.text == "--" {
                        break;
                    }
                    if word.text == "-o" || word.text == "+o" {
                        rest.next();
                    }
                }
                let given: Vec<Word> = rest.cloned().collect();
                if !given.is_empty() || args.iter().any(|w| w.text == "--") {
                    self.sets.positional(&given);
                }
            }
            "let" => {
                for word in args {
                    for assigned in assigned_in_arithmetic(&word.text) {
                        self.sets.number(assigned);
                    }
                }
            }
            _ => {}
        }
    }
}
