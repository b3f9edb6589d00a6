//! `${...}` expansions: the words and arithmetic inside them, and what each reads
//! (issue 41: a default or alternative word, a part of a value, a value the judge does not
//! follow).

use super::super::ParseError;
use super::Walker;
use crate::policy::word::{Expansion, Word};
use brush_parser::word::{Parameter, ParameterExpr};

impl Walker {
    /// What reading `parameter` as it is gives.
    fn parameter_expansion(&self, parameter: &Parameter) -> Expansion {
        use brush_parser::word::SpecialParameter as S;
        let nested = self.scope > 0;
        match parameter {
            Parameter::Named(name) => Expansion::Variable(name.clone()),
            // An element of an array: the array's values are not followed.
            Parameter::NamedWithIndex { name, .. }
            | Parameter::NamedWithAllIndices { name, .. } => {
                Expansion::Computed(Box::new(Expansion::Variable(name.clone())))
            }
            // `$0` is the shell's name at the top of the line, a call's choice below it.
            Parameter::Positional(0) if !nested => Expansion::Fixed,
            Parameter::Positional(at) => Expansion::Positional {
                at: Some(*at),
                nested,
            },
            Parameter::Special(S::AllPositionalParameters { .. }) => {
                Expansion::Positional { at: None, nested }
            }
            Parameter::Special(_) => Expansion::Fixed,
        }
    }

    /// `${...}`: its operands are words of their own (`${x:-$(cmd)}`), and some forms
    /// evaluate arithmetic (`${a[i]}`, `${x:i:n}`) or a name taken from a value (`${!x}`).
    /// Returns what it reads, for the values of the line (issue 41).
    pub(super) fn parameter(
        &mut self,
        expr: &ParameterExpr,
        source: &str,
    ) -> Result<Expansion, ParseError> {
        use ParameterExpr as P;
        // What it reads: the parameter's value as it is, its value or a word, a word or
        // nothing, or a value computed from it (any part of it: unknown).
        enum Reads {
            Value,
            Or(Word),
            IfSet(Word),
            Part,
            Computed,
        }
        let (parameter, indirect, reads) = match expr {
            P::Parameter {
                parameter,
                indirect,
            } => (parameter, *indirect, Reads::Value),
            P::ParameterLength { .. } => return Ok(Expansion::Fixed),
            P::Transform {
                parameter,
                indirect,
                ..
            } => (parameter, *indirect, Reads::Part),
            P::UseDefaultValues {
                parameter,
                indirect,
                default_value: text,
                ..
            }
            | P::AssignDefaultValues {
                parameter,
                indirect,
                default_value: text,
                ..
            } => {
                let word = self.word_text(text.as_deref().unwrap_or_default())?;
                if let (P::AssignDefaultValues { .. }, Parameter::Named(name)) = (expr, parameter) {
                    self.sets.assign(name, word.clone(), self.repeats > 0);
                }
                (parameter, *indirect, Reads::Or(word))
            }
            P::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                error_message: text,
                ..
            } => {
                if let Some(text) = text {
                    self.word_text(text)?;
                }
                (parameter, *indirect, Reads::Value)
            }
            P::UseAlternativeValue {
                parameter,
                indirect,
                alternative_value: text,
                ..
            } => {
                let word = self.word_text(text.as_deref().unwrap_or_default())?;
                (parameter, *indirect, Reads::IfSet(word))
            }
            P::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::UppercaseFirstChar {
                parameter,
                indirect,
                pattern: text,
            }
            | P::UppercasePattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::LowercaseFirstChar {
                parameter,
                indirect,
                pattern: text,
            }
            | P::LowercasePattern {
                parameter,
                indirect,
                pattern: text,
            } => {
                if let Some(text) = text {
                    self.word_text(text)?;
                }
                (parameter, *indirect, Reads::Part)
            }
            P::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                self.arithmetic(&offset.value, source)?;
                if let Some(length) = length {
                    self.arithmetic(&length.value, source)?;
                }
                (parameter, *indirect, Reads::Part)
            }
            P::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                ..
            } => {
                self.word_text(pattern)?;
                if let Some(replacement) = replacement {
                    self.word_text(replacement)?;
                }
                (parameter, *indirect, Reads::Computed)
            }
            P::VariableNames { .. } | P::MemberKeys { .. } => return Ok(Expansion::Names),
        };
        if indirect {
            self.arithmetic_hazard(source);
        }
        if let Parameter::NamedWithIndex { index, .. } = parameter
            && index != "@"
            && index != "*"
        {
            self.arithmetic(index, source)?;
        }
        let base = self.parameter_expansion(parameter);
        Ok(match reads {
            _ if indirect => Expansion::Computed(Box::new(base)),
            Reads::Value => base,
            Reads::Or(word) => Expansion::Or(Box::new(base), Box::new(word)),
            Reads::IfSet(word) => Expansion::IfSet(Box::new(word)),
            Reads::Part => Expansion::Part(Box::new(base)),
            Reads::Computed => Expansion::Computed(Box::new(base)),
        })
    }
}
