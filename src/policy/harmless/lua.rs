//! The allowlists of lua for `harmless` (one language a file: the lists are long,
//! the rules that read them are one, in `mod.rs`).

use super::*;

pub(super) static LUA: Rules = Rules {
    lang: Lang::Lua,
    keywords: &[
        "local", "function", "end", "if", "then", "elseif", "else", "for", "in", "do", "while",
        "repeat", "until", "return", "break", "and", "or", "not", "nil", "true", "false",
    ],
    globals: &[
        "print", "tostring", "tonumber", "type", "pairs", "ipairs", "select", "error", "assert",
        "unpack", "_VERSION",
    ],
    modules: &[
        (
            "string",
            &[
                "format", "rep", "sub", "upper", "lower", "len", "gsub", "gmatch", "match", "find",
                "byte", "char", "reverse",
            ],
        ),
        (
            "table",
            &["insert", "concat", "remove", "sort", "unpack", "pack"],
        ),
        ("math", STAR),
        ("os", &["time", "clock", "date", "getenv", "difftime"]),
        ("io", &["write", "read", "stdout", "stderr"]),
        ("utf8", STAR),
    ],
    attrs: &[
        "format", "rep", "sub", "upper", "lower", "len", "gsub", "gmatch", "match", "find", "byte",
        "reverse", "write", "read",
    ],
    never: &[
        "load",
        "loadstring",
        "dofile",
        "loadfile",
        "require",
        "_G",
        "_ENV",
        "debug",
        "setfenv",
        "getfenv",
        "rawget",
        "rawset",
        "setmetatable",
        "getmetatable",
        "package",
        "collectgarbage",
        "coroutine",
        "pcall",
        "xpcall",
        "next",
    ],
};
