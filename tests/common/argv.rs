//! Argv words that must reach a program byte for byte through every target: random
//! words (bytes that are not UTF-8 included) mixed with fragments that break naive
//! quoting, sent through a target as `printf '%s\0' WORDS…`.

use super::events::{parse_ndjson, Event, Line, Stamped};
use super::{subst, Env, Output};
use proptest::prelude::*;
use std::path::Path;

/// A Lua string literal holding exactly `bytes`: every byte as a `\ddd` escape.
pub fn lua_str(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 4 + 2);
    s.push('"');
    for b in bytes {
        s.push_str(&format!("\\{b:03}"));
    }
    s.push('"');
    s
}

/// A Lua string literal holding exactly the bytes of path `p`.
pub fn lua_path(p: &Path) -> String {
    lua_str(p.as_os_str().as_encoded_bytes())
}

/// Fragments that break naive quoting, mixed with random bytes into words.
pub const NASTY: &[&str] = &[
    "'", "\"", "$", "$HOME", "${IFS}", "`id`", "$(id)", "\\", "\\n", "\n", "\r", "\t", " ", "*",
    "?", "[a-z]", "{a,b}", "~", "-", "--", "-n", "-e", "--help", ";", "&", "|", "!", "#", "%s",
    "%", "<", ">", "é", "日本", "🦀", "\u{1e}", "\x7f", "\x01",
];

/// A word: non-NUL bytes (invalid UTF-8 included unless `utf8`), often with nasty
/// fragments.
pub fn word(utf8: bool) -> impl Strategy<Value = Vec<u8>> {
    let random = if utf8 {
        any::<char>()
            .prop_filter("no NUL", |c| *c != '\0')
            .prop_map(|c| c.to_string().into_bytes())
            .boxed()
    } else {
        (1u8..=255).prop_map(|b| vec![b]).boxed()
    };
    let piece = prop_oneof![
        3 => random,
        2 => prop::sample::select(NASTY).prop_map(|s| s.as_bytes().to_vec()),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
}

pub fn argv_list(utf8: bool) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(word(utf8), 1..8)
}

/// A runbook that runs `printf '%s\0' WORDS…` for each case on `target` and fails on
/// the first output that is not exactly the words, each followed by a NUL.
pub fn roundtrip_runbook(target: &str, cases: &[Vec<Vec<u8>>]) -> String {
    let mut lua = subst(
        r#"runbook { name = "argv-roundtrip" }
local t = @target@
local cases = {
"#,
        &[("target", &target)],
    );
    for case in cases {
        let words: Vec<String> = case.iter().map(|w| lua_str(w)).collect();
        lua.push_str(&subst("  { @words@ },\n", &[("words", &words.join(", "))]));
    }
    lua.push_str(
        r#"}
local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
step("round trip", function()
  for i, words in ipairs(cases) do
    local argv = { "printf", "%s\\0" }
    local want = {}
    for _, w in ipairs(words) do
      argv[#argv + 1] = w
      want[#want + 1] = w .. "\0"
    end
    want = table.concat(want)
    local r = t:exec(argv, { read_only = true })
    if r.stdout ~= want then
      fail(string.format("case %d: sent %s, got %s", i, hex(want), hex(r.stdout)))
    end
  end
end)
"#,
    );
    lua
}

/// Runs 24 random argvs (plus fixed nasty ones) on each of `targets` (name, Lua
/// expression): one batch, so one runbook run per target (a run per case would be far too
/// slow); proptest shrinks the batch when one fails. `run` runs a runbook file to its end.
pub fn round_trips(env: &Env, utf8: bool, targets: &[(&str, &str)], run: impl Fn(&Path) -> Output) {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let mut fixed: Vec<Vec<Vec<u8>>> = vec![[
        "", "-n", "--", "'", "\"", "$HOME", "`id`", "\\", "a\nb", "*", "é🦀", "-e", " ", "\r\n",
    ]
    .iter()
    .map(|w| w.as_bytes().to_vec())
    .collect()];
    if !utf8 {
        fixed.push(vec![
            vec![0xff, 0xfe],
            (1u8..=255).collect(),
            b"\xe9t\xe9".to_vec(),
        ]);
    }
    let mut runner = TestRunner::new(Config {
        cases: 1,
        max_shrink_iters: 24,
        failure_persistence: None,
        ..Config::default()
    });
    let batch = prop::collection::vec(argv_list(utf8), 24);
    let result = runner.run(&batch, |mut cases| {
        cases.extend(fixed.iter().cloned());
        for (name, target) in targets {
            let rb = env.write(
                &format!("roundtrip_{}.lua", name.replace('+', "_")),
                &roundtrip_runbook(target, &cases),
            );
            let out = run(&rb);
            if out.status.code() != Some(0) {
                let err = parse_ndjson(&out.stdout)
                    .into_iter()
                    .rev()
                    .find_map(|l| match l {
                        Line::Event(Stamped {
                            event: Event::StepFinished { error, .. },
                            ..
                        }) => Some(serde_json::to_string(&error).unwrap()),
                        _ => None,
                    })
                    .unwrap_or_else(|| {
                        format!(
                            "exit {:?}: {}{}",
                            out.status.code(),
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        )
                    });
                return Err(TestCaseError::fail(format!("on {name}: {err}")));
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
