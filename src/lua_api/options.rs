//! Options tables (`{ keep = true, timeout = "30s" }`) read into serde-derived structs,
//! one per function, each `#[serde(deny_unknown_fields)]`. This is the one reader: an
//! unknown key names its closest known one (`did you mean`), a wrong type names the option
//! and what it takes, and each kind of value (string, duration, timeout, whole number, path
//! list, environment, word list) has one parser here, which positional arguments use too.
//!
//! Its own deserializer rather than mlua's `from_value`: that one's errors name neither
//! the option nor Lua's types ("invalid type: string \"yes\", expected a boolean"), and it
//! cannot hand over a Lua value as it is (a `when` function, the table `proc.spawn`
//! returned), which [`LuaValue`] does.
//!
//! The doc comments on an options struct's fields are the options' reference: `build.rs`
//! renders them where a `/// Lua:` block has a line `Options ([`NAME`]):`.

use super::err_at;
use mlua::{Lua, Table, Value};
use serde::de::{self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, Visitor};
use serde::de::{IntoDeserializer, MapAccess, SeqAccess, Unexpected};
use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

/// Reads an options table into `T`; absent, every option takes its default. Errors name
/// the runbook line and `what` (the function, e.g. `cache.clear()`).
pub fn read<T: DeserializeOwned>(lua: &Lua, what: &str, opts: Option<Table>) -> mlua::Result<T> {
    let table = match opts {
        Some(t) => t,
        None => lua.create_table()?,
    };
    T::deserialize(LuaDe(Value::Table(table))).map_err(|e| err_at(lua, format!("{what}: {e}")))
}

/// What was wrong with an option (or an argument read by one of the parsers here).
#[derive(Debug)]
pub struct Error(Problem);

#[derive(Debug)]
enum Problem {
    Unknown {
        name: String,
        known: &'static [&'static str],
    },
    /// A value of the wrong Lua type.
    Type { expected: String, got: String },
    /// Anything else, worded to follow the name of what was wrong: `: is negative`,
    /// ` is a path or a list of paths …`, `[2] must be a string …`.
    Text(String),
    /// A whole message that already names the option.
    Named(String),
}

impl Error {
    fn wrong(expected: impl Into<String>, got: &Value) -> Self {
        Error(Problem::Type {
            expected: expected.into(),
            got: got.type_name().to_string(),
        })
    }

    fn text(after_name: impl Into<String>) -> Self {
        Error(Problem::Text(after_name.into()))
    }

    /// This error as the error of option `name`.
    fn in_option(self, name: &str) -> Self {
        Error(Problem::Named(match self.0 {
            Problem::Type { expected, got } => {
                format!("option '{name}' must be {expected}, got {got}")
            }
            Problem::Text(t) => format!("{name}{}", joined(&t)),
            named => return Error(named),
        }))
    }

    /// This error as the error of item `i` of a list.
    fn in_item(self, i: usize) -> Self {
        Error(Problem::Text(match self.0 {
            Problem::Type { expected, got } => format!("[{i}] must be {expected}, got {got}"),
            Problem::Text(t) => format!("[{i}]{}", joined(&t)),
            named => return Error(named),
        }))
    }

    /// The message for an argument named `what` (`sleep()`, `cache.clear(): paths`).
    pub fn about(&self, what: &str) -> String {
        match &self.0 {
            Problem::Text(t) => format!("{what}{}", joined(t)),
            _ => format!("{what}: {self}"),
        }
    }

    /// Adds `hint` to the end of an error about the value (not about its type).
    fn hinted(self, hint: &str) -> Self {
        match self.0 {
            Problem::Text(t) => Error(Problem::Text(format!("{t}{hint}"))),
            other => Error(other),
        }
    }

    /// As the error of any deserializer, for a `deserialize_with` helper (in practice
    /// always this type again: [`LuaValue`] only comes from [`LuaDe`]).
    fn into_de<E: de::Error>(self) -> E {
        match self.0 {
            Problem::Type { expected, got } => {
                E::invalid_type(Unexpected::Other(&got), &expected.as_str())
            }
            other => E::custom(Error(other)),
        }
    }
}

/// `t` after a name: as it is when it starts with its own separator, else after `: `.
fn joined(t: &str) -> String {
    if t.starts_with([':', ' ', '[', '.']) {
        t.to_string()
    } else {
        format!(": {t}")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.0 {
            Problem::Unknown { name, known } => write!(
                f,
                "unknown option '{name}'{}; known: {}",
                crate::base::suggest::hint(name, known.iter().copied()),
                known.join(", ")
            ),
            Problem::Type { expected, got } => write!(f, "expected {expected}, got {got}"),
            Problem::Text(t) | Problem::Named(t) => f.write_str(t),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::text(msg.to_string())
    }

    fn invalid_type(unexp: Unexpected, exp: &dyn de::Expected) -> Self {
        let got = match unexp {
            Unexpected::Bool(_) => "boolean".to_string(),
            Unexpected::Unsigned(_) | Unexpected::Signed(_) => "integer".to_string(),
            Unexpected::Float(_) => "number".to_string(),
            Unexpected::Char(_) | Unexpected::Str(_) | Unexpected::Bytes(_) => "string".to_string(),
            Unexpected::Unit | Unexpected::Option => "nil".to_string(),
            Unexpected::Seq | Unexpected::Map => "table".to_string(),
            Unexpected::Other(other) => other.to_string(),
            other => other.to_string(),
        };
        Error(Problem::Type {
            expected: exp.to_string(),
            got,
        })
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Error(Problem::Unknown {
            name: field.to_string(),
            known: expected,
        })
    }

    fn missing_field(field: &'static str) -> Self {
        Error(Problem::Named(format!("option '{field}' is required")))
    }
}

fn lua_error(e: mlua::Error) -> Error {
    Error::text(format!(": {}", super::error_message(&e)))
}

/// How a key is named in errors: a string as it is, anything else as Lua shows it.
fn key_name(k: &Value) -> String {
    match k {
        Value::String(s) => s.to_string_lossy(),
        other => format!("{other:?}"),
    }
}

fn entries(t: &Table) -> Result<Vec<(Value, Value)>, Error> {
    t.pairs::<Value, Value>()
        .collect::<mlua::Result<_>>()
        .map_err(lua_error)
}

/// Whether `t` is a plain list: keys 1..=n and nothing else.
fn is_list(t: &Table, entries: &[(Value, Value)]) -> bool {
    let len = t.raw_len();
    entries.len() == len
        && entries
            .iter()
            .all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1 && *i as usize <= len))
}

/// A Lua value being read as (part of) an options table.
struct LuaDe(Value);

impl<'de> Deserializer<'de> for LuaDe {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Nil => v.visit_unit(),
            Value::Boolean(b) => v.visit_bool(b),
            Value::Integer(i) => v.visit_i64(i),
            Value::Number(n) => v.visit_f64(n),
            Value::String(s) => v.visit_string(s.to_string_lossy()),
            Value::Table(t) => {
                let items = entries(&t)?;
                if is_list(&t, &items) {
                    v.visit_seq(Items::new(&t)?)
                } else {
                    v.visit_map(Entries::new(items))
                }
            }
            other => Err(Error::wrong("a value runbook can read", &other)),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Boolean(b) => v.visit_bool(b),
            other => Err(Error::wrong("a boolean", &other)),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Integer(i) => v.visit_f64(i as f64),
            Value::Number(n) => v.visit_f64(n),
            other => Err(Error::wrong("a number", &other)),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_f64(v)
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match string_of(&self.0)? {
            Some(s) => v.visit_string(s),
            None => Err(Error::wrong("a string", &Value::Nil)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_string(v)
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_string(v)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_string(v)
    }

    /// Bytes as given, not only UTF-8 (`stdin`).
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => v.visit_byte_buf(s.as_bytes().to_vec()),
            other => Err(Error::wrong("a string", &other)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_byte_buf(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Nil => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Nil => v.visit_unit(),
            other => Err(Error::wrong("nil", &other)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        if name == RAW {
            RAW_SLOT.with(|slot| *slot.borrow_mut() = Some(self.0));
            return v.visit_unit();
        }
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Table(t) if is_list(&t, &entries(&t)?) => v.visit_seq(Items::new(&t)?),
            Value::Table(_) => Err(Error::text(
                " must be a plain list (no holes, no named keys)",
            )),
            other => Err(Error::wrong("a list", &other)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Table(t) => v.visit_map(Entries::new(entries(&t)?)),
            other => Err(Error::wrong("a table", &other)),
        }
    }

    /// An options table. Every key is checked before any value is read, so an unknown
    /// option is what gets reported even when another option's value is wrong too.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        let t = match self.0 {
            Value::Table(t) => t,
            other => return Err(Error::wrong("a table", &other)),
        };
        let items = entries(&t)?;
        for (k, _) in &items {
            if !matches!(k, Value::String(s) if fields.contains(&s.to_string_lossy().as_str())) {
                return Err(de::Error::unknown_field(&key_name(k), fields));
            }
        }
        v.visit_map(Entries::new(items))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => v.visit_enum(s.to_string_lossy().into_deserializer()),
            other => Err(Error::wrong("a string", &other)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    serde::forward_to_deserialize_any! { i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 }
}

/// A table's entries, for a struct (its options) or a map.
struct Entries {
    items: std::vec::IntoIter<(Value, Value)>,
    value: Option<(String, Value)>,
}

impl Entries {
    fn new(items: Vec<(Value, Value)>) -> Self {
        Entries {
            items: items.into_iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((k, v)) = self.items.next() else {
            return Ok(None);
        };
        self.value = Some((key_name(&k), v));
        seed.deserialize(LuaDe(k)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (name, v) = self
            .value
            .take()
            .expect("serde reads a key before its value");
        seed.deserialize(LuaDe(v)).map_err(|e| e.in_option(&name))
    }
}

/// A plain list's items, in order.
struct Items {
    items: std::vec::IntoIter<Value>,
    next: usize,
}

impl Items {
    fn new(t: &Table) -> Result<Self, Error> {
        let items = (1..=t.raw_len())
            .map(|i| t.raw_get::<Value>(i))
            .collect::<mlua::Result<Vec<_>>>()
            .map_err(lua_error)?;
        Ok(Items {
            items: items.into_iter(),
            next: 0,
        })
    }
}

impl<'de> SeqAccess<'de> for Items {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(v) = self.items.next() else {
            return Ok(None);
        };
        self.next += 1;
        let i = self.next;
        seed.deserialize(LuaDe(v))
            .map(Some)
            .map_err(|e| e.in_item(i))
    }
}

const RAW: &str = "$runbook::lua_api::options::LuaValue";

thread_local! {
    /// Where [`LuaDe`] leaves the value a [`LuaValue`] takes: serde has no way to pass a
    /// value that is not data (a function, a table's identity) through a visitor.
    static RAW_SLOT: RefCell<Option<Value>> = const { RefCell::new(None) };
}

/// An option's Lua value as given, for the options no serde type describes (a function,
/// a table that `proc.spawn` returned) and for the parsers here, which take Lua values.
#[derive(Debug)]
pub struct LuaValue(pub Value);

impl<'de> Deserialize<'de> for LuaValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Take;
        impl<'de> Visitor<'de> for Take {
            type Value = LuaValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Lua value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<LuaValue, E> {
                RAW_SLOT
                    .with(|slot| slot.borrow_mut().take())
                    .map(LuaValue)
                    .ok_or_else(|| E::custom(": a Lua value is only read from a Lua table"))
            }
        }
        d.deserialize_newtype_struct(RAW, Take)
    }
}

fn value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    LuaValue::deserialize(d).map(|v| v.0)
}

// One parser per kind of value, over Lua values; `deserialize_with` helpers for options
// and the argument readers in `lua_api` (`string_value`, `duration_value`, `path_list`,
// `word_list`) call them.

/// A string; a number is taken as its text, as Lua's own string functions do. nil is
/// `None`.
pub fn string_of(v: &Value) -> Result<Option<String>, Error> {
    match v {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(s.to_string_lossy())),
        Value::Integer(i) => Ok(Some(i.to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(Error::wrong("a string", other)),
    }
}

const DURATION: &str = "a duration like \"30s\" or a number of seconds";

/// A duration given as a string (`"30s"`) or a number of seconds, checked against
/// `duration::MAX` (a negative, NaN, infinite or too long one is an error). 0 stays 0:
/// for a wait (`sleep`, `delay`) that means no wait. nil is `None`.
/// ---@alias runbook.Duration string|number A duration: `"30s"`, `"10m"`, `"1h30m"`, `"250ms"`, or a number of seconds.
pub fn duration_of(v: &Value) -> Result<Option<Duration>, Error> {
    match v {
        Value::Nil => return Ok(None),
        Value::Integer(i) => {
            crate::base::duration::from_whole_secs(*i).map_err(|e| format!("{i} {e}"))
        }
        // `{:?}` keeps a huge or tiny float short (`1e300`, not 301 digits).
        Value::Number(n) => crate::base::duration::from_secs(*n).map_err(|e| format!("{n:?} {e}")),
        Value::String(s) => crate::base::duration::parse(&s.to_string_lossy()),
        other => return Err(Error::wrong(DURATION, other)),
    }
    .map(Some)
    .map_err(|e| Error::text(format!(": {e}")))
}

/// A timeout: like [`duration_of`], and 0 in any spelling (`0`, `0.0`, `"0s"`, `"0ms"`)
/// means no timeout (`None`), as with coreutils `timeout 0`. One meaning for every
/// spelling: a runbook cannot tell an integer 0 from a float 0.0 at a glance.
pub fn timeout_of(v: &Value) -> Result<Option<Duration>, Error> {
    match duration_of(v) {
        Ok(d) => Ok(d.filter(|d| !d.is_zero())),
        Err(e) => Err(e.hinted(crate::base::duration::NO_TIMEOUT_HINT)),
    }
}

/// A whole number in `min..=max`: an integer, or a float with no fractional part
/// (`n / 2` is a float in Lua 5.4 even when it divides evenly). Anything else is an error
/// naming the value, never a wrapped or saturated cast. nil is `None`.
pub fn whole_of(v: &Value, min: i64, max: i64) -> Result<Option<i64>, Error> {
    let range = if max == i64::MAX {
        format!("of at least {min}")
    } else {
        format!("from {min} to {max}")
    };
    let (n, got) = match v {
        Value::Nil => return Ok(None),
        Value::Integer(i) => (Some(*i), i.to_string()),
        // Exactly representable and inside i64: the cast is exact.
        Value::Number(f) => (
            (f.fract() == 0.0 && *f >= -(2f64.powi(63)) && *f < 2f64.powi(63)).then_some(*f as i64),
            format!("{f:?}"),
        ),
        other => return Err(Error::wrong(format!("a whole number {range}"), other)),
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(Error::text(format!(
            ": expected a whole number {range}, got {got}"
        ))),
    }
}

/// Paths, as every option and argument that takes them reads them (`cache.*`'s `paths`,
/// `git.restore`'s `paths`, `warmup.run`'s `expect_cache`, `fingerprint.take`'s
/// `caches`, the header's `cache_roots`): nil is `None`; a string is one path; a list
/// holds strings only (a number is never a path) and no holes, and may also name its
/// entries (`torch.caches()` names them `inductor`, …), but any other key is an error
/// rather than silently ignored (an option in the wrong table, `{ "/tmp/x", keep = true }`).
/// An empty list is `Some([])`: whether that is allowed is the caller's rule.
/// ---@alias runbook.Paths string|string[]|table<integer|string, string> One path or a list of them (absolute or `~/…`), whose entries may also be named.
pub fn paths_of(v: &Value) -> Result<Option<Vec<String>>, Error> {
    let wrong = |got: &str| {
        Error::text(format!(
            " is a path or a list of paths, e.g. {{ \"/tmp/torchinductor_root\" }}; got {got}"
        ))
    };
    let list = match v {
        Value::Nil => return Ok(None),
        Value::String(s) => return Ok(Some(vec![s.to_string_lossy()])),
        Value::Table(list) => list,
        other => return Err(wrong(other.type_name())),
    };
    let len = list.raw_len();
    let mut out = Vec::with_capacity(len);
    for i in 1..=len {
        match list.raw_get::<Value>(i).map_err(lua_error)? {
            Value::String(s) => out.push(s.to_string_lossy()),
            other => return Err(wrong(&format!("{} at [{i}]", other.type_name()))),
        }
    }
    for (k, v) in entries(list)? {
        let alias = matches!((&k, &v), (Value::String(_), Value::String(s)) if out.contains(&s.to_string_lossy()));
        let listed = matches!(k, Value::Integer(i) if i >= 1 && i as usize <= len);
        if !alias && !listed {
            return Err(wrong(&format!(
                "a table with the entry '{}' that is not in its list (an option in the wrong table?)",
                key_name(&k)
            )));
        }
    }
    Ok(Some(out))
}

/// `{ NAME = "value", … }` (or nil) as sorted pairs, for a command's environment.
/// Values keep their exact bytes (not only UTF-8), as argv words and stdin do.
/// ---@alias runbook.Env table<string, string|number> Environment variables, `{ NAME = "value", … }`.
pub fn env_of(v: &Value) -> Result<Vec<(String, OsString)>, Error> {
    let t = match v {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(t) => t,
        other => {
            return Err(Error::text(format!(
                " must be a table of NAME = \"value\", got {}",
                other.type_name()
            )))
        }
    };
    let mut out = Vec::new();
    for (k, v) in entries(t)? {
        let key = string_of(&k)
            .map_err(|_| Error::text(format!(": expected a string, got {}", k.type_name())))?
            .unwrap_or_default();
        let val: Vec<u8> = match v {
            Value::String(s) => s.as_bytes().to_vec(),
            other => string_of(&other)
                .map_err(|_| {
                    Error::text(format!(
                        ".{key}: expected a string, got {}",
                        other.type_name()
                    ))
                })?
                .unwrap_or_default()
                .into_bytes(),
        };
        if key.is_empty() || key.contains('=') || key.contains('\0') || val.contains(&0) {
            return Err(Error::text(format!(
                ": '{key}' is not a valid variable name (or its value holds a NUL)"
            )));
        }
        out.push((key, OsString::from_vec(val)));
    }
    out.sort();
    Ok(out)
}

/// The most bytes a list of words may hold: above what any command line can (Linux's
/// ARG_MAX is 2 MiB with the environment), so only a mistake or a bomb reaches it.
const WORDS_MAX: usize = 4 << 20;

/// The words of a plain Lua list (numbers converted), e.g. an argv: no holes and no
/// named keys, every word a string, kept byte for byte.
/// ---@alias runbook.Words (string|number)[] A list of words, e.g. an argv: `{ "ls", "-l", dir }` (numbers are converted).
pub fn words_of(t: &Table) -> Result<Vec<OsString>, Error> {
    let len = t.raw_len();
    let mut words = Vec::with_capacity(len);
    let mut bytes = 0usize;
    for i in 1..=len {
        match t.raw_get::<Value>(i).map_err(lua_error)? {
            Value::String(s) => {
                // Lua shares one string between many slots, a copy here does not: a
                // 64 MiB word 64 times over would be 4 GiB outside Lua's memory limit.
                bytes += s.as_bytes().len() + 1;
                if bytes > WORDS_MAX {
                    return Err(Error::text(format!(
                        " is over {} MiB; no command line holds that much (Linux: 2 MiB in all, 128 KiB a word): pass data on stdin or in a file",
                        WORDS_MAX >> 20
                    )));
                }
                words.push(OsString::from_vec(s.as_bytes().to_vec()))
            }
            Value::Integer(n) => words.push(n.to_string().into()),
            Value::Number(n) => words.push(n.to_string().into()),
            other => {
                return Err(Error::text(format!(
                    "[{i}] must be a string, got {}",
                    other.type_name()
                )))
            }
        }
    }
    if entries(t)?.len() != len {
        return Err(Error::text(
            " must be a plain list (no holes, no named keys)",
        ));
    }
    Ok(words)
}

fn lift<T, E: de::Error>(r: Result<T, Error>) -> Result<T, E> {
    r.map_err(Error::into_de)
}

/// For a `deserialize_with` helper of one option: `parse` reads the option's Lua value
/// with the parsers here.
pub fn parse<'de, D: Deserializer<'de>, T>(
    d: D,
    parse: impl FnOnce(&Value) -> Result<T, Error>,
) -> Result<T, D::Error> {
    lift(parse(&value(d)?))
}

/// `deserialize_with` for a duration ([`duration_of`]); the field needs `#[serde(default)]`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    lift(duration_of(&value(d)?))
}

/// `deserialize_with` for a timeout ([`timeout_of`]); the field needs `#[serde(default)]`.
pub fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    lift(timeout_of(&value(d)?))
}

/// `deserialize_with` for a timeout that has a default: `None` when the option is absent
/// (the field needs `#[serde(default)]`), `Some(None)` for no timeout.
pub fn timeout_given<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Duration>>, D::Error> {
    lift(timeout_of(&value(d)?)).map(Some)
}

/// `deserialize_with` for paths ([`paths_of`]); the field needs `#[serde(default)]`.
pub fn paths<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    lift(paths_of(&value(d)?))
}

/// `deserialize_with` for a command's environment ([`env_of`]); the field needs
/// `#[serde(default)]`.
pub fn env<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, OsString)>, D::Error> {
    lift(env_of(&value(d)?))
}

/// `deserialize_with` for a list of words, e.g. a program's arguments ([`words_of`]);
/// the field needs `#[serde(default)]`.
pub fn words<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OsString>, D::Error> {
    match value(d)? {
        Value::Table(t) => lift(words_of(&t)),
        other => lift(Err(Error::wrong(
            "a list of words like { \"--steps\", 3 }",
            &other,
        ))),
    }
}

/// `deserialize_with` for a Lua function; the field needs `#[serde(default)]`.
pub fn function<'de, D: Deserializer<'de>>(d: D) -> Result<Option<mlua::Function>, D::Error> {
    match value(d)? {
        Value::Function(f) => Ok(Some(f)),
        other => lift(Err(Error::wrong("a function", &other))),
    }
}

/// `deserialize_with` for bytes given as a Lua string, kept exactly (`stdin`); the field
/// needs `#[serde(default)]`.
pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    struct Bytes;
    impl Visitor<'_> for Bytes {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
    }
    d.deserialize_byte_buf(Bytes).map(Some)
}

/// A whole number in `MIN..=MAX` ([`whole_of`]), e.g. `Whole<1, 65535>` for a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole<const MIN: i64, const MAX: i64>(pub i64);

/// A count of at least 1, with no upper bound.
pub type AtLeastOne = Whole<1, { i64::MAX }>;

impl<'de, const MIN: i64, const MAX: i64> Deserialize<'de> for Whole<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = lift(whole_of(&value(d)?, MIN, MAX))?;
        // A nil option is absent, so it never reaches here: `Option<Whole>` reads it.
        Ok(Whole(n.unwrap_or(MIN)))
    }
}

impl<const MIN: i64, const MAX: i64> Whole<MIN, MAX> {
    /// As a `usize`, saturating (a count above what memory holds means "all").
    pub fn count(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// `#[serde(default = "options::yes")]`, for an option that is on unless turned off.
pub fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests;
