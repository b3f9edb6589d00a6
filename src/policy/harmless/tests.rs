use super::*;

fn ok(lang: Lang, code: &str) {
    assert_eq!(check(lang, code), Ok(()), "{code}");
}

fn no(lang: Lang, code: &str) {
    assert!(
        check(lang, code).is_err(),
        "shown harmless but is not: {code}"
    );
}

#[test]
fn p8_python_everyday_code_is_harmless() {
    ok(Lang::Python, "import platform; print(platform.system())");
    ok(Lang::Python, "import sys; print(sys.version)");
    ok(
        Lang::Python,
        r#"import json,sys; print(json.load(sys.stdin)["version"])"#,
    );
    ok(
        Lang::Python,
        "import os; print(os.path.join('a', 'b'), os.getcwd())",
    );
    ok(Lang::Python, "for i in range(3): print(i * 2)");
    ok(
        Lang::Python,
        "x = [a for a in range(5) if a % 2]; print(len(x))",
    );
    ok(Lang::Python, "print(f'{1+2} and {len(\"ab\")!r}')");
    ok(
        Lang::Python,
        "from pathlib import Path; print(Path('x').exists())",
    );
    ok(
        Lang::Python,
        "import sys\nfor line in sys.stdin:\n    print(line.strip().upper())",
    );
    ok(Lang::Python, "a, b = 1, 2; print(a + b)");
    ok(
        Lang::Python,
        "print(sorted(set('hello'), key=lambda c: -ord(c)))",
    );
}

#[test]
fn p8_python_that_starts_a_process_is_not_shown_harmless() {
    no(Lang::Python, "import os; os.system('rm c')");
    no(Lang::Python, "import os; getattr(os, 'sys'+'tem')('rm c')");
    no(Lang::Python, "breakpoint('r'+'m c')");
    no(Lang::Python, "__import__('os').system('rm c')");
    no(Lang::Python, "import subprocess");
    no(Lang::Python, "from os import system; system('rm c')");
    no(Lang::Python, "import os as o; o.system('rm c')");
    no(Lang::Python, "x = os; x.system('rm c')");
    no(Lang::Python, "def f(e=eval): e('1')");
    no(Lang::Python, "def f(eval=eval): eval('1')");
    no(
        Lang::Python,
        "print(f'{__import__(\"os\").system(\"rm c\")}')",
    );
    no(Lang::Python, "open('c', 'w').write('x')");
    no(Lang::Python, "import sys; sys.modules['os'].system('rm c')");
    no(
        Lang::Python,
        "print(().__class__.__bases__[0].__subclasses__())",
    );
    no(Lang::Python, "exec('import os')");
    no(
        Lang::Python,
        "import importlib; importlib.import_module('os')",
    );
    no(Lang::Python, "from pathlib import Path; Path('c').unlink()");
    no(Lang::Python, "import os; [os.system][0]('rm c')");
}

#[test]
fn p8_javascript_everyday_and_not() {
    ok(Lang::JavaScript, "console.log(process.version)");
    ok(Lang::JavaScript, "const n = 2; console.log(`n=${n}`)");
    ok(Lang::JavaScript, "require('./package.json').version");
    ok(
        Lang::JavaScript,
        "console.log(JSON.stringify({a: 1, b: [1, 2]}))",
    );
    ok(
        Lang::JavaScript,
        "console.log(Math.max(...[1, 2].map(x => x * 2)))",
    );
    ok(
        Lang::JavaScript,
        "console.log(require('os').platform(), process.env.HOME)",
    );
    no(
        Lang::JavaScript,
        "require('child_process').execSync('rm c')",
    );
    no(
        Lang::JavaScript,
        "require('chi'+'ld_process').execSync('rm c')",
    );
    no(Lang::JavaScript, "const m = 'child_process'; require(m)");
    no(
        Lang::JavaScript,
        "process.mainModule.require('child_process')",
    );
    no(Lang::JavaScript, "process['binding']('spawn_sync')");
    no(
        Lang::JavaScript,
        "[].constructor.constructor('return process')()",
    );
    no(
        Lang::JavaScript,
        "const k = 'constructor'; ({})[k][k]('x')()",
    );
    no(
        Lang::JavaScript,
        "console.log(`${require('child_process').execSync('rm c')}`)",
    );
    no(Lang::JavaScript, "eval('1')");
    no(Lang::JavaScript, "const f = Function; f('x')()");
    no(Lang::JavaScript, "require('fs').writeFileSync('c', '')");
    no(Lang::JavaScript, "import('child_process')");
    no(Lang::JavaScript, "globalThis.process");
    no(Lang::JavaScript, "(1 ? eval : 0)('x')");
}

#[test]
fn p8_perl_everyday_and_not() {
    ok(Lang::Perl, "print if /version/");
    ok(Lang::Perl, "s/foo/bar/g");
    ok(Lang::Perl, r#"print join(",", map { $_ * 2 } @ARGV), "\n""#);
    ok(
        Lang::Perl,
        r#"my %h = (a => 1); print "$h{a} $_\n" for keys %h"#,
    );
    ok(Lang::Perl, "use List::Util qw(sum); print sum(1, 2)");
    no(Lang::Perl, r#"system("rm c")"#);
    no(Lang::Perl, "`rm c`");
    no(Lang::Perl, "qx(rm c)");
    no(
        Lang::Perl,
        "use IPC::Open3; open3(my $i, my $o, undef, 'rm', 'c')",
    );
    no(Lang::Perl, r#"s/x/system("rm c")/e"#);
    no(Lang::Perl, r#"print "@{[ system 'rm c' ]}""#);
    no(Lang::Perl, r#"&{"sys"."tem"}("rm c")"#);
    no(Lang::Perl, r#"my $f = \&CORE::system; $f->("rm c")"#);
    no(Lang::Perl, r#"open(my $f, "|rm c")"#);
    no(Lang::Perl, r#"eval "system 'rm c'""#);
    no(Lang::Perl, "$h{q}; system('rm c'); $h{q}");
    no(Lang::Perl, r#"$x = 4 / 2; system("rm c"); $y = 1 / 2"#);
    no(Lang::Perl, r#"print "$x[system('rm c')]""#);
}

#[test]
fn p8_awk_everyday_and_not() {
    ok(Lang::Awk, r#"BEGIN{FS="|"} {print $2}"#);
    ok(Lang::Awk, "{print $1}");
    ok(Lang::Awk, "NR==2{print}");
    ok(Lang::Awk, "{s+=$2} END {print s}");
    ok(Lang::Awk, "/error/ {c++} END {print c}");
    ok(Lang::Awk, "!seen[$0]++");
    ok(Lang::Awk, "length > 100");
    ok(Lang::Awk, "$3 > 10 {print $1, ($2 > 1)}");
    ok(Lang::Awk, "/a|b/ || /c/ {n++}");
    ok(Lang::Awk, "function f(x) { return x * 2 } {print f($1)}");
    ok(
        Lang::Awk,
        "{a[$1]++} END {for (k in a) print k, a[k]; if (NR) print(NR)}",
    );
    no(Lang::Awk, r#"BEGIN{system("rm c")}"#);
    no(Lang::Awk, r#"BEGIN{print "x" | "rm c"}"#);
    no(
        Lang::Awk,
        r#"BEGIN{c="r" "m c"; s="sh"; x = 4/2; print c | s; y = 1/2}"#,
    );
    no(Lang::Awk, r#"BEGIN{"date" | getline d}"#);
    no(Lang::Awk, r#"{print > "out"}"#);
    no(Lang::Awk, r#"BEGIN{f="system"; @f("rm c")}"#);
}

#[test]
fn p8_ruby_php_lua_everyday_and_not() {
    ok(Lang::Ruby, r##"puts "v=#{RUBY_VERSION}""##);
    ok(Lang::Ruby, "puts [1, 2].map { |x| x * 2 }.sum");
    no(Lang::Ruby, r#"system("rm c")"#);
    no(Lang::Ruby, "%x(rm c)");
    no(Lang::Ruby, "Kernel.send(:system, 'rm c')");
    no(Lang::Ruby, r##"puts "#{`rm c`}""##);
    no(Lang::Ruby, "[1].each(&method(:system))");
    ok(Lang::Php, "echo PHP_VERSION, PHP_EOL;");
    ok(Lang::Php, r#"echo json_encode(['a' => 1]);"#);
    no(Lang::Php, r#"system("rm c");"#);
    no(Lang::Php, r#"$f = 'sys'.'tem'; $f('rm c');"#);
    no(Lang::Php, r#"['system'][0]('rm c');"#);
    no(Lang::Php, r#"array_map('system', ['rm c']);"#);
    no(Lang::Php, r#"echo "{${system('rm c')}}";"#);
    ok(Lang::Lua, "print(string.format('%d', 1 + 2))");
    ok(
        Lang::Lua,
        "local t = {1, 2}; for i, v in ipairs(t) do print(i, v) end",
    );
    no(Lang::Lua, r#"os.execute("rm c")"#);
    no(Lang::Lua, r#"os["exe".."cute"]("rm c")"#);
    no(Lang::Lua, r#"local o = os; o.execute("rm c")"#);
    no(Lang::Lua, r#"load("os.execute('rm c')")()"#);
    no(Lang::Lua, r#"io.popen("rm c")"#);
}

/// P8 (issue 41): a `coding` declaration naming an encoding in which python reads other text
/// than the judge (`utf-7` turns `#+AAo-` in a comment into a new line) is not shown
/// harmless; UTF-8 and Latin-1 declarations change nothing. (Seen first: `python3 x.py`
/// of such a file deleted a canary, and the judge allowed it in a here-document.)
#[test]
fn p8_a_python_coding_declaration_the_judge_does_not_read_is_not_shown_harmless() {
    let hidden = "# coding: utf-7\nx = 1 #+AAo-__import__(+ACI-os+ACI-).system(+ACI-rm c+ACI-)\n";
    assert!(check(Lang::Python, hidden).is_err());
    assert!(
        check(
            Lang::Python,
            "#!/usr/bin/env python3\n# -*- coding: UTF7 -*-\nx = 1\n"
        )
        .is_err()
    );
    assert!(check(Lang::Python, "x = 1\n# vim: set fileencoding=cp1252 :\n").is_err());
    for same in [
        "# -*- coding: utf-8 -*-",
        "# coding=latin-1",
        "# coding: ascii",
    ] {
        assert!(
            check(Lang::Python, &format!("{same}\nprint(1)\n")).is_ok(),
            "{same}"
        );
    }
    // Only the first two lines declare it.
    assert!(check(Lang::Python, "print(1)\nprint(2)\n# coding: utf-7\n").is_ok());
}
