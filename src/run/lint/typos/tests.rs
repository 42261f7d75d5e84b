use super::*;

fn known() -> Known {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let mut k = Known::default();
    k.tables
        .insert("cache".into(), set(&["clear", "restore", "size"]));
    k.tables.insert("string".into(), set(&["format", "rep"]));
    k.modules
        .insert("runbook.text".into(), set(&["lines", "trim"]));
    k.target_methods = set(&["exec", "shell", "pct", "docker"]);
    k.target_fields = set(&["name"]);
    k.target_derivers = set(&["pct", "docker"]);
    k.target_makers = set(&["target", "ssh"]);
    k.target_lists = set(&["targets"]);
    k
}

fn typos(src: &str) -> Vec<(usize, String, Option<String>)> {
    find(src, &known())
        .unwrap_or_else(|e| panic!("{e}\n{src}"))
        .into_iter()
        .map(|t| (t.line, t.written, t.suggestion))
        .collect()
}

fn typo(line: usize, w: &str, s: Option<&str>) -> (usize, String, Option<String>) {
    (line, w.into(), s.map(str::to_string))
}

#[test]
fn options_tables_come_from_the_blocks_and_are_checked() {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // build.rs tables each options struct a `/// Lua:` block lists, by callee.
    let mut table = Known::default();
    table.read_table();
    assert_eq!(
        table.options["cache.clear"],
        vec![(2, set(&["keep", "keep_last", "force"]))]
    );
    assert_eq!(table.options[":exec"][0].0, 1);
    assert!(table.options[":exec"][0].1.contains("timeout"));
    assert!(
        !table.options.contains_key("log.info"),
        "takes no options table"
    );
    let mut k = known();
    let keys = set(&["force", "keep"]);
    k.options
        .insert("cache.clear".into(), vec![(2, keys.clone())]);
    k.options.insert(":exec".into(), vec![(1, keys)]);
    let found = |src: &str| -> Vec<(usize, String, Option<String>)> {
        find(src, &k)
            .unwrap()
            .into_iter()
            .map(|t| (t.line, t.written, t.suggestion))
            .collect()
    };
    assert_eq!(
        found("local h = target('local')\ncache.clear(h, '/x', { kep = true })\nh:exec({ 'true' }, { ['forse'] = true })"),
        vec![
            typo(2, "kep", Some("keep")),
            typo(3, "forse", Some("force")),
        ]
    );
    // A table built elsewhere, a local that shadows the API, a correct key: nothing.
    assert!(found("local o = { kep = 1 }\ncache.clear(h, '/x', o)\nlocal cache = {}\ncache.clear(h, '/x', { kep = 1 })\nlocal h = target('local')\nh:exec({}, { keep = true })").is_empty());
}

#[test]
fn api_table_function() {
    assert_eq!(
        typos("step('s', function()\n  cache.clera(box, '/tmp/x')\nend)"),
        vec![typo(2, "cache.clera", Some("cache.clear"))]
    );
    assert_eq!(
        typos("local s = string.fromat('%d', 1)"),
        vec![typo(1, "string.fromat", Some("string.format"))]
    );
    assert_eq!(typos("cache.clear(); string.rep('x', 2)"), vec![]);
}

#[test]
fn target_methods_and_fields() {
    let src = r#"local here = target("local")
local box = params.ct and here:pct(params.ct) or here
step("s", function()
  here:exce({ "true" })
  box:shel("true")
  log.info(box.nmae, here.exec, here.name)
  ssh("h.example"):docker("c"):exec({ "x" })
  target("x"):pct(1):exex({})
end)
"#;
    assert_eq!(
        typos(src),
        vec![
            typo(4, "here:exce", Some("here:exec")),
            typo(5, "box:shel", Some("box:shell")),
            typo(6, "box.nmae", Some("box.name")),
            typo(8, "target(…):pct(…):exex", Some("target(…):pct(…):exec")),
        ]
    );
}

#[test]
fn handles_from_target_lists() {
    let src = r#"for _, t in ipairs(targets("gpu")) do t:exce({}) end
parallel(targets("gpu"), function(t) t:shel("x") end)
parallel({ 1, 2 }, function(t) t:whatever() end)
"#;
    assert_eq!(
        typos(src),
        vec![
            typo(1, "t:exce", Some("t:exec")),
            typo(2, "t:shel", Some("t:shell"))
        ]
    );
}

#[test]
fn stdlib_modules() {
    let src = r#"local text = require("runbook.text")
local other = require("helpers")
function text.pad() end
text.extra = 1
print(text.lines, text.pad, text.extra, text.trmi, other.anything)
"#;
    assert_eq!(typos(src), vec![typo(5, "text.trmi", Some("text.trim"))]);
}

#[test]
fn shadowing_and_user_tables_are_left_alone() {
    let src = r#"local cache = { mine = 1 }
print(cache.mine, cache.clera)
local function f(target) return target("x"):anything() end
local string = require("helpers")
string.whatever()
do local here = 1 end
local t = target("x")
t = { exce = function() end }
t:exce()
step("s", function(ctx, here) here:anything(); ctx.whatever() end)
"#;
    assert_eq!(typos(src), vec![]);
}

#[test]
fn shadowing_ends_with_its_scope() {
    let src = "do local cache = {} print(cache.x) end\ncache.clera()";
    assert_eq!(
        typos(src),
        vec![typo(2, "cache.clera", Some("cache.clear"))]
    );
}

#[test]
fn what_the_file_assigns_it_knows() {
    // A global the file assigns is its own; keys it stores into an API table are keys.
    let src = r#"step("s", function() cache.mine(); helper.x() end)
function cache.mine() end
cache["other"] = 1
print(cache.other)
ssh = function() return {} end
ssh("x"):exce()
"#;
    assert_eq!(typos(src), vec![]);
}

#[test]
fn reassigned_later_is_unknown_before_too() {
    let src = "local t = target('x')\nstep('s', function() t:exce() end)\nt = nil";
    assert_eq!(typos(src), vec![]);
}

#[test]
fn far_away_names_get_no_suggestion() {
    assert_eq!(typos("cache.zzzzzz()"), vec![typo(1, "cache.zzzzzz", None)]);
}

#[test]
fn method_self_is_a_local() {
    let src = "local M = {}\nfunction M:f() return self.anything end\nreturn M";
    assert_eq!(typos(src), vec![]);
}

#[test]
fn target_api_from_the_reference() {
    let mut k = Known::default();
    k.read_table();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // What the doc comments say is what `target.rs` registers, methods and fields.
    let (methods, fields) = crate::lua_api::target::handle_api();
    assert!(
        methods.contains("exec") && fields.contains("name"),
        "{methods:?}"
    );
    assert_eq!(set(crate::base::embedded::api::TARGET_METHODS), methods);
    assert_eq!(set(crate::base::embedded::api::TARGET_FIELDS), fields);
    assert_eq!(k.target_makers, set(&["slurm", "ssh", "target"]));
    assert_eq!(k.target_lists, set(&["targets"]));
    assert!(k.target_derivers.contains("pct") && !k.target_derivers.contains("exec"));
}

/// Every shipped runbook, example and stdlib module parses and has nothing to report,
/// against what the real sandbox defines.
#[test]
fn shipped_files_are_clean() {
    use crate::actions::ctx::{Ctx, Mode};
    use std::rc::Rc;
    let ctx = Rc::new(Ctx::new(
        Mode::Inspect,
        "<typos>".into(),
        None,
        Vec::new(),
        Rc::new(crate::base::cancel::Cancel::default()),
        Default::default(),
        None,
    ));
    let fresh = crate::run::sandbox::new_vm(ctx.clone()).unwrap();
    let live = crate::run::sandbox::new_vm(ctx).unwrap();
    let api_tables = api_tables(&fresh);
    let known = Known::read(&api_tables, &live, "require('runbook.text')");
    assert!(known.tables["cache"].contains("clear"), "{known:?}");
    assert!(known.modules["runbook.text"].contains("lines"), "{known:?}");
    // Only the modules the file names are loaded.
    assert!(!known.modules.contains_key("runbook.torch"), "{known:?}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![
        root.join("runbooks"),
        root.join("examples"),
        root.join("stdlib"),
    ];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "lua") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let known = Known::read(&api_tables, &live, &text);
        let found = find(&text, &known).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(found, vec![], "{}", f.display());
    }
}

#[test]
fn unparsable_source_is_an_error_with_its_line() {
    let e = find("local a = 1\nlocal = 2\n", &known()).unwrap_err();
    assert!(e.starts_with("line 2"), "{e}");
}

/// What Lua 5.4 takes that full_moon, the parser the check used before, did not (it
/// then reported nothing for the whole file): a `break` before the end of its block.
#[test]
fn a_break_before_the_end_of_a_block_is_read() {
    let src = "local here = target('x')\nwhile true do break; here:exce() end";
    assert_eq!(typos(src), vec![typo(2, "here:exce", Some("here:exec"))]);
}

/// Lines as Lua has them after escaped line breaks (`\z` skips any number: full_moon took
/// one), long strings and long comments.
#[test]
fn lines_after_escaped_line_breaks_and_long_brackets() {
    let src = "local s = 'a\\z\n\n  b' .. \"c\\\nd\" .. [==[\n]]\n]==]\n--[[\n]]\ncache.clera()";
    assert_eq!(
        typos(src),
        vec![typo(9, "cache.clera", Some("cache.clear"))]
    );
}
