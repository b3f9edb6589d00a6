//! The allowlists of awk for `harmless` (one language a file: the lists are long,
//! the rules that read them are one, in `mod.rs`).

use super::*;

pub(super) static AWK: Rules = Rules {
    lang: Lang::Awk,
    keywords: &[
        "if", "else", "while", "for", "do", "in", "return", "delete", "print", "printf", "next",
        "nextfile", "exit", "function", "func", "getline", "BEGIN", "END", "break", "continue",
    ],
    // Builtin functions an awk program may call; any other name is a variable unless
    // called (then it must be a function the program defines).
    globals: &[
        "length", "substr", "index", "split", "sub", "gsub", "gensub", "match", "sprintf",
        "tolower", "toupper", "int", "sqrt", "exp", "log", "sin", "cos", "atan2", "rand", "srand",
        "systime", "strftime", "mktime", "asort", "asorti", "and", "or", "xor", "lshift", "rshift",
        "compl", "isarray", "typeof", "strtonum", "patsplit",
    ],
    modules: &[],
    attrs: &[],
    never: &["system", "close", "fflush"],
};
