//! The docs hold to the program: the Lua API reference in docs/ is generated from the doc
//! comments in src/lua_api/ and names exactly what runbook's Lua VM defines (walked in
//! the VM itself, `runbook docs --globals`), and every Lua example in the docs passes
//! `runbook check`.
use crate::common::*;

use serde_json::Value;
use std::collections::BTreeSet;

#[test]
fn lua_api_reference_is_current() {
    let env = Env::new();
    let generated = Run::cmd(&env, ["docs", "--markdown"])
        .expect_exit(0)
        .run()
        .stdout_text();
    let checked_in = std::fs::read_to_string(repo().join("docs/lua-api.md")).unwrap();
    assert!(
        generated == checked_in,
        "docs/lua-api.md is stale: run `cargo run -- docs --markdown > docs/lua-api.md`"
    );
}

/// The names a `### `signature`` heading documents: each call at the top level of the
/// signature (`log.info(...), log.warn(...)` is two), as `NAME`, `TABLE.KEY` or
/// `t:METHOD`, and `runbook` for `runbook { … }`.
fn documented_names(signature: &str) -> Vec<String> {
    // Keep what is outside brackets and quotes, and each opening bracket there.
    let mut top = String::new();
    let (mut depth, mut quoted) = (0usize, false);
    for c in signature.chars() {
        match c {
            '"' => quoted = !quoted,
            _ if quoted => {}
            '(' | '{' | '[' => {
                if depth == 0 {
                    top.push(c);
                }
                depth += 1;
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => top.push(c),
            _ => {}
        }
    }
    let call = regex::Regex::new(r"([A-Za-z_]\w*(?:[.:][A-Za-z_]\w*)?)\s*[({]").unwrap();
    call.captures_iter(&top).map(|c| c[1].to_string()).collect()
}

/// Every name the VM defines beyond plain Lua (each global function, each key of each
/// table runbook adds, each method and field of a target handle) has its entry in the
/// reference, and every entry names something the VM defines.
#[test]
fn the_reference_documents_what_the_vm_defines_and_nothing_else() {
    let env = Env::new();
    let vm: Value = serde_json::from_str(
        &Run::cmd(&env, ["docs", "--globals"])
            .expect_exit(0)
            .run()
            .stdout_text(),
    )
    .expect("docs --globals prints JSON");
    let reference = std::fs::read_to_string(repo().join("docs/lua-api.md")).unwrap();
    let headings: Vec<&str> = reference
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .collect();
    let documented: BTreeSet<String> = headings.iter().flat_map(|h| documented_names(h)).collect();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let plain_lua = strings(&vm["lua"]);
    let globals = vm["globals"].as_object().unwrap();

    // What the VM defines, as the reference would name it.
    let mut defined = BTreeSet::new();
    for (name, ty) in globals {
        if plain_lua.contains(name) {
            continue;
        }
        match ty.as_str().unwrap() {
            "function" => {
                defined.insert(name.clone());
            }
            "table" => {
                for key in strings(&vm["tables"][name]) {
                    defined.insert(format!("{name}.{key}"));
                }
            }
            other => panic!("global {name} is a {other}: document it, then teach this test"),
        }
    }
    for method in strings(&vm["target"]["methods"]) {
        defined.insert(format!("t:{method}"));
    }
    assert!(defined.len() > 30, "the walk found too little: {defined:?}");
    let undocumented: Vec<&String> = defined.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "defined in the VM, without a `### ` entry in docs/lua-api.md: {undocumented:?}"
    );
    for field in strings(&vm["target"]["fields"]) {
        assert!(
            reference.contains(&format!("`t.{field}`")),
            "the target field {field} is not in docs/lua-api.md (as `t.{field}`)"
        );
    }

    // And the other way round: every entry names something that is there. Plain Lua's
    // own globals count too (`print` and `require` are runbook's own in this VM).
    for name in &documented {
        let there = match name.split_once([':', '.']) {
            Some(("t", method)) if name.contains(':') => {
                strings(&vm["target"]["methods"]).contains(&method.to_string())
            }
            Some((table, key)) => vm["tables"][table]
                .as_array()
                .is_some_and(|keys| keys.iter().any(|k| k == key)),
            None => globals.get(name).is_some_and(|t| t == "function"),
        };
        assert!(
            there,
            "docs/lua-api.md documents {name}, which the VM does not define"
        );
    }
}

#[test]
fn shipped_runbook_runs_by_name() {
    let env = Env::new();
    Run::new(&env, "env-report")
        .dry_run()
        .offline()
        .expect_exit(0)
        .run();
    Run::new(&env, "env-report").expect_exit(0).run();
}

#[test]
fn every_shipped_runbook_and_example_checks() {
    let env = Env::new();
    let mut files = Vec::new();
    for dir in ["runbooks", "examples", "examples/fleet", "examples/slurm"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "lua") {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    Run::cmd(&env, ["check"])
        .args(&files)
        .arg("--inventory")
        .arg(repo().join("examples/fleet/inventory.toml"))
        .expect_exit(0)
        .run();
}

/// What a Lua example without a `runbook {` header runs under: a header that declares
/// the params it reads (`params.NAME`, which `check` holds to the header), the handles
/// the reference's examples use (`here`, `node`, `box`), and its text as a step's body,
/// so that `check` compiles it and finds every unknown name in it.
fn prelude(example: &str) -> String {
    let mut names: Vec<&str> = regex::Regex::new(r"\bparams\.([A-Za-z_][A-Za-z0-9_]*)")
        .unwrap()
        .captures_iter(example)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    names.sort();
    names.dedup();
    let params: Vec<String> = names
        .iter()
        .map(|n| subst("@n@ = {}", &[("n", &n)]))
        .collect();
    subst(
        r#"runbook { name = "doc-example", params = { @params@ } }
local here, node = target("local"), target("root@node.example")
local box = node:pct(200)
step("example", function()
"#,
        &[("params", &params.join(", "))],
    )
}

/// A Lua example in a Markdown file: where it starts, and its text.
struct Example {
    at: String,
    text: String,
}

/// The ```lua blocks of `file`. A block after a line `<!-- continued -->` adds to the
/// block before it (a worked example built up piece by piece is one runbook); a block
/// after `<!-- fragment -->` is not a whole example and is left out, counted in `skipped`.
fn examples(file: &str, skipped: &mut Vec<String>) -> Vec<Example> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found: Vec<Example> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```lua" {
            i += 1;
            continue;
        }
        let at = format!("{file}:{}", i + 1);
        let marker = i
            .checked_sub(1)
            .map(|j| lines[j].trim())
            .unwrap_or_default();
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim_end() != "```")
            .copied()
            .collect();
        i += body.len() + 2;
        let body = body.join("\n") + "\n";
        match marker {
            "<!-- fragment -->" => skipped.push(at),
            "<!-- continued -->" => {
                let last = found
                    .last_mut()
                    .unwrap_or_else(|| panic!("{at}: continues no block"));
                last.text.push_str(&body);
            }
            _ => found.push(Example { at, text: body }),
        }
    }
    found
}

/// Every ```lua block in README.md and docs/*.md passes `runbook check`: as it is when
/// it has a header, else under its `prelude`. One `check` for all of them.
#[test]
fn every_lua_example_in_the_docs_checks() {
    let env = Env::new();
    let mut files = vec!["README.md".to_string()];
    for e in std::fs::read_dir(repo().join("docs")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files.sort();
    let header = regex::Regex::new(r"(?m)^\s*runbook\s*\{").unwrap();
    let mut skipped = Vec::new();
    let mut written = Vec::new();
    for file in &files {
        for ex in examples(file, &mut skipped) {
            let source = if header.is_match(&ex.text) {
                ex.text
            } else {
                format!("{}{}end)\n", prelude(&ex.text), ex.text)
            };
            let name = format!("examples/{}.lua", ex.at.replace(['/', ':', '.'], "_"));
            written.push((ex.at, env.write(&name, &source)));
        }
    }
    assert!(written.len() >= 30, "found only {} examples", written.len());
    eprintln!(
        "checked {} Lua examples in {} files; skipped {} fragment(s): {skipped:?}",
        written.len(),
        files.len(),
        skipped.len()
    );
    let out = Run::cmd(&env, ["check"])
        .args(written.iter().map(|(_, p)| p))
        .run();
    let stderr = out.stderr_str();
    let failed: Vec<String> = written
        .iter()
        .filter_map(|(at, p)| {
            let p = p.display().to_string();
            let said: Vec<&str> = stderr.lines().filter(|l| l.contains(&p)).collect();
            (!said.is_empty()).then(|| format!("{at}:\n  {}", said.join("\n  ")))
        })
        .collect();
    assert!(
        failed.is_empty() && out.success(),
        "examples that fail `runbook check` (the file: the docs' block, under the \
         prelude when it has no header):\n{}\n{}",
        failed.join("\n"),
        out.describe()
    );
}

/// The README's 30-second example does what the README's console lines say: the dry-run
/// passes, a plan is made and applied, and `run` shows its plan (refused without a
/// terminal) or runs with `--yes`. Its read runs in the dry-run too, where the files were
/// only planned, so a read that cannot cope with that would fail every one of these.
#[test]
fn the_readme_example_runs_as_the_readme_says() {
    let env = Env::new();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("```lua\n-- demo.lua\n")
        .expect("the demo block")
        + 7;
    let body = &readme[start..start + readme[start..].find("```").unwrap()];
    let demo = env.write("demo.lua", body);
    let dir = env.tmp.path().join("d");
    let dir = dir.to_str().unwrap();
    Run::new(&env, &demo)
        .set("dir", dir)
        .dry_run()
        .run()
        .assert_exit(0);
    let plan = env.tmp.path().join("demo.json");
    Run::cmd(&env, ["plan"])
        .arg(&demo)
        .args(["--set", &format!("dir={dir}"), "-o"])
        .arg(&plan)
        .run()
        .assert_exit(0);
    let asked = Run::new(&env, &demo).set("dir", dir).run();
    asked.assert_exit(2);
    assert!(
        asked.stderr_str().contains("mkdir -p"),
        "{}",
        asked.describe()
    );
    let applied = Run::cmd(&env, ["apply"]).arg(&plan).arg("--yes").run();
    applied.assert_exit(0);
    assert!(
        applied.stderr_str().contains("f3"),
        "{}",
        applied.describe()
    );
    Run::new(&env, &demo)
        .set("dir", dir)
        .yes()
        .run()
        .assert_exit(0);
}
