//! Static check behind `runbook check` and every load: finds reads and writes of global
//! variables the sandbox does not define, anywhere in a runbook, including inside step
//! bodies that never run at load time.
//!
//! Rather than parse Lua a second time, it reads what Lua's own compiler produced: the
//! chunk is compiled (not run) and dumped with debug info, and every `GETTABUP`/`SETTABUP`
//! on the `_ENV` upvalue is a global access, with its constant name and its line. The
//! compiler has already resolved every local, parameter, loop variable and upvalue, so
//! scoping needs no code of its own. This is Lua 5.4's dump format (`ldump.c`), which
//! the vendored Lua fixes.
//!
//! Rules: a read of an unknown name is reported. An assignment in the main chunk (outside
//! any function) declares a global, wherever it sits; an assignment to an unknown name
//! inside a function is reported with `assigned = true` (almost always a missing `local`).

pub mod typos;

use std::borrow::Cow;
use std::collections::HashSet;

/// `bytes` as text, what is not UTF-8 replaced (`String::from_utf8_lossy`), without
/// copying or going through it byte by byte when it is UTF-8 (a runbook, almost always).
pub fn text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A use of a global name the sandbox does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGlobal {
    /// 1-based source line of the use.
    pub line: usize,
    /// The global's name.
    pub name: String,
    /// Written (inside a function) rather than only read.
    pub assigned: bool,
}

/// Lists the unknown globals of a chunk the load compiled: `dump` is its
/// `Function::dump(false)` (debug info kept), so the file is compiled once, for the run,
/// and read here from what that compile produced.
pub fn unknown_globals_in(dump: &[u8], known: &[&str]) -> Result<Vec<UnknownGlobal>, String> {
    let accesses = Reader::new(dump)
        .chunk()
        .map_err(|e| format!("cannot read the compiled chunk: {e}"))?;

    let mut declared: HashSet<&str> = known.iter().copied().collect();
    for a in &accesses {
        if a.main && a.write {
            declared.insert(&a.name);
        }
    }
    // In source order: by line, then as the compiler met them; one entry per name and line.
    let mut found: Vec<UnknownGlobal> = Vec::new();
    for a in &accesses {
        if declared.contains(a.name.as_ref()) || (a.main && a.write) {
            continue;
        }
        match found
            .iter_mut()
            .find(|g| g.line == a.line && g.name == a.name)
        {
            Some(g) => g.assigned |= a.write,
            None => found.push(UnknownGlobal {
                line: a.line,
                name: a.name.to_string(),
                assigned: a.write,
            }),
        }
    }
    found.sort_by_key(|g| g.line);
    Ok(found)
}

/// A global read or written, in a function of the chunk (all of them in one list, each
/// function's before its nested functions', as the compiler nested them).
struct Access<'a> {
    /// The constant's text (borrowed from the dump unless it is not UTF-8).
    name: Cow<'a, str>,
    line: usize,
    write: bool,
    /// In the main chunk (outside any function).
    main: bool,
}

const OP_GETTABUP: u32 = 11;
const OP_SETTABUP: u32 = 15;
const ABSLINEINFO: i8 = -0x80;

/// A reader for `lua_dump` output (Lua 5.4, the host's byte order and sizes).
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// The string constants of the functions being read, innermost last (a function's
    /// are read before its nested functions, and used after them).
    constants: Vec<Option<&'a [u8]>>,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader {
            data,
            pos: 0,
            constants: Vec::new(),
        }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or("truncated")?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.bytes(1)?[0])
    }

    /// `dumpSize`: 7-bit groups, most significant first, the last one marked by 0x80.
    fn size(&mut self) -> Result<usize, String> {
        let mut x: usize = 0;
        loop {
            let b = self.byte()?;
            x = x.checked_shl(7).ok_or("size overflow")? | (b & 0x7f) as usize;
            if b & 0x80 != 0 {
                return Ok(x);
            }
        }
    }

    fn string(&mut self) -> Result<Option<&'a [u8]>, String> {
        match self.size()? {
            0 => Ok(None),
            n => Ok(Some(self.bytes(n - 1)?)),
        }
    }

    fn chunk(&mut self) -> Result<Vec<Access<'a>>, String> {
        if self.bytes(4)? != b"\x1bLua" || self.byte()? != 0x54 || self.byte()? != 0 {
            return Err("not a Lua 5.4 chunk".into());
        }
        self.bytes(6)?; // LUAC_DATA
        let (ins, int, num) = (self.byte()?, self.byte()?, self.byte()?);
        if (ins, int, num) != (4, 8, 8) {
            return Err(format!("unexpected sizes {ins}/{int}/{num}"));
        }
        self.bytes(16)?; // LUAC_INT, LUAC_NUM
        self.byte()?; // main's upvalue count
        let mut out = Vec::new();
        self.function(&mut out, true)?;
        Ok(out)
    }

    /// Reads a function and the functions nested in it, its accesses then theirs onto
    /// `out`.
    fn function(&mut self, out: &mut Vec<Access<'a>>, main: bool) -> Result<(), String> {
        self.string()?; // source
        let line_defined = self.size()?;
        self.size()?; // lastlinedefined
        self.bytes(3)?; // numparams, is_vararg, maxstacksize
        let ncode = self.size()?;
        let code = self.bytes(ncode.checked_mul(4).ok_or("size overflow")?)?;
        let nk = self.size()?;
        let base = self.constants.len();
        for _ in 0..nk {
            let k = match self.byte()? {
                0 | 1 | 17 => None, // nil, false, true
                3 | 19 => {
                    self.bytes(8)?; // integer, float
                    None
                }
                4 | 20 => self.string()?, // short, long string
                t => return Err(format!("unknown constant type {t}")),
            };
            self.constants.push(k);
        }
        let nup = self.size()?;
        self.bytes(nup * 3)?;
        let nprotos = self.size()?;
        // This function's accesses go before its nested functions'.
        let first = out.len();
        for _ in 0..nprotos {
            self.function(out, false)?;
        }
        let nline = self.size()?;
        let lineinfo = self.bytes(nline)?;
        let nabs = self.size()?;
        let mut abs = Vec::with_capacity(nabs);
        for _ in 0..nabs {
            abs.push((self.size()?, self.size()?));
        }
        for _ in 0..self.size()? {
            self.string()?;
            self.size()?;
            self.size()?;
        }
        let nupnames = self.size()?;
        let mut env_upvalue = None;
        for i in 0..nupnames {
            if self.string()? == Some(b"_ENV".as_slice()) {
                env_upvalue = Some(i as u32);
            }
        }

        let mut accesses = Vec::new();
        let Some(env) = env_upvalue else {
            self.constants.truncate(base);
            return Ok(());
        };
        let constants = &self.constants[base..];
        // Line of each instruction: deltas from `linedefined`, with absolute entries
        // where a delta would not fit.
        let mut line = line_defined as i64;
        for (pc, ins) in code.chunks_exact(4).enumerate() {
            let this_line = match lineinfo.get(pc) {
                Some(delta) => {
                    let delta = *delta as i8;
                    if delta == ABSLINEINFO {
                        if let Some((_, l)) = abs.iter().find(|(p, _)| *p == pc) {
                            line = *l as i64;
                        }
                    } else {
                        line += delta as i64;
                    }
                    line.max(0) as usize
                }
                None => line_defined,
            };
            let ins = u32::from_ne_bytes([ins[0], ins[1], ins[2], ins[3]]);
            let op = ins & 0x7f;
            let a = (ins >> 7) & 0xff;
            let b = (ins >> 16) & 0xff;
            let c = (ins >> 24) & 0xff;
            let (upvalue, key, write) = match op {
                OP_GETTABUP => (b, c, false),
                OP_SETTABUP => (a, b, true),
                _ => continue,
            };
            if upvalue != env {
                continue;
            }
            if let Some(&Some(name)) = constants.get(key as usize) {
                accesses.push(Access {
                    name: text(name),
                    line: this_line,
                    write,
                    main,
                });
            }
        }
        self.constants.truncate(base);
        out.splice(first..first, accesses);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles `source` (without running it) in a VM of its own and lists its unknown
    /// globals. `Err` carries Lua's own syntax error, `[string]:LINE: message`.
    pub fn unknown_globals(source: &str, known: &[&str]) -> Result<Vec<UnknownGlobal>, String> {
        use mlua::{Lua, LuaOptions, StdLib};
        let lua = Lua::new_with(StdLib::NONE, LuaOptions::new()).map_err(|e| e.to_string())?;
        let func = lua
            .load(source)
            .set_name("=source")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .into_function()
            .map_err(|e| e.to_string())?;
        unknown_globals_in(&func.dump(false), known)
    }

    const KNOWN: &[&str] = &[
        "runbook",
        "step",
        "target",
        "params",
        "log",
        "print",
        "fail",
        "secret",
        "sleep",
        "require",
        "load",
        "pcall",
        "xpcall",
        "error",
        "assert",
        "type",
        "tostring",
        "tonumber",
        "pairs",
        "ipairs",
        "next",
        "select",
        "rawget",
        "rawset",
        "rawequal",
        "rawlen",
        "setmetatable",
        "getmetatable",
        "string",
        "table",
        "math",
        "utf8",
        "coroutine",
        "_G",
        "_VERSION",
        "collectgarbage",
        "warn",
    ];

    /// (line, name, assigned) triples for compact assertions.
    fn check(src: &str) -> Vec<(usize, String, bool)> {
        unknown_globals(src, KNOWN)
            .unwrap_or_else(|e| panic!("parse failed: {e}\n{src}"))
            .into_iter()
            .map(|g| (g.line, g.name, g.assigned))
            .collect()
    }

    fn read(line: usize, name: &str) -> (usize, String, bool) {
        (line, name.to_string(), false)
    }

    fn write(line: usize, name: &str) -> (usize, String, bool) {
        (line, name.to_string(), true)
    }

    #[test]
    fn clean_runbook_has_no_findings() {
        let src = r#"
runbook { name = "deploy", description = "ship it" }

local dir = params.dir or "/tmp"

step("build", function(ctx)
  local out = target("local"):run("make", { cwd = dir })
  log.info("built " .. tostring(out))
  for i, line in ipairs(out.lines) do print(i, line) end
end)
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn typo_inside_step_body_is_reported_with_its_line() {
        let src = r#"runbook { name = "x" }
step("one", function()
  local ok = true
  targt("local"):run("true")
end)
"#;
        assert_eq!(check(src), vec![read(4, "targt")]);
    }

    #[test]
    fn field_accesses_and_keys_are_not_variables() {
        let src = r#"
local t = { foo = 1, ["bar"] = 2, 3 }
print(params.dir, params["x"], t.foo, string.format("%s", t.bar))
params.dir:upper()
t.nested.deep = 1
local s = ("x"):rep(2)
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn expressions_inside_indexes_and_keys_are_variables() {
        let src = r#"
local t = { [k1] = v1, name = v2, v3 }
print(t[k2], params[k3])
t[k4] = 1
"#;
        assert_eq!(
            check(src),
            vec![
                read(2, "k1"),
                read(2, "v1"),
                read(2, "v2"),
                read(2, "v3"),
                read(3, "k2"),
                read(3, "k3"),
                read(4, "k4"),
            ]
        );
    }

    #[test]
    fn method_call_name_is_not_a_variable_but_receiver_and_args_are() {
        assert_eq!(
            check("obj:method(arg)"),
            vec![read(1, "obj"), read(1, "arg")]
        );
        assert_eq!(check("print:method(print)"), vec![]);
    }

    #[test]
    fn call_sugar_args() {
        assert_eq!(check(r#"print "hi"; print { x = y }"#), vec![read(1, "y")]);
    }

    #[test]
    fn local_declarations() {
        assert_eq!(check("local x\nprint(x)"), vec![]);
        assert_eq!(check("local a, b = 1, 2\nprint(a + b)"), vec![]);
        // The right-hand side does not see the locals being declared.
        assert_eq!(check("local y = y"), vec![read(1, "y")]);
        // But a second declaration sees the first.
        assert_eq!(check("local z = 1\nlocal z = z + 1\nprint(z)"), vec![]);
    }

    #[test]
    fn local_attributes() {
        let src = r#"
local limit <const> = 10
local f <close> = nil
local a <const>, b = 1, 2
print(limit, f, a, b)
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn local_function_is_in_scope_in_its_own_body() {
        assert_eq!(check("local function f() return f end\nf()"), vec![]);
    }

    #[test]
    fn local_var_function_is_not_in_scope_in_its_own_body() {
        // `f` inside is the global `f`, since the local is declared after the RHS.
        assert_eq!(
            check("local f = function()\n  return f\nend"),
            vec![read(2, "f")]
        );
    }

    #[test]
    fn parameters_and_varargs() {
        assert_eq!(
            check("local function f(a, b, ...) return a, b, ... end"),
            vec![]
        );
        assert_eq!(
            check("local g = function(...) return select('#', ...) end"),
            vec![]
        );
        // Parameters do not leak out of the function.
        assert_eq!(
            check("local function f(a) end\nprint(a)"),
            vec![read(2, "a")]
        );
    }

    #[test]
    fn method_self() {
        let src = r#"
local Obj = {}
function Obj:name() return self.n end
function Obj.plain() return self end
print(self)
"#;
        assert_eq!(check(src), vec![read(4, "self"), read(5, "self")]);
    }

    #[test]
    fn function_declaration_names() {
        // `function M.f()` reads M.
        assert_eq!(check("function M.f() end"), vec![read(1, "M")]);
        assert_eq!(check("function M.a.b:c() end"), vec![read(1, "M")]);
        // A top-level `function f()` declares global f.
        assert_eq!(check("function helper() end\nhelper()"), vec![]);
        // Usable before its declaration too (e.g. from a step body).
        assert_eq!(
            check("step('s', function() helper() end)\nfunction helper() end"),
            vec![]
        );
    }

    #[test]
    fn numeric_for() {
        assert_eq!(check("for i = 1, 10 do print(i) end"), vec![]);
        assert_eq!(
            check("for i = 1, 10, 2 do end\nprint(i)"),
            vec![read(2, "i")]
        );
        // Bounds are evaluated outside the loop's scope.
        assert_eq!(check("for i = 1, i do end"), vec![read(1, "i")]);
        assert_eq!(
            check("for i = a, b, c do end"),
            vec![read(1, "a"), read(1, "b"), read(1, "c")]
        );
    }

    #[test]
    fn generic_for() {
        assert_eq!(check("for k, v in pairs({}) do print(k, v) end"), vec![]);
        assert_eq!(
            check("for k in pairs({}) do end\nprint(k)"),
            vec![read(2, "k")]
        );
        assert_eq!(
            check("for k in iter(k) do end"),
            vec![read(1, "iter"), read(1, "k")]
        );
    }

    #[test]
    fn repeat_until_sees_block_locals() {
        assert_eq!(check("repeat local done = true until done"), vec![]);
        assert_eq!(
            check("repeat local done = true until done\nprint(done)"),
            vec![read(2, "done")]
        );
    }

    #[test]
    fn while_condition_does_not_see_block_locals() {
        assert_eq!(
            check("while go do local go = false end"),
            vec![read(1, "go")]
        );
    }

    #[test]
    fn nested_blocks() {
        let src = r#"
do
  local a = 1
  if a then
    local b = a
    print(b)
  elseif a > 1 then
    local c = a
  else
    print(a)
  end
  print(b, c)
end
print(a)
"#;
        assert_eq!(
            check(src),
            vec![read(12, "b"), read(12, "c"), read(14, "a")]
        );
    }

    #[test]
    fn shadowing_ends_with_the_block() {
        let src = r#"
do
  local missing = 1
  print(missing)
end
print(missing)
"#;
        assert_eq!(check(src), vec![read(6, "missing")]);
    }

    #[test]
    fn shadowing_a_known_global_is_fine() {
        assert_eq!(
            check("local print = function() end\nprint(1)\ndo local log = 1 end\nlog.info('x')"),
            vec![]
        );
    }

    #[test]
    fn goto_and_labels_are_ignored() {
        let src = r#"
for i = 1, 3 do
  if i == 2 then goto continue end
  print(i)
  ::continue::
end
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn top_level_assignment_declares_a_global_regardless_of_order() {
        let src = r#"
step("s", function()
  print(counter)
  counter = counter + 1
end)
counter = 0
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn top_level_assignment_in_nested_block_declares_too() {
        let src = r#"
if params.fast then MODE = "fast" else MODE = "slow" end
for _, n in ipairs({}) do LAST = n end
step("s", function() print(MODE, LAST) end)
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn assignment_inside_function_is_reported() {
        let src = r#"
step("s", function()
  result = 42
  print(result)
end)
"#;
        assert_eq!(check(src), vec![write(3, "result"), read(4, "result")]);
    }

    #[test]
    fn global_function_declared_inside_function_is_reported() {
        assert_eq!(
            check("local function outer()\n  function inner() end\nend"),
            vec![write(2, "inner")]
        );
    }

    #[test]
    fn assignment_to_local_inside_function_is_fine() {
        let src = r#"
local total = 0
step("s", function(ctx)
  local n
  n = 1
  total = total + n
  ctx = nil
end)
"#;
        assert_eq!(check(src), vec![]);
    }

    #[test]
    fn assignment_to_known_global_is_fine() {
        assert_eq!(check("step('s', function() print = nil end)"), vec![]);
    }

    #[test]
    fn read_and_write_on_one_line_is_reported_once_as_assigned() {
        assert_eq!(
            check("local function f()\n  n = n + 1\nend"),
            vec![write(2, "n")]
        );
    }

    #[test]
    fn each_name_and_line_once_sorted_by_line() {
        // Within a line, in evaluation order: the right side of `bb = aa` comes first.
        let src = "print(zz, aa, zz)\nprint(aa)\nlocal function f() bb = aa end";
        assert_eq!(
            check(src),
            vec![
                read(1, "zz"),
                read(1, "aa"),
                read(2, "aa"),
                read(3, "aa"),
                write(3, "bb"),
            ]
        );
    }

    #[test]
    fn expressions_everywhere_are_walked() {
        let src = r#"
local x = -a + (b * #c) .. (not d and e // 2 | f)
local t = { function() return g end }
return h, i
"#;
        assert_eq!(
            check(src),
            vec![
                read(2, "a"),
                read(2, "b"),
                read(2, "c"),
                read(2, "d"),
                read(2, "e"),
                read(2, "f"),
                read(3, "g"),
                read(4, "h"),
                read(4, "i"),
            ]
        );
    }

    #[test]
    fn env_is_always_in_scope() {
        assert_eq!(check("print(_ENV.print)"), vec![]);
    }

    #[test]
    fn syntax_errors_come_from_lua_with_the_line() {
        let err = unknown_globals("local a = 1\nlocal = 2\n", KNOWN).unwrap_err();
        assert!(err.contains(":2:"), "{err}");
        let err = unknown_globals("local ok <const> = 1\nlocal x <frozen> = 1", KNOWN).unwrap_err();
        assert!(err.contains(":2:") && err.contains("frozen"), "{err}");
    }

    #[test]
    fn deep_nesting_is_read_without_recursion_trouble() {
        let n = 60;
        let src = format!(
            "{}\nprint(missing)\n{}",
            "do local t = { function() ".repeat(n / 2),
            "end } end ".repeat(n / 2)
        );
        let found = unknown_globals(&src, KNOWN).unwrap();
        assert_eq!(
            found,
            vec![UnknownGlobal {
                line: 2,
                name: "missing".into(),
                assigned: false
            }]
        );
    }

    #[test]
    fn long_files_get_the_right_lines() {
        // Far-apart lines are stored as absolute line entries in the dump.
        let src = format!(
            "step(\"x\", function()\n{}  typo()\nend)\n",
            "\n".repeat(5000)
        );
        assert_eq!(check(&src), vec![read(5002, "typo")]);
    }

    #[test]
    fn known_list_is_respected() {
        let g = unknown_globals("foo(); bar()", &["foo"]).unwrap();
        assert_eq!(
            g,
            vec![UnknownGlobal {
                line: 1,
                name: "bar".to_string(),
                assigned: false
            }]
        );
    }
}
