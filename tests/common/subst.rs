//! [`subst`]: a test's inline runbook is a raw string whose Lua reads exactly as a user
//! would write it (no `format!` with every Lua brace doubled), and the values the test
//! puts in it (paths, ports, names) go at `@name@` placeholders (issue 27, item 5).
//!
//! ```ignore
//! let rb = env.write(
//!     "spawn.lua",
//!     &subst(
//!         r#"runbook { name = "spawn" }
//! step("start", function()
//!   proc.spawn(target("local"), { name = "ticker", log = "@log@", cmd = { "sleep", "30" } })
//! end)
//! "#,
//!         &[("log", &log.display())],
//!     ),
//! );
//! ```
//!
//! `@name@` cannot clash with Lua (which has no `@`) nor with the shell inside Lua strings
//! (`${VAR}`, `$@`, `{}`); an `@` not followed by a name and an `@` (`root@node1`) is text.

use regex::Regex;
use std::fmt::Display;
use std::sync::LazyLock;

static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"@([A-Za-z_][A-Za-z0-9_]*)@").unwrap());

/// `template` with every `@name@` replaced by the value given for `name` (its `Display`).
/// The values are put in as they are: nothing in them is read as a placeholder.
///
/// Panics when a placeholder has no value, when a value is never used, or when a name is
/// given twice, so that a typo fails the test instead of running a runbook that still
/// says `@log@`.
pub fn subst(template: &str, values: &[(&str, &dyn Display)]) -> String {
    for (i, (name, _)) in values.iter().enumerate() {
        assert!(
            !values[..i].iter().any(|(n, _)| n == name),
            "subst: a value for @{name}@ is given twice"
        );
    }
    let mut used = vec![false; values.len()];
    let mut missing = Vec::new();
    let text = PLACEHOLDER.replace_all(template, |c: &regex::Captures| {
        match values.iter().position(|(n, _)| *n == &c[1]) {
            Some(i) => {
                used[i] = true;
                values[i].1.to_string()
            }
            None => {
                missing.push(c[0].to_string());
                c[0].to_string()
            }
        }
    });
    assert!(
        missing.is_empty(),
        "subst: no value for {} in:\n{template}",
        missing.join(", ")
    );
    let unused: Vec<String> = (values.iter().zip(&used))
        .filter(|(_, used)| !**used)
        .map(|((name, _), _)| format!("@{name}@"))
        .collect();
    assert!(
        unused.is_empty(),
        "subst: {} never occurs in:\n{template}",
        unused.join(", ")
    );
    text.into_owned()
}

#[test]
fn subst_puts_each_value_at_its_placeholders_and_leaves_the_rest_alone() {
    let text = subst(
        r#"runbook { name = "@name@" }
local box = target("root@127.0.0.1:@port@")
step("s", function() box:shell('echo "$@" ${HOME} {} @port@', { cwd = "@dir@" }) end)
"#,
        &[("name", &"x"), ("port", &2222), ("dir", &"/tmp/@name@")],
    );
    assert_eq!(
        text,
        r#"runbook { name = "x" }
local box = target("root@127.0.0.1:2222")
step("s", function() box:shell('echo "$@" ${HOME} {} 2222', { cwd = "/tmp/@name@" }) end)
"#
    );
}

#[test]
#[should_panic(expected = "subst: no value for @lg@")]
fn subst_refuses_a_placeholder_without_a_value() {
    subst(
        r#"proc.wait_for(here, { file = "@lg@" })"#,
        &[("log", &"/x")],
    );
}

#[test]
#[should_panic(expected = "subst: @log@ never occurs")]
fn subst_refuses_a_value_that_is_never_used() {
    subst(r#"proc.wait_for(here, { file = "/x" })"#, &[("log", &"/x")]);
}

#[test]
#[should_panic(expected = "subst: a value for @log@ is given twice")]
fn subst_refuses_a_name_given_twice() {
    subst("@log@", &[("log", &"/x"), ("log", &"/y")]);
}
