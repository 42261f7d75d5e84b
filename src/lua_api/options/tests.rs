use super::*;
use crate::lua_api::{artifact, file, slurm, venv, warmup};
use crate::lua_api::{
    cache, fingerprint, git, gpu, parallel, proc, rollout, runbook, step, target,
};

/// The option names an options struct takes, as serde reads them (renames applied).
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'a>(&'a std::cell::Cell<&'static [&'static str]>);
    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(Error::text("not an options struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Error> {
            self.0.set(fields);
            Err(Error::text("probed"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let found = std::cell::Cell::new(&[][..]);
    let _ = T::deserialize(Probe(&found));
    found.get()
}

mod documented {
    include!(concat!(env!("OUT_DIR"), "/documented_options.rs"));
}

type Check = fn() -> Result<(), String>;

/// An options struct: its name, its options as serde reads them, and a read of a
/// table with an unknown key by another deserializer (serde_json), which only
/// `deny_unknown_fields` refuses.
fn entry<T: DeserializeOwned>() -> (&'static str, &'static [&'static str], Check) {
    // `module::Struct`, as `build.rs` names it.
    let path = std::any::type_name::<T>();
    let name = &path[path[..path.rfind("::").unwrap()].rfind("::").unwrap() + 2..];
    let unknown: Check = || match serde_json::from_str::<T>(r#"{"no_such_option": 1}"#) {
        Err(e) if e.to_string().contains("unknown field") => Ok(()),
        Err(e) => Err(e.to_string()),
        Ok(_) => Err("accepted".into()),
    };
    (name, fields_of::<T>(), unknown)
}

fn all() -> Vec<(&'static str, &'static [&'static str], Check)> {
    vec![
        entry::<cache::ClearOptions>(),
        entry::<cache::RestoreOptions>(),
        entry::<venv::BuildOptions>(),
        entry::<git::RestoreOptions>(),
        entry::<proc::SpawnOptions>(),
        entry::<proc::WaitOptions>(),
        entry::<proc::StopOptions>(),
        entry::<warmup::RunOptions>(),
        entry::<gpu::RequireOptions>(),
        entry::<gpu::HealthOptions>(),
        entry::<rollout::RolloutOptions>(),
        entry::<fingerprint::TakeOptions>(),
        entry::<target::SshOptions>(),
        entry::<slurm::SlurmOptions>(),
        entry::<target::LxcOptions>(),
        entry::<target::EngineOptions>(),
        entry::<target::KubeOptions>(),
        entry::<target::CommandOptions>(),
        entry::<step::DeclareOptions>(),
        entry::<parallel::ParallelOptions>(),
        entry::<runbook::HeaderOptions>(),
        entry::<runbook::ParamOptions>(),
        entry::<artifact::CaptureOptions>(),
        entry::<file::PutOptions>(),
        entry::<file::TemplateOptions>(),
        entry::<file::GetOptions>(),
        entry::<artifact::RestoreOptions>(),
        entry::<artifact::ListOptions>(),
    ]
}

#[test]
fn the_reference_lists_exactly_the_options_each_struct_takes() {
    let structs = all();
    for (name, documented) in documented::DOCUMENTED {
        let Some((_, fields, _)) = structs.iter().find(|(n, ..)| n == name) else {
            panic!("{name} is documented as an options struct but not listed in all()");
        };
        assert_eq!(
            documented, fields,
            "{name}: the reference vs what serde reads"
        );
    }
    for (name, fields, _) in &structs {
        assert!(!fields.is_empty(), "{name} is not a struct with fields");
        assert!(
            documented::DOCUMENTED.iter().any(|(d, _)| d == name),
            "{name} is in no `/// Lua:` block of the reference"
        );
    }
}

#[test]
fn every_options_struct_refuses_unknown_keys_by_itself() {
    for (name, _, unknown) in all() {
        assert_eq!(
            unknown(),
            Ok(()),
            "{name} lacks #[serde(deny_unknown_fields)]"
        );
    }
}

#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Sample {
    #[serde(default)]
    keep: bool,
    #[serde(default = "yes")]
    check: bool,
    name: Option<String>,
    #[serde(rename = "type")]
    ty: Option<String>,
    count: Option<AtLeastOne>,
    #[serde(default, deserialize_with = "timeout")]
    timeout: Option<Duration>,
    #[serde(default, deserialize_with = "timeout_given")]
    wait: Option<Option<Duration>>,
    #[serde(default, deserialize_with = "paths")]
    paths: Option<Vec<String>>,
    #[serde(default, deserialize_with = "env")]
    env: Vec<(String, OsString)>,
    #[serde(default, deserialize_with = "words")]
    args: Vec<OsString>,
    #[serde(default, deserialize_with = "bytes")]
    stdin: Option<Vec<u8>>,
    #[serde(default, deserialize_with = "function")]
    when: Option<mlua::Function>,
    raw: Option<LuaValue>,
    list: Option<Vec<String>>,
}

/// Reads the options table `opts` (Lua source) from line 2 of `opts.lua`.
fn read_sample(opts: &str) -> Result<Sample, String> {
    let lua = Lua::new();
    let got = std::rc::Rc::new(RefCell::new(None));
    let out = got.clone();
    let f = lua
        .create_function(move |lua, t: Option<Table>| {
            *out.borrow_mut() = Some(read::<Sample>(lua, "f()", t));
            Ok(())
        })
        .unwrap();
    lua.globals().set("f", f).unwrap();
    lua.load(format!("local x = 1\nf({opts})"))
        .set_name("@opts.lua")
        .exec()
        .unwrap();
    let result = got.borrow_mut().take().unwrap();
    result.map_err(|e| super::super::error_message(&e))
}

fn err(opts: &str) -> String {
    read_sample(opts).expect_err(opts)
}

#[test]
fn absent_options_take_their_defaults() {
    let s = read_sample("nil").unwrap();
    assert!(!s.keep && s.check && s.name.is_none() && s.count.is_none());
    assert_eq!((s.timeout, s.wait, s.paths), (None, None, None));
    assert!(s.env.is_empty() && s.args.is_empty() && s.stdin.is_none() && s.when.is_none());
    assert!(read_sample("{}").unwrap().check);
}

#[test]
fn values_are_read_with_the_one_parser_of_their_kind() {
    let s = read_sample(
        r#"{ keep = true, check = false, name = 7, type = "path", count = 4.0,
             timeout = "0s", wait = 0, paths = { "/tmp/a", a = "/tmp/a" },
             env = { B = "2", A = 1 }, args = { "--steps", 3 }, stdin = "a\0b",
             when = function() end, raw = { 1 }, list = { "x", "y" } }"#,
    )
    .unwrap();
    assert!(s.keep && !s.check);
    assert_eq!(
        s.name.as_deref(),
        Some("7"),
        "a number is taken as its text"
    );
    assert_eq!(s.ty.as_deref(), Some("path"));
    assert_eq!(s.count, Some(Whole(4)));
    assert_eq!(s.timeout, None, "0s is no timeout");
    assert_eq!(
        s.wait,
        Some(None),
        "given as 0: no timeout, not the default"
    );
    assert_eq!(s.paths, Some(vec!["/tmp/a".to_string()]));
    assert_eq!(
        s.env,
        vec![("A".into(), "1".into()), ("B".into(), "2".into())]
    );
    assert_eq!(s.args, vec![OsString::from("--steps"), OsString::from("3")]);
    assert_eq!(s.stdin.as_deref(), Some(&b"a\0b"[..]));
    assert!(s.when.is_some());
    assert!(matches!(s.raw, Some(LuaValue(Value::Table(_)))));
    assert_eq!(s.list, Some(vec!["x".to_string(), "y".to_string()]));
    let s = read_sample(r#"{ timeout = "1m30s", wait = 2.5 }"#).unwrap();
    assert_eq!(s.timeout, Some(Duration::from_secs(90)));
    assert_eq!(s.wait, Some(Some(Duration::from_millis(2500))));
}

#[test]
fn an_unknown_key_names_the_line_and_the_closest_option() {
    let e = err("{ kep = true }");
    assert!(e.starts_with("opts.lua:2: f(): unknown option 'kep'; did you mean 'keep'?; known: keep, check, name, type,"), "{e}");
    let e = err("{ zzzzzz = 1 }");
    assert!(
        e.starts_with("opts.lua:2: f(): unknown option 'zzzzzz'; known: keep,"),
        "{e}"
    );
    // A list entry is not an option either.
    let e = err(r#"{ "keep" }"#);
    assert!(e.contains("f(): unknown option '"), "{e}");
    // Reported before a wrong value elsewhere in the table.
    let e = err(r#"{ keep = "yes", kep = true }"#);
    assert!(e.contains("unknown option 'kep'"), "{e}");
}

#[test]
fn a_wrong_type_names_the_option_and_what_it_takes() {
    for (opts, want) in [
        (
            r#"{ keep = "yes" }"#,
            "option 'keep' must be a boolean, got string",
        ),
        (
            "{ check = 1 }",
            "option 'check' must be a boolean, got integer",
        ),
        ("{ name = {} }", "option 'name' must be a string, got table"),
        (
            "{ type = true }",
            "option 'type' must be a string, got boolean",
        ),
        (
            r#"{ count = "3" }"#,
            "option 'count' must be a whole number of at least 1, got string",
        ),
        (
            "{ timeout = {} }",
            "option 'timeout' must be a duration like \"30s\" or a number of seconds, got table",
        ),
        (
            "{ args = \"--x\" }",
            "option 'args' must be a list of words like { \"--steps\", 3 }, got string",
        ),
        (
            "{ stdin = 5 }",
            "option 'stdin' must be a string, got integer",
        ),
        (
            "{ when = true }",
            "option 'when' must be a function, got boolean",
        ),
        (
            "{ list = \"x\" }",
            "option 'list' must be a list, got string",
        ),
        (
            "{ list = { 1, {} } }",
            "list[2] must be a string, got table",
        ),
    ] {
        assert_eq!(err(opts), format!("opts.lua:2: f(): {want}"), "{opts}");
    }
}

#[test]
fn a_bad_value_says_what_is_wrong_with_it() {
    for (opts, want) in [
        ("{ count = 0 }", "count: expected a whole number of at least 1, got 0"),
        ("{ count = 1.5 }", "count: expected a whole number of at least 1, got 1.5"),
        ("{ count = 1e300 }", "count: expected a whole number of at least 1, got 1e300"),
        ("{ timeout = -1 }", "timeout: -1 is not a valid duration (it is negative); for no timeout, give 0"),
        ("{ paths = 3 }", "paths is a path or a list of paths, e.g. { \"/tmp/torchinductor_root\" }; got integer"),
        ("{ paths = { \"/a\", keep = true } }", "paths is a path or a list of paths, e.g. { \"/tmp/torchinductor_root\" }; got a table with the entry 'keep' that is not in its list (an option in the wrong table?)"),
        ("{ env = \"A=1\" }", "env must be a table of NAME = \"value\", got string"),
        ("{ env = { A = {} } }", "env.A: expected a string, got table"),
        ("{ env = { [\"A=B\"] = \"1\" } }", "env: 'A=B' is not a valid variable name (or its value holds a NUL)"),
        ("{ args = { \"a\", {} } }", "args[2] must be a string, got table"),
        ("{ args = { \"a\", x = 1 } }", "args must be a plain list (no holes, no named keys)"),
        ("{ list = { \"a\", x = \"b\" } }", "list must be a plain list (no holes, no named keys)"),
    ] {
        assert_eq!(err(opts), format!("opts.lua:2: f(): {want}"), "{opts}");
    }
}

#[test]
fn positional_arguments_read_with_the_same_parsers() {
    let e = Error::wrong("a string", &Value::Boolean(true));
    assert_eq!(
        e.about("target()"),
        "target(): expected a string, got boolean"
    );
    let e = duration_of(&Value::Integer(-1)).unwrap_err();
    assert_eq!(
        e.about("sleep()"),
        "sleep(): -1 is not a valid duration (it is negative)"
    );
    let e = paths_of(&Value::Boolean(true)).unwrap_err();
    assert!(e
        .about("cache.clear(): paths")
        .starts_with("cache.clear(): paths is a path"));
}
