//! Static lint for `runbook check`: finds uses of global variables the sandbox does
//! not define, anywhere in a runbook file, including inside function bodies (step
//! bodies) that never run at check time.
//!
//! The source is parsed with `full_moon` (Lua 5.4 syntax) and the AST is walked with
//! Lua's lexical scoping rules, so a name is only a "global" when no enclosing
//! `local`, parameter, loop variable or `self` binds it at that point.
//!
//! Rules:
//! - Reading an unknown global is reported (`assigned: false`).
//! - Assigning a global outside any function body (the main chunk, including its
//!   `if`/`do`/loop blocks, which run at load time) *declares* it: any read or
//!   write of that name anywhere in the file is then fine, regardless of order.
//! - Assigning an unknown, undeclared global inside a function body is reported
//!   (`assigned: true`): it is almost always a missing `local`.

use std::collections::{HashMap, HashSet};

use full_moon::ast::lua54::Attribute;
use full_moon::ast::{
    Block, Call, Expression, Field, FunctionArgs, FunctionBody, FunctionCall, Index, LastStmt,
    Parameter, Prefix, Stmt, Suffix, TableConstructor, Var, VarExpression,
};
use full_moon::tokenizer::{Lexer, LexerResult, Symbol, TokenReference, TokenType};
use full_moon::LuaVersion;

/// A use of a global name the sandbox does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGlobal {
    /// 1-based source line of the use.
    pub line: usize,
    /// The global's name.
    pub name: String,
    /// True when the use on this line is an assignment inside a function body
    /// (a likely missing `local`); false for a read.
    pub assigned: bool,
}

/// Finds reads and writes of global names that are neither in `known` (the globals
/// the sandbox defines) nor declared by an assignment at the top level of the chunk.
///
/// Each (name, line) is reported once, sorted by line (then by column). When a name
/// is both read and assigned on the same line (`x = x + 1` in a function),
/// `assigned` is true.
///
/// Returns `Err` with a `line N: ...` message if the source does not parse as Lua 5.4
/// (including an unknown `<attribute>` and nesting deeper than Lua allows).
pub fn unknown_globals(source: &str, known: &[&str]) -> Result<Vec<UnknownGlobal>, String> {
    if let Some(line) = too_deeply_nested(source) {
        return Err(format!(
            "line {line}: nesting deeper than {MAX_NESTING} levels (Lua rejects this too)"
        ));
    }
    // full_moon's parser (and the AST's drop, and our walker) recurse once or more
    // per nesting level, using tens of KiB of stack per level in debug builds. Run
    // on a thread with a generous stack so the caller's stack size (e.g. a 2 MiB
    // tokio worker) doesn't matter.
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("runbook-lint".to_string())
            .stack_size(LINT_STACK_BYTES)
            .spawn_scoped(scope, || analyze(source, known))
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // Could not spawn (resource limits): try on the current stack.
            Err(_) => analyze(source, known),
        }
    })
}

/// Refuse sources nested deeper than this. Lua itself rejects anything nested
/// more than ~200 levels (LUAI_MAXCCALLS), so this never rejects a loadable file.
const MAX_NESTING: usize = 500;

/// Stack for the parse/walk thread: comfortably more than `MAX_NESTING` levels need
/// in an unoptimised build. Only the pages actually touched get committed.
const LINT_STACK_BYTES: usize = 64 << 20;

/// Cheap token-level scan for pathological nesting (brackets and blocks), so that
/// such input gets an error instead of overflowing the parser's stack. Returns the
/// line where nesting first exceeds `MAX_NESTING`. Lexer errors are left for the
/// parser to report.
fn too_deeply_nested(source: &str) -> Option<usize> {
    let mut lexer = Lexer::new(source, LuaVersion::lua54());
    let mut depth = 0usize;
    while let Some(LexerResult::Ok(token)) = lexer.consume() {
        let TokenType::Symbol { symbol } = token.token_type() else {
            continue;
        };
        match symbol {
            // Each opener has exactly one closer in valid Lua: `if ... end` (not
            // `then`, which `elseif` repeats), `while/for ... do ... end`,
            // `function ... end`, `repeat ... until`.
            Symbol::Do
            | Symbol::If
            | Symbol::Function
            | Symbol::Repeat
            | Symbol::LeftParen
            | Symbol::LeftBracket
            | Symbol::LeftBrace => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(token.token().start_position().line());
                }
            }
            Symbol::End
            | Symbol::Until
            | Symbol::RightParen
            | Symbol::RightBracket
            | Symbol::RightBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Parses `source` and collects the unknown globals (see [`unknown_globals`]).
fn analyze(source: &str, known: &[&str]) -> Result<Vec<UnknownGlobal>, String> {
    let ast = full_moon::parse_fallible(source, LuaVersion::lua54())
        .into_result()
        .map_err(|errors| match errors.first() {
            Some(e) => format!("line {}: {}", e.range().0.line(), e.error_message()),
            None => "syntax error".to_string(),
        })?;

    let mut walker = Walker::new();
    walker.block(ast.nodes());
    if let Some(error) = walker.syntax_error {
        return Err(error);
    }

    // Globals assigned outside any function body are defined by the runbook itself.
    let declared: HashSet<&str> = walker
        .uses
        .iter()
        .filter(|u| u.assigned && !u.in_function)
        .map(|u| u.name.as_str())
        .collect();
    let is_ok = |name: &str| known.contains(&name) || declared.contains(name);

    // Group by (name, line): keep the first column for ordering, and OR the
    // `assigned` flags. Top-level assignments never get here (they are declared).
    let mut found: HashMap<(&str, usize), (usize, bool)> = HashMap::new();
    for u in walker.uses.iter().filter(|u| !is_ok(&u.name)) {
        let entry = found
            .entry((u.name.as_str(), u.line))
            .or_insert((u.column, false));
        entry.0 = entry.0.min(u.column);
        entry.1 |= u.assigned;
    }
    let mut out: Vec<(usize, UnknownGlobal)> = found
        .into_iter()
        .map(|((name, line), (column, assigned))| {
            let global = UnknownGlobal {
                line,
                name: name.to_string(),
                assigned,
            };
            (column, global)
        })
        .collect();
    out.sort_by(|(ca, a), (cb, b)| (a.line, *ca, &a.name).cmp(&(b.line, *cb, &b.name)));
    Ok(out.into_iter().map(|(_, g)| g).collect())
}

/// One reference to a name that no enclosing local binds (i.e. a global).
struct GlobalUse {
    name: String,
    line: usize,
    column: usize,
    /// An assignment target rather than a read.
    assigned: bool,
    /// Inside some function body (as opposed to code that runs at load time).
    in_function: bool,
}

/// AST walker tracking lexical scopes.
struct Walker {
    /// Stack of scopes, innermost last; each holds the locals declared so far in
    /// that block, in declaration order (so shadowing within a block just works).
    scopes: Vec<Vec<String>>,
    /// Number of enclosing function bodies (0 = main chunk).
    fn_depth: usize,
    uses: Vec<GlobalUse>,
    /// The first error the parser lets through but Lua 5.4 rejects.
    syntax_error: Option<String>,
}

impl Walker {
    fn new() -> Self {
        // In Lua 5.4 every chunk has an implicit `_ENV` upvalue, so `_ENV` is always
        // a variable in scope, never a global.
        Walker {
            scopes: vec![vec!["_ENV".to_string()]],
            fn_depth: 0,
            uses: Vec::new(),
            syntax_error: None,
        }
    }

    // ---- scopes -------------------------------------------------------------

    /// Runs `f` in a fresh nested scope; locals it declares vanish afterwards.
    fn scoped(&mut self, f: impl FnOnce(&mut Self)) {
        self.scopes.push(Vec::new());
        f(self);
        self.scopes.pop();
    }

    fn declare(&mut self, token: &TokenReference) {
        self.declare_name(name_of(token));
    }

    fn declare_name(&mut self, name: String) {
        self.scopes
            .last_mut()
            .expect("the chunk scope is never popped")
            .push(name);
    }

    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().flatten().any(|n| n == name)
    }

    /// Records a name reference unless a local binds it.
    fn reference(&mut self, token: &TokenReference, assigned: bool) {
        let name = name_of(token);
        if self.is_local(&name) {
            return;
        }
        let pos = token.token().start_position();
        self.uses.push(GlobalUse {
            name,
            line: pos.line(),
            column: pos.character(),
            assigned,
            in_function: self.fn_depth > 0,
        });
    }

    // ---- statements ---------------------------------------------------------

    /// Walks a block's statements in the *current* scope; callers decide where the
    /// scope begins and ends (see `repeat ... until`).
    fn block(&mut self, block: &Block) {
        for stmt in block.stmts() {
            self.stmt(stmt);
        }
        if let Some(LastStmt::Return(ret)) = block.last_stmt() {
            for e in ret.returns() {
                self.expr(e);
            }
        }
    }

    /// Walks a block in its own nested scope.
    fn scoped_block(&mut self, block: &Block) {
        self.scoped(|w| w.block(block));
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Assignment(a) => {
                for e in a.expressions() {
                    self.expr(e);
                }
                for var in a.variables() {
                    match var {
                        Var::Name(name) => self.reference(name, true),
                        // `a.b = v` / `a[k] = v` read `a` (and `k`); they write a field.
                        Var::Expression(ve) => self.var_expression(ve),
                        _ => {}
                    }
                }
            }
            Stmt::LocalAssignment(local) => {
                // `local x = x`: the right-hand side is evaluated before the new
                // locals come into scope, so it still sees the outer `x`. Attributes
                // (`<const>`, `<close>`) don't affect scoping.
                for e in local.expressions() {
                    self.expr(e);
                }
                for attribute in local.attributes().flatten() {
                    self.check_attribute(attribute);
                }
                for name in local.names() {
                    self.declare(name);
                }
            }
            Stmt::LocalFunction(f) => {
                // `local function f` is `local f; f = function ... end`: the name is in
                // scope inside its own body, so recursion refers to the local.
                self.declare(f.name());
                self.function_body(f.body(), false);
            }
            Stmt::FunctionDeclaration(decl) => {
                let name = decl.name();
                let mut names = name.names().iter();
                if let Some(first) = names.next() {
                    // `function f()` assigns the variable `f`; `function a.b()` and
                    // `function a:b()` only read `a` and assign a field.
                    let is_plain = names.next().is_none() && name.method_colon().is_none();
                    self.reference(first, is_plain);
                }
                self.function_body(decl.body(), name.method_colon().is_some());
            }
            Stmt::FunctionCall(call) => self.function_call(call),
            Stmt::Do(d) => self.scoped_block(d.block()),
            Stmt::While(w) => {
                self.expr(w.condition());
                self.scoped_block(w.block());
            }
            Stmt::Repeat(r) => {
                // Unlike `while`, the `until` condition is inside the loop body's
                // scope: it can see the block's locals.
                self.scoped(|w| {
                    w.block(r.block());
                    w.expr(r.until());
                });
            }
            Stmt::If(i) => {
                self.expr(i.condition());
                self.scoped_block(i.block());
                for else_if in i.else_if().into_iter().flatten() {
                    self.expr(else_if.condition());
                    self.scoped_block(else_if.block());
                }
                if let Some(block) = i.else_block() {
                    self.scoped_block(block);
                }
            }
            Stmt::NumericFor(f) => {
                // Bounds are evaluated outside the loop; the control variable is
                // local to the body.
                self.expr(f.start());
                self.expr(f.end());
                if let Some(step) = f.step() {
                    self.expr(step);
                }
                self.scoped(|w| {
                    w.declare(f.index_variable());
                    w.block(f.block());
                });
            }
            Stmt::GenericFor(f) => {
                for e in f.expressions() {
                    self.expr(e);
                }
                self.scoped(|w| {
                    for name in f.names() {
                        w.declare(name);
                    }
                    w.block(f.block());
                });
            }
            // Labels and `goto` name labels, not variables. Anything else is syntax
            // from other Lua dialects, which a Lua 5.4 parse never produces.
            _ => {}
        }
    }

    /// full_moon accepts any `<name>`; Lua 5.4 only `<const>` and `<close>`.
    fn check_attribute(&mut self, attribute: &Attribute) {
        let name = name_of(attribute.name());
        if name != "const" && name != "close" && self.syntax_error.is_none() {
            let line = attribute.name().token().start_position().line();
            self.syntax_error = Some(format!("line {line}: unknown attribute '{name}'"));
        }
    }

    // ---- expressions --------------------------------------------------------

    fn expr(&mut self, expr: &Expression) {
        match expr {
            Expression::BinaryOperator { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            Expression::Parentheses { expression, .. }
            | Expression::UnaryOperator { expression, .. } => self.expr(expression),
            Expression::Function(f) => self.function_body(f.body(), false),
            Expression::FunctionCall(call) => self.function_call(call),
            Expression::TableConstructor(t) => self.table(t),
            Expression::Var(Var::Name(name)) => self.reference(name, false),
            Expression::Var(Var::Expression(ve)) => self.var_expression(ve),
            // Numbers, strings, `true`/`false`/`nil`/`...`.
            _ => {}
        }
    }

    /// A function body: a new scope holding `self` (for `function a:b()`) and the
    /// parameters. `...` is not a name and binds nothing.
    fn function_body(&mut self, body: &FunctionBody, is_method: bool) {
        self.fn_depth += 1;
        self.scoped(|w| {
            if is_method {
                w.declare_name("self".to_string());
            }
            for param in body.parameters() {
                if let Parameter::Name(name) = param {
                    w.declare(name);
                }
            }
            w.block(body.block());
        });
        self.fn_depth -= 1;
    }

    fn function_call(&mut self, call: &FunctionCall) {
        self.prefix(call.prefix());
        for suffix in call.suffixes() {
            self.suffix(suffix);
        }
    }

    fn var_expression(&mut self, ve: &VarExpression) {
        self.prefix(ve.prefix());
        for suffix in ve.suffixes() {
            self.suffix(suffix);
        }
    }

    fn prefix(&mut self, prefix: &Prefix) {
        match prefix {
            Prefix::Name(name) => self.reference(name, false),
            Prefix::Expression(e) => self.expr(e),
            _ => {}
        }
    }

    fn suffix(&mut self, suffix: &Suffix) {
        match suffix {
            // `a[k]` reads `k`; `a.b` names a field, not a variable.
            Suffix::Index(Index::Brackets { expression, .. }) => self.expr(expression),
            // `a:b(args)` — `b` is a field name; only the arguments matter.
            Suffix::Call(Call::AnonymousCall(args)) => self.args(args),
            Suffix::Call(Call::MethodCall(m)) => self.args(m.args()),
            _ => {}
        }
    }

    fn args(&mut self, args: &FunctionArgs) {
        match args {
            FunctionArgs::Parentheses { arguments, .. } => {
                for e in arguments {
                    self.expr(e);
                }
            }
            FunctionArgs::TableConstructor(t) => self.table(t),
            // `f "string"`.
            _ => {}
        }
    }

    fn table(&mut self, table: &TableConstructor) {
        for field in table.fields() {
            match field {
                // `[k] = v`: both are expressions.
                Field::ExpressionKey { key, value, .. } => {
                    self.expr(key);
                    self.expr(value);
                }
                // `name = v`: `name` is a string key, not a variable.
                Field::NameKey { value, .. } => self.expr(value),
                Field::NoKey(value) => self.expr(value),
                _ => {}
            }
        }
    }
}

/// The identifier text of a name token (without surrounding whitespace/comments).
fn name_of(token: &TokenReference) -> String {
    token.token().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn each_name_and_line_once_sorted_by_line_then_column() {
        let src = "print(zz, aa, zz)\nprint(aa)\nlocal function f() bb = aa end";
        assert_eq!(
            check(src),
            vec![
                read(1, "zz"),
                read(1, "aa"),
                read(2, "aa"),
                write(3, "bb"),
                read(3, "aa"),
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
    fn parse_error_names_the_line() {
        let err = unknown_globals("local a = 1\nlocal = 2\n", KNOWN).unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
        let err = unknown_globals("print(\"unterminated)\n", KNOWN).unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
    }

    #[test]
    fn unknown_local_attribute_is_a_syntax_error() {
        let err = unknown_globals("local ok <const> = 1\nlocal x <frozen> = 1", KNOWN).unwrap_err();
        assert_eq!(err, "line 2: unknown attribute 'frozen'");
    }

    #[test]
    fn nesting_deeper_than_lua_allows_is_an_error_not_a_crash() {
        let n = MAX_NESTING + 1;
        let blocks = format!("{}\nprint(1)\n{}", "do ".repeat(n), "end ".repeat(n));
        let err = unknown_globals(&blocks, KNOWN).unwrap_err();
        assert!(err.starts_with("line 1: nesting deeper than"), "{err}");
        let parens = format!("x = {}1{}", "(".repeat(10 * n), ")".repeat(10 * n));
        assert!(unknown_globals(&parens, KNOWN).is_err());
    }

    #[test]
    fn deep_but_allowed_nesting_works_on_a_small_caller_stack() {
        // 200 levels is about Lua's own limit; the caller's 256 KiB stack would not
        // be enough for the parser on its own.
        let n = 200;
        let src = format!(
            "{}\nprint(missing)\n{}",
            "do local t = { function() ".repeat(n / 2),
            "end } end ".repeat(n / 2)
        );
        let found = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || unknown_globals(&src, KNOWN))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
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
