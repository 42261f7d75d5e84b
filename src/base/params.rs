//! Runbook parameters: declared in the `runbook{}` header, given with `--set KEY=VALUE`
//! (or `RUNBOOK_PARAM_<KEY>` in the environment, handy for secrets, or a `--params FILE`
//! of TOML), converted to their declared type and validated before anything runs.

use crate::base::suggest;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The `RUNBOOK_PARAM_*` variables runbook was started with. They are the way to give a
/// secret, so `take_from_environment` takes them out of runbook's own environment, and
/// no process it starts inherits them: a local `sh`, `srun` (which passes its whole
/// environment on to the tasks), an ssh whose config has `SendEnv`.
static GIVEN: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Called first in `main`, while runbook has one thread (changing the environment is
/// only safe then).
pub fn take_from_environment() {
    let mut given = BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        let Some(name) = k.to_str().filter(|k| k.starts_with("RUNBOOK_PARAM_")) else {
            continue;
        };
        // A value that is not UTF-8 counts as not given, as `std::env::var` would have it.
        if let Ok(v) = v.into_string() {
            given.insert(name.to_string(), v);
        }
        std::env::remove_var(&k);
    }
    let _ = GIVEN.set(given);
}

/// The value of `RUNBOOK_PARAM_…` `var` runbook was started with.
pub fn given(var: &str) -> Option<String> {
    match GIVEN.get() {
        Some(given) => given.get(var).cloned(),
        // Not taken (unit tests): the environment is where it is.
        None => std::env::var(var).ok(),
    }
}

/// `--params FILE`: top-level `KEY = VALUE` lines of TOML, each value a string, number or
/// boolean. `--set` and `RUNBOOK_PARAM_*` win over it. A secret param may come from it
/// only when the file is readable by its owner alone (0600, as ssh asks of a key).
#[derive(Debug, Clone)]
pub struct ParamsFile {
    pub path: std::path::PathBuf,
    /// No group or other permission bits.
    pub private: bool,
    /// Key, value as `--set` text, line.
    pub values: Vec<(String, String, usize)>,
}

/// The `--params` file of this process (set once by the command, like [`GIVEN`]).
static FILE: OnceLock<ParamsFile> = OnceLock::new();

/// Makes `file` the one `resolve` reads (the command line's `--params`).
pub fn use_file(file: ParamsFile) {
    let _ = FILE.set(file);
}

pub fn file() -> Option<&'static ParamsFile> {
    FILE.get()
}

/// The line of byte `at` in `text`, from 1.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Reads a `--params` file; every error names `FILE:LINE`.
pub fn read_file(path: &std::path::Path) -> Result<ParamsFile, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--params {shown}: {e}"))?;
    let mode = std::fs::metadata(path)
        .map_err(|e| format!("--params {shown}: {e}"))?
        .permissions()
        .mode();
    let table: BTreeMap<String, toml::Spanned<toml::Value>> =
        toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(&text, s.start));
            format!("{shown}:{line}: not TOML: {}", e.message())
        })?;
    let mut values = Vec::new();
    let mut problems = Vec::new();
    for (key, v) in table {
        let line = line_of(&text, v.span().start);
        let text = match v.get_ref() {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                let kind = other.type_str();
                let a = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                problems.push(format!(
                    "{shown}:{line}: {key}: {a} {kind}; a param is a string, number or boolean (KEY = VALUE at the top level)"
                ));
                continue;
            }
        };
        values.push((key, text, line));
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    values.sort_by_key(|(_, _, line)| *line);
    Ok(ParamsFile {
        path: path.to_path_buf(),
        private: mode & 0o077 == 0,
        values,
    })
}

/// What a runbook's `runbook{}` header declares, with the params' values as resolved
/// (here, below the run's context, so a plan can compare them without it).
#[derive(Debug, Clone)]
pub struct Header {
    pub name: String,
    pub description: Option<String>,
    pub params: Vec<ParamSpec>,
    pub values: BTreeMap<String, Option<ParamValue>>,
    /// Extra directories (absolute, or `~/…` on the target) under which `cache.clear` may
    /// delete, beside the built-in cache roots.
    pub cache_roots: Vec<String>,
    /// What its run locks on each target it changes (`lock`, `locks`): see `locks.rs`.
    pub lock: LockScope,
}

/// What a run locks on a target before its first change there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockScope {
    /// `lock = "machine"`: no other run changes the machine while this one does.
    pub machine: bool,
    /// `locks = { "gpu-env" }`: named locks several runbooks share (sorted, no repeats).
    pub named: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Path,
}

impl ParamType {
    pub const NAMES: [&'static str; 5] = ["string", "integer", "number", "boolean", "path"];

    pub fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "string" => ParamType::String,
            "integer" => ParamType::Integer,
            "number" => ParamType::Number,
            "boolean" => ParamType::Boolean,
            "path" => ParamType::Path,
            other => {
                return Err(format!(
                    "unknown type '{other}'{}; the types are {}",
                    suggest::hint(other, Self::NAMES),
                    Self::NAMES.join(", ")
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Path => "path",
        }
    }
}

/// A typed parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Str(String),
    Int(i64),
    Num(f64),
    Bool(bool),
}

impl ParamValue {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ParamValue::Str(s) => serde_json::Value::String(s.clone()),
            ParamValue::Int(i) => serde_json::Value::from(*i),
            ParamValue::Num(n) => serde_json::Value::from(*n),
            ParamValue::Bool(b) => serde_json::Value::Bool(*b),
        }
    }

    pub fn display(&self) -> String {
        match self {
            ParamValue::Str(s) => s.clone(),
            ParamValue::Int(i) => i.to_string(),
            ParamValue::Num(n) => n.to_string(),
            ParamValue::Bool(b) => b.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ParamSpec {
    pub name: String,
    pub ty: ParamType,
    pub default: Option<ParamValue>,
    pub required: bool,
    pub help: Option<String>,
    pub secret: bool,
    pub choices: Vec<ParamValue>,
}

/// Converts the text of `--set` into a value of the declared type.
pub fn convert(ty: ParamType, text: &str) -> Result<ParamValue, String> {
    match ty {
        ParamType::String => Ok(ParamValue::Str(text.to_string())),
        ParamType::Path => {
            if text.is_empty() {
                Err("expected a path, got an empty string".into())
            } else if text.contains('\0') {
                Err("a path cannot contain a NUL byte".into())
            } else {
                Ok(ParamValue::Str(text.to_string()))
            }
        }
        ParamType::Integer => text
            .trim()
            .parse::<i64>()
            .map(ParamValue::Int)
            .map_err(|_| format!("expected an integer, got '{text}'")),
        ParamType::Number => match text.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(ParamValue::Num(n)),
            _ => Err(format!("expected a number, got '{text}'")),
        },
        ParamType::Boolean => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => Ok(ParamValue::Bool(true)),
            "false" | "no" | "0" | "off" => Ok(ParamValue::Bool(false)),
            _ => Err(format!("expected true or false, got '{text}'")),
        },
    }
}

impl ParamSpec {
    /// A secret's value must not reach the terminal, even inside an error about it.
    fn redact(&self, message: String, value: &str) -> String {
        if self.secret && !value.is_empty() {
            message.replace(value, crate::base::secrets::MASK)
        } else {
            message
        }
    }

    fn check_choice(&self, value: &ParamValue) -> Result<(), String> {
        if self.choices.is_empty() || self.choices.contains(value) {
            return Ok(());
        }
        let list: Vec<String> = self.choices.iter().map(|c| c.display()).collect();
        Err(format!(
            "'{}' is not one of the choices: {}",
            value.display(),
            list.join(", ")
        ))
    }

    /// A stand-in used by `check`/`show` for a required param nobody set: lets the header
    /// be validated without real values.
    fn placeholder(&self) -> ParamValue {
        if let Some(first) = self.choices.first() {
            return first.clone();
        }
        match self.ty {
            ParamType::String | ParamType::Path => ParamValue::Str(format!("<{}>", self.name)),
            ParamType::Integer => ParamValue::Int(0),
            ParamType::Number => ParamValue::Num(0.0),
            ParamType::Boolean => ParamValue::Bool(false),
        }
    }
}

/// How to fill params that nobody set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// A real run: a required param without a value is an error.
    Error,
    /// `check`, `show`, `list`: use placeholders.
    Placeholder,
}

/// Values the header rejects (`resolve`'s message, at the header's `file:line`): raised
/// from `runbook{}` as an external Lua error, so the engine tells a param error from a
/// mistake in the file by its type (`error::Error::Params`), not by its words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// The text a param was given, and where (`--set NAME`, `RUNBOOK_PARAM_NAME`): the last
/// `--set` wins, as with most CLIs, then the environment.
fn given_text(
    spec: &ParamSpec,
    sets: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    sets.iter()
        .rev()
        .find(|(k, _)| *k == spec.name)
        .map(|(_, v)| (v.clone(), format!("--set {}", spec.name)))
        .or_else(|| {
            let var = format!("RUNBOOK_PARAM_{}", spec.name.to_ascii_uppercase());
            env(&var).map(|v| (v, var))
        })
}

/// Whether `resolve` filled `spec` with its placeholder (`check` and `show`, for a
/// required param nobody set): a stand-in, not a value the runbook was given.
pub fn is_placeholder(
    spec: &ParamSpec,
    sets: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
    missing: Missing,
) -> bool {
    missing == Missing::Placeholder
        && spec.default.is_none()
        && spec.required
        && given_text(spec, sets, env).is_none()
}

/// Resolves every declared param from `--set` pairs and the environment. Collects all
/// problems into one message so a user fixes them in one go.
pub fn resolve(
    specs: &[ParamSpec],
    sets: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
    missing: Missing,
) -> Result<BTreeMap<String, Option<ParamValue>>, String> {
    resolve_with(specs, sets, env, file(), missing)
}

/// `resolve`, with the `--params` file given (tests give their own).
pub fn resolve_with(
    specs: &[ParamSpec],
    sets: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
    file: Option<&ParamsFile>,
    missing: Missing,
) -> Result<BTreeMap<String, Option<ParamValue>>, String> {
    let mut problems = Vec::new();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    if let Some(f) = file {
        for (key, _, line) in &f.values {
            if !names.contains(&key.as_str()) {
                let declared = match names.is_empty() {
                    true => "this runbook declares no params".to_string(),
                    false => format!("declared: {}", names.join(", ")),
                };
                problems.push(format!(
                    "{}:{line}: unknown param '{key}'{} ({declared})",
                    f.path.display(),
                    suggest::hint(key, names.iter().copied()),
                ));
            }
        }
    }
    for (key, _) in sets {
        if !names.contains(&key.as_str()) {
            let declared = if names.is_empty() {
                "this runbook declares no params".to_string()
            } else {
                format!("declared: {}", names.join(", "))
            };
            problems.push(format!(
                "--set {key}: unknown param '{key}'{} ({declared})",
                suggest::hint(key, names.iter().copied())
            ));
        }
    }
    let mut out = BTreeMap::new();
    for spec in specs {
        // The last --set wins, as with most CLIs, then RUNBOOK_PARAM_*, then the file.
        let mut from_file = false;
        let given = given_text(spec, sets, env).or_else(|| {
            let f = file?;
            let (_, v, line) = f.values.iter().find(|(k, _, _)| *k == spec.name)?;
            from_file = true;
            Some((v.clone(), format!("{}:{line}", f.path.display())))
        });
        // A secret in a file others can read is refused, its value never shown.
        if let (true, Some(f), Some((_, from)), true) = (spec.secret, file, &given, from_file) {
            if !f.private {
                problems.push(format!(
                    "{from}: param '{}' is a secret, and {} can be read by others: make it readable by you alone (chmod 600 {}), or give the secret with RUNBOOK_PARAM_{}",
                    spec.name,
                    f.path.display(),
                    f.path.display(),
                    spec.name.to_ascii_uppercase()
                ));
                out.insert(spec.name.clone(), None);
                continue;
            }
        }
        let value = match given {
            Some((text, from)) => match convert(spec.ty, &text) {
                Ok(v) => match spec.check_choice(&v) {
                    Ok(()) => Some(v),
                    Err(e) => {
                        problems.push(format!(
                            "{from}: param '{}': {}",
                            spec.name,
                            spec.redact(e, &text)
                        ));
                        None
                    }
                },
                Err(e) => {
                    problems.push(format!(
                        "{from}: param '{}': {}",
                        spec.name,
                        spec.redact(e, &text)
                    ));
                    None
                }
            },
            None => match (&spec.default, spec.required, missing) {
                (Some(d), _, _) => Some(d.clone()),
                (None, true, Missing::Error) => {
                    problems.push(format!(
                        "missing required param '{}' ({}): set it with --set {}=VALUE or RUNBOOK_PARAM_{}",
                        spec.name,
                        spec.ty.name(),
                        spec.name,
                        spec.name.to_ascii_uppercase()
                    ));
                    None
                }
                (None, true, Missing::Placeholder) => Some(spec.placeholder()),
                (None, false, _) => None,
            },
        };
        out.insert(spec.name.clone(), value);
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, ty: ParamType) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            ty,
            default: None,
            required: false,
            help: None,
            secret: false,
            choices: vec![],
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn converts_and_validates() {
        let mut count = spec("count", ParamType::Integer);
        count.default = Some(ParamValue::Int(3));
        let mut mode = spec("mode", ParamType::String);
        mode.choices = vec![ParamValue::Str("a".into()), ParamValue::Str("b".into())];
        let specs = vec![count, mode];
        let got = resolve(
            &specs,
            &[("count".into(), "7".into())],
            &no_env,
            Missing::Error,
        )
        .unwrap();
        assert_eq!(got["count"], Some(ParamValue::Int(7)));
        assert_eq!(got["mode"], None);

        let err = resolve(
            &specs,
            &[("cuont".into(), "1".into()), ("mode".into(), "c".into())],
            &no_env,
            Missing::Error,
        )
        .unwrap_err();
        assert!(err.contains("did you mean 'count'"), "{err}");
        assert!(err.contains("not one of the choices: a, b"), "{err}");
    }

    #[test]
    fn required_and_env() {
        let mut token = spec("token", ParamType::String);
        token.required = true;
        token.secret = true;
        let specs = vec![token];
        let err = resolve(&specs, &[], &no_env, Missing::Error).unwrap_err();
        assert!(err.contains("missing required param 'token'"), "{err}");
        let env = |k: &str| (k == "RUNBOOK_PARAM_TOKEN").then(|| "s3cr3t".to_string());
        let got = resolve(&specs, &[], &env, Missing::Error).unwrap();
        assert_eq!(got["token"], Some(ParamValue::Str("s3cr3t".into())));
        let got = resolve(&specs, &[], &no_env, Missing::Placeholder).unwrap();
        assert_eq!(got["token"], Some(ParamValue::Str("<token>".into())));
    }

    #[test]
    fn booleans_and_numbers() {
        assert_eq!(
            convert(ParamType::Boolean, "yes").unwrap(),
            ParamValue::Bool(true)
        );
        assert!(convert(ParamType::Boolean, "maybe").is_err());
        assert!(convert(ParamType::Number, "nan").is_err());
        assert!(convert(ParamType::Path, "").is_err());
    }
}
