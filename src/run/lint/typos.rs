//! Misspelt API names that only fail when their line runs: `cache.clera(…)`,
//! `here:exce(…)`, `box.nmae`. Lua finds them mid-run, after earlier steps changed
//! things; this finds them in the source, before any step runs.
//!
//! The file is parsed (`typos/syntax.rs`: only what this walk reads) and walked with its
//! scopes, so a name means what Lua would make of it: a local `cache` or `target`
//! shadows the global, and a field of a user table is never looked at. Only values whose
//! shape is certain are checked:
//! - an API table of the sandbox (`cache`, `venv`, `string`, …) read through its global,
//!   against its keys;
//! - a module `require("runbook.NAME")` bound to a local, against its exports;
//! - a target handle: what `target()`, `ssh()` (and `t:pct()`, … on a handle) return,
//!   the items of `targets()` in `ipairs` or `parallel`, and a local holding one; its
//!   methods and fields.
//!
//! A local assigned again anywhere in the file (`box = other`) is no longer known to hold
//! what it was declared with; a global the file assigns is no longer the sandbox's; a key
//! the file stores into a table (`function text.pad()`) is one of its keys. A false report
//! stops a correct runbook, so where in doubt nothing is said.
//!
//! What is known comes from the caller ([`Known`]): the engine reads it from the live VM
//! and the API reference (`typos/known.rs`), never from a list written here.

use std::collections::{BTreeSet, HashMap, HashSet};
use syntax::{Args, Ast, BinOp, Block, BodyId, Expr, Field, Name, Prefix, Span, Stmt, Suffix};

mod known;
mod syntax;
pub use known::{api_functions, api_tables, Known};

/// One misspelt name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typo {
    /// 1-based line of the name.
    pub line: usize,
    /// What was written, as a reader finds it: `cache.clera`, `here:exce`, `box.nmae`.
    pub written: String,
    /// Why it is unknown: `the API table 'cache' has no 'clera'`.
    pub why: String,
    /// The closest known name, written the same way.
    pub suggestion: Option<String>,
}

impl std::fmt::Display for Typo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown '{}': {}", self.written, self.why)?;
        if let Some(s) = &self.suggestion {
            write!(f, "; did you mean '{s}'?")?;
        }
        Ok(())
    }
}

/// Parses `source` and lists its misspelt API names, by line. `Err` is the parser's
/// message when it cannot read the file (the caller decides what that means: Lua's own
/// compiler has the last word on syntax).
pub fn find(source: &str, known: &Known) -> Result<Vec<Typo>, String> {
    // Pass one learns what the file assigns, and reports as if it assigned nothing; pass
    // two, knowing it, reports. What is learnt only changes what a walk makes of names
    // through a local that held something known and is assigned again, a global the file
    // assigns, or a key it stores: with none of them, pass two would walk as pass one
    // did, and report what it reported (and the file is read once).
    let first = walk(source, known, Learnt::default())?;
    let mut found = if first.learnt_changes_nothing() {
        first.found
    } else {
        walk(source, known, first.learnt)?.found
    };
    found.sort_by_key(|t| t.line);
    found.dedup();
    Ok(found)
}

/// One pass over `source`, a top-level statement at a time (what is parsed is held for
/// one statement, not the whole file), knowing `learnt`.
fn walk<'k, 's>(
    source: &'s str,
    known: &'k Known,
    learnt: Learnt<'s>,
) -> Result<Walker<'s, 'k, 's>, String> {
    let mut file = syntax::TopLevels::new(source)?;
    let mut idle = Walker::new(Ast::empty(), known, Some(learnt));
    // The top level is a block: its locals are in a scope of their own.
    idle.open();
    while let Some(top) = file.next()? {
        let mut w = idle.over(file.ast());
        match &top {
            syntax::TopLevel::Stmt(stmt) => w.stmt(stmt),
            syntax::TopLevel::Return(exprs) => {
                for e in file.ast().exprs(*exprs) {
                    w.expr(e);
                }
            }
        }
        idle = w.over(Ast::empty());
        file.clear();
    }
    idle.close();
    Ok(idle)
}

/// What the file does to names, anywhere in it.
#[derive(Debug, Default, Clone)]
struct Learnt<'s> {
    /// Locals (by declaration order) assigned after their declaration.
    reassigned: HashSet<usize>,
    /// Globals the file assigns.
    globals: HashSet<&'s str>,
    /// Keys the file stores into an API table or stdlib module, by its name.
    stored: HashMap<&'s str, HashSet<&'s str>>,
}

/// What an expression is known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind<'s> {
    Unknown,
    /// A global the file never assigns: a function or table of the sandbox, or nothing.
    Global(&'s str),
    Module(&'s str),
    Target,
    TargetList,
}

struct Binding<'s> {
    name: &'s str,
    id: usize,
    kind: Kind<'s>,
}

struct Walker<'a, 'k, 's> {
    ast: &'a Ast<'s>,
    known: &'k Known,
    /// None in the first pass (nothing is reported then).
    learnt_before: Option<Learnt<'s>>,
    learnt: Learnt<'s>,
    /// The locals in scope, innermost last (a later one of the same name shadows), and
    /// where each open scope starts in it.
    bindings: Vec<Binding<'s>>,
    scopes: Vec<usize>,
    next_id: usize,
    /// By declaration (`Binding::id`): whether the local was declared holding something
    /// known, which its being assigned again would change.
    held_known: Vec<bool>,
    found: Vec<Typo>,
}

/// The text of a plain string literal (`"runbook.text"`), escapes left as written.
fn literal<'s>(ast: &Ast<'s>, e: &Expr<'s>) -> Option<&'s str> {
    match e {
        Expr::Str(s) => Some(s),
        Expr::Paren(e) => literal(ast, ast.expr(*e)),
        _ => None,
    }
}

/// How a reader sees `prefix` and `suffixes`: `here`, `target(…):pct(…)`, `(…).x[…]`.
/// Made only for a report.
fn shown(prefix: &Prefix, suffixes: &[Suffix]) -> String {
    let mut out = match prefix {
        Prefix::Name(n) => n.text.to_string(),
        Prefix::Paren(_) => String::from("(…)"),
    };
    for s in suffixes {
        match s {
            Suffix::Dot(n) => {
                out.push('.');
                out.push_str(n.text);
            }
            Suffix::Index(_) => out.push_str("[…]"),
            Suffix::Method(n, _) => {
                out.push(':');
                out.push_str(n.text);
                out.push_str("(…)");
            }
            Suffix::Call(_) => out.push_str("(…)"),
        }
    }
    out
}

impl<'a, 'k, 's> Walker<'a, 'k, 's> {
    /// This walk, now over the nodes in `ast`.
    fn over<'b>(self, ast: &'b Ast<'s>) -> Walker<'b, 'k, 's> {
        Walker {
            ast,
            known: self.known,
            learnt_before: self.learnt_before,
            learnt: self.learnt,
            bindings: self.bindings,
            scopes: self.scopes,
            next_id: self.next_id,
            held_known: self.held_known,
            found: self.found,
        }
    }

    fn new(ast: &'a Ast<'s>, known: &'k Known, learnt_before: Option<Learnt<'s>>) -> Self {
        Walker {
            ast,
            known,
            learnt_before,
            learnt: Learnt::default(),
            bindings: Vec::new(),
            scopes: Vec::new(),
            next_id: 0,
            held_known: Vec::new(),
            found: Vec::new(),
        }
    }

    fn open(&mut self) {
        self.scopes.push(self.bindings.len());
    }

    fn close(&mut self) {
        let start = self.scopes.pop().expect("a scope is open");
        self.bindings.truncate(start);
    }

    fn declare(&mut self, name: &Name<'s>, kind: Kind<'s>) {
        let id = self.next_id;
        self.next_id += 1;
        let kind = match &self.learnt_before {
            Some(l) if l.reassigned.contains(&id) => Kind::Unknown,
            _ => kind,
        };
        self.held_known.push(kind != Kind::Unknown);
        self.bindings.push(Binding {
            name: name.text,
            id,
            kind,
        });
    }

    /// Whether what this walk learnt would change nothing in a walk that knew it (see
    /// `find`).
    fn learnt_changes_nothing(&self) -> bool {
        let l = &self.learnt;
        l.globals.is_empty()
            && l.stored.is_empty()
            && l.reassigned
                .iter()
                .all(|id| !self.held_known.get(*id).copied().unwrap_or(false))
    }

    fn lookup(&self, name: &str) -> Option<&Binding<'s>> {
        self.bindings.iter().rev().find(|b| b.name == name)
    }

    fn resolve(&self, name: &Name<'s>) -> Kind<'s> {
        match self.lookup(name.text) {
            Some(b) => b.kind,
            None => match &self.learnt_before {
                Some(l) if l.globals.contains(name.text) => Kind::Unknown,
                _ => Kind::Global(name.text),
            },
        }
    }

    /// The name written to (`x = …`, `function x()`): a local is reassigned, a global
    /// assigned.
    fn assign_name(&mut self, name: &Name<'s>) {
        match self.lookup(name.text) {
            Some(b) => {
                let id = b.id;
                self.learnt.reassigned.insert(id);
            }
            None => {
                self.learnt.globals.insert(name.text);
            }
        }
    }

    /// `base.key = …` / `function base.key()`: a key the file gives a known table.
    fn store(&mut self, base: &Kind<'s>, key: &'s str) {
        if let Some(name) = self.table_name(base) {
            self.learnt.stored.entry(name).or_default().insert(key);
        }
    }

    /// The API table or module `kind` is and its keys (without those the file stores:
    /// `stored`). None in the first pass.
    fn keys_of(&self, kind: &Kind<'s>) -> Option<(&'s str, &'k BTreeSet<String>)> {
        let (name, keys) = match kind {
            Kind::Global(g) => (*g, self.known.tables.get(*g)?),
            Kind::Module(m) => (*m, self.known.modules.get(*m)?),
            _ => return None,
        };
        self.learnt_before.as_ref()?;
        Some((name, keys))
    }

    /// The keys the file stores into table `name`.
    fn stored(&self, name: &str) -> Option<&HashSet<&'s str>> {
        self.learnt_before.as_ref()?.stored.get(name)
    }

    fn table_name(&self, kind: &Kind<'s>) -> Option<&'s str> {
        match kind {
            Kind::Global(g) if self.known.tables.contains_key(*g) => Some(g),
            Kind::Module(m) if self.known.modules.contains_key(*m) => Some(m),
            _ => None,
        }
    }

    fn report(&mut self, line: usize, written: String, why: String, s: Option<String>) {
        if self.learnt_before.is_some() {
            self.found.push(Typo {
                line,
                written,
                why,
                suggestion: s,
            });
        }
    }

    /// `base.key` read (`method` for `base:key(…)`): checked where `base` is known.
    /// `shown` is how `base` reads.
    fn index(
        &mut self,
        base: &Kind<'s>,
        shown: impl Fn() -> String,
        key: &Name<'s>,
        method: bool,
    ) -> Kind<'s> {
        let k = key.text;
        let sep = if method { ":" } else { "." };
        if let Some((name, keys)) = self.keys_of(base) {
            let stored = self.stored(name);
            if !keys.contains(k) && !stored.is_some_and(|s| s.contains(k)) {
                let mut all: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
                all.extend(stored.into_iter().flatten().copied());
                let shown = shown();
                let s = crate::base::suggest::closest(k, all.iter().copied())
                    .map(|c| format!("{shown}{sep}{c}"));
                let why = match base {
                    _ if name == "params" => format!("the runbook declares no param '{k}'"),
                    Kind::Module(m) => format!("module '{m}' has no '{k}'"),
                    _ => format!("the API table '{name}' has no '{k}'"),
                };
                self.report(key.line, format!("{shown}{sep}{k}"), why, s);
            }
            return Kind::Unknown;
        }
        if *base == Kind::Target {
            let methods = &self.known.target_methods;
            let fields = &self.known.target_fields;
            // A method is also a field (`t.exec` is the function); a field is no method.
            let ok = methods.contains(k) || (!method && fields.contains(k));
            if !ok && self.learnt_before.is_none() {
                return Kind::Unknown;
            }
            if !ok {
                let candidates: Vec<&str> = if method {
                    methods.iter().map(String::as_str).collect()
                } else {
                    fields.iter().chain(methods).map(String::as_str).collect()
                };
                let shown = shown();
                let s = crate::base::suggest::closest(k, candidates)
                    .map(|c| format!("{shown}{sep}{c}"));
                let why = if method {
                    format!("a target handle has no method '{k}'")
                } else {
                    format!("a target handle has no field or method '{k}'")
                };
                self.report(key.line, format!("{shown}{sep}{k}"), why, s);
                return Kind::Unknown;
            }
            if method && self.known.target_derivers.contains(k) {
                return Kind::Target;
            }
        }
        Kind::Unknown
    }

    /// A block in a scope of its own, `params` declared in it first.
    fn block<'p>(
        &mut self,
        block: &Block,
        params: impl IntoIterator<Item = (&'p Name<'s>, Kind<'s>)>,
    ) where
        's: 'p,
    {
        self.open();
        for (p, k) in params {
            self.declare(p, k);
        }
        self.stmts(block);
        self.close();
    }

    /// A block's statements in the current scope (`repeat … until` needs it open).
    fn stmts(&mut self, block: &Block) {
        let ast = self.ast;
        for stmt in ast.stmts(block.stmts) {
            self.stmt(stmt);
        }
        if let Some(r) = block.ret {
            for e in ast.exprs(r) {
                self.expr(e);
            }
        }
    }

    fn function(&mut self, body: BodyId, method: bool, hint: Option<Kind<'s>>) {
        let ast = self.ast;
        let body = ast.body(body);
        // `function M:f()` has a `self` no token of the file spells: it shadows a global
        // `self` all the same.
        self.open();
        if method {
            self.bindings.push(Binding {
                name: "self",
                id: usize::MAX,
                kind: Kind::Unknown,
            });
        }
        // The body's block, its parameters declared first (`hint`: the first one's kind).
        self.open();
        for (i, p) in ast.names(body.params).iter().enumerate() {
            let kind = match hint {
                Some(k) if i == 0 => k,
                _ => Kind::Unknown,
            };
            self.declare(p, kind);
        }
        self.stmts(&body.block);
        self.close();
        self.close();
    }

    fn stmt(&mut self, stmt: &Stmt<'s>) {
        let ast = self.ast;
        match stmt {
            Stmt::Local(names, exprs) => {
                let (names, exprs) = (ast.names(*names), ast.exprs(*exprs));
                // The values first: a local is not in scope in its own declaration.
                if let ([name], [e]) = (names, exprs) {
                    let kind = self.expr(e);
                    self.declare(name, kind);
                } else {
                    let kinds: Vec<Kind> = exprs.iter().map(|e| self.expr(e)).collect();
                    for (i, name) in names.iter().enumerate() {
                        self.declare(name, kinds.get(i).copied().unwrap_or(Kind::Unknown));
                    }
                }
            }
            Stmt::LocalFunction(name, body) => {
                self.declare(name, Kind::Unknown);
                self.function(*body, false, None);
            }
            Stmt::Function(names, method, body) => {
                let names = ast.names(*names);
                if names.len() == 1 && method.is_none() {
                    self.assign_name(&names[0]);
                } else if let Some(first) = names.first() {
                    // `function text.pad()`, `function M:m()`: the first key is stored
                    // into the table itself (later ones into what it holds).
                    let kind = self.resolve(first);
                    if let Some(k) = names.get(1).or(method.as_ref()) {
                        self.store(&kind, k.text);
                    }
                }
                self.function(*body, method.is_some(), None);
            }
            Stmt::Assign(vars, exprs) => {
                for var in ast.exprs(*vars) {
                    match var {
                        Expr::Name(n) => self.assign_name(n),
                        Expr::Suffixed(prefix, suffixes) => {
                            let (last, init) = ast
                                .suffixes(*suffixes)
                                .split_last()
                                .expect("a var has a suffix");
                            let base = self.suffixed(prefix, init);
                            match last {
                                Suffix::Dot(name) => self.store(&base, name.text),
                                Suffix::Index(expression) => {
                                    if let Some(k) = literal(ast, expression) {
                                        self.store(&base, k);
                                    }
                                    self.expr(expression);
                                }
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                for e in ast.exprs(*exprs) {
                    self.expr(e);
                }
            }
            Stmt::Call(prefix, suffixes) => {
                self.suffixed(prefix, ast.suffixes(*suffixes));
            }
            Stmt::Do(b) => self.block(b, []),
            Stmt::While(cond, b) => {
                self.expr(cond);
                self.block(b, []);
            }
            Stmt::Repeat(b, until) => {
                self.open();
                self.stmts(b);
                self.expr(until);
                self.close();
            }
            Stmt::If(arms, otherwise) => {
                for (cond, b) in ast.arms(*arms) {
                    self.expr(cond);
                    self.block(b, []);
                }
                if let Some(b) = otherwise {
                    self.block(b, []);
                }
            }
            Stmt::NumericFor(var, start, end, step, b) => {
                self.expr(ast.expr(*start));
                self.expr(ast.expr(*end));
                if let Some(s) = step {
                    self.expr(ast.expr(*s));
                }
                self.block(b, [(var, Kind::Unknown)]);
            }
            Stmt::GenericFor(names, exprs, b) => {
                let exprs = ast.exprs(*exprs);
                let mut items = Kind::Unknown;
                // `for _, t in ipairs(targets(…))`: the values are handles.
                match exprs {
                    [Expr::Suffixed(prefix, suffixes)] if ast.is_call(*suffixes) => {
                        let suffixes = ast.suffixes(*suffixes);
                        let iter = match prefix {
                            Prefix::Name(n) => self.resolve(n),
                            _ => Kind::Unknown,
                        };
                        if let (Kind::Global(g), [Suffix::Call(args)]) = (iter, suffixes) {
                            let first = self.args(&Kind::Unknown, args);
                            if (g == "ipairs" || g == "pairs") && first == Kind::TargetList {
                                items = Kind::Target;
                            }
                        } else {
                            self.suffixed(prefix, suffixes);
                        }
                    }
                    _ => {
                        for e in exprs {
                            self.expr(e);
                        }
                    }
                }
                let params = ast
                    .names(*names)
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n, if i == 1 { items } else { Kind::Unknown }));
                self.block(b, params);
            }
            Stmt::Other => {}
        }
    }

    fn expr(&mut self, e: &Expr<'s>) -> Kind<'s> {
        let ast = self.ast;
        match e {
            Expr::Binary(lhs, op, rhs) => {
                let l = self.expr(ast.expr(*lhs));
                let r = self.expr(ast.expr(*rhs));
                match op {
                    // `cond and handle`: a handle or false, which has no methods either.
                    BinOp::And => r,
                    BinOp::Or if l == r => l,
                    _ => Kind::Unknown,
                }
            }
            Expr::Paren(e) => self.expr(ast.expr(*e)),
            Expr::Unary(e) => {
                self.expr(ast.expr(*e));
                Kind::Unknown
            }
            Expr::Function(f) => {
                self.function(*f, false, None);
                Kind::Unknown
            }
            Expr::Table(t) => {
                self.table(*t);
                Kind::Unknown
            }
            Expr::Name(n) => self.resolve(n),
            Expr::Suffixed(prefix, suffixes) => self.suffixed(prefix, ast.suffixes(*suffixes)),
            Expr::Str(_) | Expr::Other => Kind::Unknown,
        }
    }

    /// A table constructor's fields (`Ast::fields`).
    fn table(&mut self, fields: Span) {
        for f in self.ast.fields(fields) {
            match f {
                Field::Bracket(_, key, value) => {
                    self.expr(key);
                    self.expr(value);
                }
                Field::Named(_, value) | Field::Positional(value) => {
                    self.expr(value);
                }
            }
        }
    }

    /// Walks a call's arguments and says what the first is; `callee` is what is called
    /// (for `parallel(targets(…), function(t) … end)`, whose function gets handles).
    fn args(&mut self, callee: &Kind<'s>, args: &Args<'s>) -> Kind<'s> {
        match args {
            Args::Paren(list) => {
                let mut first = Kind::Unknown;
                for (i, a) in self.ast.exprs(*list).iter().enumerate() {
                    let parallel_fn =
                        i == 1 && *callee == Kind::Global("parallel") && first == Kind::TargetList;
                    match a {
                        Expr::Function(f) if parallel_fn => {
                            self.function(*f, false, Some(Kind::Target));
                        }
                        _ => {
                            let k = self.expr(a);
                            if i == 0 {
                                first = k;
                            }
                        }
                    }
                }
                first
            }
            Args::Table(t) => {
                self.table(*t);
                Kind::Unknown
            }
            Args::Str(_) => Kind::Unknown,
        }
    }

    /// `prefix` followed by `.key`, `[expr]`, `(args)`, `:m(args)`: what it is.
    fn suffixed(&mut self, prefix: &Prefix<'s>, suffixes: &[Suffix<'s>]) -> Kind<'s> {
        let mut kind = match prefix {
            Prefix::Name(n) => self.resolve(n),
            Prefix::Paren(e) => self.expr(self.ast.expr(*e)),
        };
        // What a call here would call, by the name its options are known under: a
        // global function of the sandbox (`step`), or an API table's (`cache.clear`).
        let mut callee: Option<(&'s str, Option<&'s str>)> = match kind {
            Kind::Global(g) if !self.known.tables.contains_key(g) => Some((g, None)),
            _ => None,
        };
        for (i, s) in suffixes.iter().enumerate() {
            let before = || shown(prefix, &suffixes[..i]);
            let next_callee = match (s, kind) {
                (Suffix::Dot(name), Kind::Global(g)) if self.known.tables.contains_key(g) => {
                    Some((g, Some(name.text)))
                }
                _ => None,
            };
            kind = match s {
                Suffix::Dot(name) => self.index(&kind, before, name, false),
                Suffix::Index(expression) => {
                    self.expr(expression);
                    Kind::Unknown
                }
                Suffix::Method(name, args) => {
                    if kind == Kind::Target {
                        let called = || format!("{}:{}", before(), name.text);
                        self.options_of((":", name.text), called, args);
                    }
                    let k = self.index(&kind, before, name, true);
                    self.args(&Kind::Unknown, args);
                    k
                }
                Suffix::Call(args) => {
                    match callee {
                        Some((g, Some(key))) => self.options_of((g, key), before, args),
                        Some((g, None)) => self.options_of(("", g), before, args),
                        None => {}
                    }
                    self.args(&kind, args);
                    self.call_result(&kind, args)
                }
            };
            callee = next_callee;
        }
        kind
    }

    /// A call of `callee` (shown as `called`): each key of a table written in the call
    /// for an options argument must be one of its options. Only keys written as names or
    /// string literals are checked; a table built elsewhere is not looked at. `callee` is
    /// the name its options are known under in two parts, joined by a `.` unless the
    /// first is empty or `:` (`step`, `cache.clear`, `:exec`).
    fn options_of(&mut self, callee: (&str, &str), called: impl Fn() -> String, args: &Args<'s>) {
        // Only reports: nothing to learn here in the first pass.
        if self.learnt_before.is_none() {
            return;
        }
        let Some(options) = self.options(callee) else {
            return;
        };
        let ast = self.ast;
        let Args::Paren(list) = args else {
            return;
        };
        let list = ast.exprs(*list);
        let mut found = Vec::new();
        for (index, keys) in options {
            let Some(Expr::Table(t)) = list.get(*index) else {
                continue;
            };
            for f in ast.fields(*t) {
                let (at, key) = match f {
                    Field::Named(key, _) => (key.line, key.text),
                    // A key with an escape (`"read\95only"`) is left alone: the
                    // parser gives it as written, not as Lua reads it.
                    Field::Bracket(at, key, _) => match literal(ast, key) {
                        Some(k) if !k.contains('\\') => (*at, k),
                        _ => continue,
                    },
                    Field::Positional(_) => continue,
                };
                if !keys.contains(key) {
                    let s = crate::base::suggest::closest(key, keys.iter().map(String::as_str))
                        .map(str::to_string);
                    found.push((at, key, s));
                }
            }
        }
        if found.is_empty() {
            return;
        }
        let called = called();
        for (at, key, s) in found {
            self.report(
                at,
                key.to_string(),
                format!("{called}() takes no option '{key}'"),
                s,
            );
        }
    }

    /// The options tables of `callee` (see `options_of`), named without a `String` made
    /// for each call.
    fn options(&self, (first, second): (&str, &str)) -> Option<&'k Vec<(usize, BTreeSet<String>)>> {
        let sep = match first {
            "" | ":" => "",
            _ => ".",
        };
        let len = first.len() + sep.len() + second.len();
        // Every callee with options is a short name: no buffer, no lookup.
        let mut buf = [0u8; 64];
        let out = buf.get_mut(..len)?;
        let (a, rest) = out.split_at_mut(first.len());
        let (b, c) = rest.split_at_mut(sep.len());
        a.copy_from_slice(first.as_bytes());
        b.copy_from_slice(sep.as_bytes());
        c.copy_from_slice(second.as_bytes());
        self.known.options.get(std::str::from_utf8(out).ok()?)
    }

    fn call_result(&self, callee: &Kind<'s>, args: &Args<'s>) -> Kind<'s> {
        let Kind::Global(g) = *callee else {
            return Kind::Unknown;
        };
        if self.known.target_makers.contains(g) {
            return Kind::Target;
        }
        if self.known.target_lists.contains(g) {
            return Kind::TargetList;
        }
        if g == "require" {
            let name = match args {
                Args::Paren(list) => match self.ast.exprs(*list) {
                    [only] => literal(self.ast, only),
                    _ => None,
                },
                Args::Str(s) => Some(*s),
                _ => None,
            };
            if let Some(m) = name.filter(|m| self.known.modules.contains_key(*m)) {
                return Kind::Module(m);
            }
        }
        Kind::Unknown
    }
}

#[cfg(test)]
mod tests;
