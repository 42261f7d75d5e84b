//! `file.template`: a Jinja2 template (the syntax Ansible users write) rendered here,
//! before anything reaches the target, by minijinja.
//!
//! A template sees the `vars` it is given and nothing else: one template, no loader
//! (minijinja is built without `multi_template`, so `{% include %}`, `{% extends %}` and
//! `{% import %}` do not exist), no function that reads a file or the environment (none
//! of minijinja's builtins does, and none is added). A name it uses that `vars` does not
//! hold is an error naming the template's file and line (strict undefined, as Jinja2's
//! `StrictUndefined`). Whitespace is Ansible's template module's: `trim_blocks` on (the
//! newline after a block tag is dropped), `lstrip_blocks` off, the trailing newline
//! kept. No auto-escaping: these are configuration files, not HTML.

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value};

/// How much work one render may do (minijinja's fuel: about one unit per instruction):
/// far above any configuration file, and a bound on `{% for i in range(99999) %}{% for j
/// in range(99999) %}`, which would otherwise run until the step's deadline.
const FUEL: u64 = 50_000_000;

/// Renders `source`, named `name` in errors (the template's path as the runbook gave
/// it), with `vars`. The error is `NAME:LINE: what`, and for an undefined name, which
/// names `vars` lacks.
pub fn render(name: &str, source: &str, vars: Value) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(FUEL));
    // minijinja's own, not Jinja2's: it prints every var, and as a global it makes
    // `{% if debug is defined %}` true in a template given no `debug`.
    env.remove_global("debug");
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .keep_trailing_newline(true)
        .build()
        .map_err(|e| e.to_string())?;
    env.set_syntax(syntax);
    let template = env
        .template_from_named_str(name, source)
        .map_err(|e| located(name, &e, None))?;
    template.render(&vars).map_err(|e| {
        let missing = (e.kind() == ErrorKind::UndefinedError)
            .then(|| missing(&template, &env, &vars, source, e.line()));
        located(name, &e, missing.as_deref())
    })
}

/// The names (`port`, `server.name`) the template uses that `vars` lacks, those on the
/// failing line first where any is (minijinja tells the line, not the name).
fn missing(
    template: &minijinja::Template<'_, '_>,
    env: &Environment<'_>,
    vars: &Value,
    source: &str,
    line: Option<usize>,
) -> Vec<String> {
    let lacks = |dotted: &str| {
        let mut v = vars.clone();
        for part in dotted.split('.') {
            match v.get_attr(part) {
                Ok(next) if !next.is_undefined() => v = next,
                _ => return true,
            }
        }
        false
    };
    let mut names: Vec<String> = template
        .undeclared_variables(true)
        .into_iter()
        .filter(|n| env.globals().all(|(g, _)| Some(g) != n.split('.').next()))
        .filter(|n| lacks(n))
        .collect();
    names.sort();
    let text = line.and_then(|l| source.lines().nth(l.saturating_sub(1)));
    let on_line: Vec<String> = names
        .iter()
        .filter(|n| text.is_some_and(|t| t.contains(n.as_str())))
        .cloned()
        .collect();
    match on_line.is_empty() {
        true => names,
        false => on_line,
    }
}

/// `NAME:LINE: what went wrong`; for an undefined value, the names the template uses
/// that `vars` does not hold.
fn located(name: &str, e: &minijinja::Error, missing: Option<&[String]>) -> String {
    let at = match e.line() {
        Some(line) => format!("{}:{line}", e.name().unwrap_or(name)),
        None => e.name().unwrap_or(name).to_string(),
    };
    let mut what = e.kind().to_string();
    if let Some(detail) = e.detail() {
        what = format!("{what}: {detail}");
    }
    match missing {
        Some([one]) => format!("{at}: {what}: '{one}' is not in vars"),
        Some(many) if !many.is_empty() => {
            let list: Vec<String> = many.iter().map(|n| format!("'{n}'")).collect();
            format!("{at}: {what}: not in vars: {}", list.join(", "))
        }
        _ => format!("{at}: {what}"),
    }
}
