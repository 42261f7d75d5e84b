//! Misspelt API names that only fail when their line runs: `cache.clera(…)`,
//! `here:exce(…)`, `box.nmae`. Lua finds them mid-run, after earlier steps changed
//! things; this finds them in the source, before any step runs.
//!
//! The file is parsed (full_moon, the parser `runbook fmt` formats with) and walked with
//! its scopes, so a name means what Lua would make of it: a local `cache` or `target`
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

use full_moon::ast::{
    self, BinOp, Block, Call, Expression, Field, FunctionArgs, FunctionBody, Index, LastStmt,
    Parameter, Prefix, Stmt, Suffix, Var,
};
use full_moon::tokenizer::{TokenReference, TokenType};
use std::collections::{BTreeSet, HashMap, HashSet};

mod known;
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
    let ast = full_moon::parse_fallible(source, full_moon::LuaVersion::lua54())
        .into_result()
        .map_err(|errors| {
            errors
                .first()
                .map(|e| format!("line {}: {}", e.range().0.line(), e.error_message()))
                .unwrap_or_default()
        })?;
    // Pass one learns what the file assigns; pass two, knowing it, reports.
    let mut first = Walker::new(known, None);
    first.block(ast.nodes(), &[]);
    let learnt = first.learnt;
    let mut second = Walker::new(known, Some(learnt));
    second.block(ast.nodes(), &[]);
    let mut found = second.found;
    found.sort_by_key(|t| t.line);
    found.dedup();
    Ok(found)
}

/// What the file does to names, anywhere in it.
#[derive(Debug, Default, Clone)]
struct Learnt {
    /// Locals (by declaration order) assigned after their declaration.
    reassigned: HashSet<usize>,
    /// Globals the file assigns.
    globals: HashSet<String>,
    /// Keys the file stores into an API table or stdlib module, by its name.
    stored: HashMap<String, HashSet<String>>,
}

/// What an expression is known to be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Unknown,
    /// A global the file never assigns: a function or table of the sandbox, or nothing.
    Global(String),
    Module(String),
    Target,
    TargetList,
}

struct Binding {
    id: usize,
    kind: Kind,
}

struct Walker<'k> {
    known: &'k Known,
    /// None in the first pass (nothing is reported then).
    learnt_before: Option<Learnt>,
    learnt: Learnt,
    scopes: Vec<HashMap<String, Binding>>,
    next_id: usize,
    found: Vec<Typo>,
}

fn ident(t: &TokenReference) -> String {
    match t.token_type() {
        TokenType::Identifier { identifier } => identifier.to_string(),
        _ => t.token().to_string(),
    }
}

fn line(t: &TokenReference) -> usize {
    t.start_position().line()
}

/// The text of a plain string literal (`"runbook.text"`), escapes left as written.
fn literal(e: &Expression) -> Option<String> {
    match e {
        Expression::String(t) => match t.token_type() {
            TokenType::StringLiteral { literal, .. } => Some(literal.to_string()),
            _ => None,
        },
        Expression::Parentheses { expression, .. } => literal(expression),
        _ => None,
    }
}

impl<'k> Walker<'k> {
    fn new(known: &'k Known, learnt_before: Option<Learnt>) -> Self {
        Walker {
            known,
            learnt_before,
            learnt: Learnt::default(),
            scopes: vec![HashMap::new()],
            next_id: 0,
            found: Vec::new(),
        }
    }

    fn declare(&mut self, name: &TokenReference, kind: Kind) {
        let id = self.next_id;
        self.next_id += 1;
        let kind = match &self.learnt_before {
            Some(l) if l.reassigned.contains(&id) => Kind::Unknown,
            _ => kind,
        };
        self.scopes
            .last_mut()
            .expect("a scope is open")
            .insert(ident(name), Binding { id, kind });
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn resolve(&self, name: &TokenReference) -> Kind {
        let name = ident(name);
        match self.lookup(&name) {
            Some(b) => b.kind.clone(),
            None => match &self.learnt_before {
                Some(l) if l.globals.contains(&name) => Kind::Unknown,
                _ => Kind::Global(name),
            },
        }
    }

    /// The name written to (`x = …`, `function x()`): a local is reassigned, a global
    /// assigned.
    fn assign_name(&mut self, name: &TokenReference) {
        let n = ident(name);
        match self.lookup(&n) {
            Some(b) => {
                let id = b.id;
                self.learnt.reassigned.insert(id);
            }
            None => {
                self.learnt.globals.insert(n);
            }
        }
    }

    /// `base.key = …` / `function base.key()`: a key the file gives a known table.
    fn store(&mut self, base: &Kind, key: &str) {
        if let Some(name) = self.table_name(base) {
            self.learnt
                .stored
                .entry(name)
                .or_default()
                .insert(key.to_string());
        }
    }

    /// The API table or module `kind` is, and its keys (those the file stores included).
    fn keys_of(&self, kind: &Kind) -> Option<(String, String, BTreeSet<String>)> {
        let (name, of, keys) = match kind {
            Kind::Global(g) => (
                g.clone(),
                format!("the API table '{g}'"),
                self.known.tables.get(g)?,
            ),
            Kind::Module(m) => (
                m.clone(),
                format!("module '{m}'"),
                self.known.modules.get(m)?,
            ),
            _ => return None,
        };
        let mut keys = keys.clone();
        let stored = self.learnt_before.as_ref()?.stored.get(&name);
        keys.extend(stored.into_iter().flatten().cloned());
        Some((name, of, keys))
    }

    fn table_name(&self, kind: &Kind) -> Option<String> {
        match kind {
            Kind::Global(g) if self.known.tables.contains_key(g) => Some(g.clone()),
            Kind::Module(m) if self.known.modules.contains_key(m) => Some(m.clone()),
            _ => None,
        }
    }

    fn report(&mut self, at: &TokenReference, written: String, why: String, s: Option<String>) {
        if self.learnt_before.is_some() {
            self.found.push(Typo {
                line: line(at),
                written,
                why,
                suggestion: s,
            });
        }
    }

    /// `base.key` read (`method` for `base:key(…)`): checked where `base` is known.
    fn index(&mut self, base: &Kind, shown: &str, key: &TokenReference, method: bool) -> Kind {
        let k = ident(key);
        let sep = if method { ":" } else { "." };
        if let Some((name, of, keys)) = self.keys_of(base) {
            if !keys.contains(&k) {
                let s = crate::base::suggest::closest(&k, keys.iter().map(String::as_str))
                    .map(|c| format!("{shown}{sep}{c}"));
                let why = match name.as_str() {
                    "params" => format!("the runbook declares no param '{k}'"),
                    _ => format!("{of} has no '{k}'"),
                };
                self.report(key, format!("{shown}{sep}{k}"), why, s);
            }
            return Kind::Unknown;
        }
        if *base == Kind::Target {
            let methods = &self.known.target_methods;
            let fields = &self.known.target_fields;
            // A method is also a field (`t.exec` is the function); a field is no method.
            let ok = methods.contains(&k) || (!method && fields.contains(&k));
            if !ok {
                let candidates: Vec<&str> = if method {
                    methods.iter().map(String::as_str).collect()
                } else {
                    fields.iter().chain(methods).map(String::as_str).collect()
                };
                let s = crate::base::suggest::closest(&k, candidates)
                    .map(|c| format!("{shown}{sep}{c}"));
                let why = if method {
                    format!("a target handle has no method '{k}'")
                } else {
                    format!("a target handle has no field or method '{k}'")
                };
                self.report(key, format!("{shown}{sep}{k}"), why, s);
                return Kind::Unknown;
            }
            if method && self.known.target_derivers.contains(&k) {
                return Kind::Target;
            }
        }
        Kind::Unknown
    }

    fn block(&mut self, block: &Block, params: &[(&TokenReference, Kind)]) {
        self.scopes.push(HashMap::new());
        for (p, k) in params {
            self.declare(p, k.clone());
        }
        self.stmts(block);
        self.scopes.pop();
    }

    /// A block's statements in the current scope (`repeat … until` needs it open).
    fn stmts(&mut self, block: &Block) {
        for stmt in block.stmts() {
            self.stmt(stmt);
        }
        if let Some(LastStmt::Return(r)) = block.last_stmt() {
            for e in r.returns().iter() {
                self.expr(e);
            }
        }
    }

    fn function(&mut self, body: &FunctionBody, method: bool, hints: &[Kind]) {
        let mut params = Vec::new();
        for (i, p) in body.parameters().iter().enumerate() {
            if let Parameter::Name(n) = p {
                params.push((n, hints.get(i).cloned().unwrap_or(Kind::Unknown)));
            }
        }
        // `function M:f()` has a `self` no token of the file spells: it shadows a global
        // `self` all the same.
        self.scopes.push(HashMap::new());
        if method {
            let self_binding = Binding {
                id: usize::MAX,
                kind: Kind::Unknown,
            };
            self.scopes
                .last_mut()
                .expect("just pushed")
                .insert("self".into(), self_binding);
        }
        self.block(body.block(), &params);
        self.scopes.pop();
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::LocalAssignment(la) => {
                let exprs: Vec<&Expression> = la.expressions().iter().collect();
                let kinds: Vec<Kind> = exprs.iter().map(|e| self.expr(e)).collect();
                for (i, name) in la.names().iter().enumerate() {
                    self.declare(name, kinds.get(i).cloned().unwrap_or(Kind::Unknown));
                }
            }
            Stmt::LocalFunction(lf) => {
                self.declare(lf.name(), Kind::Unknown);
                self.function(lf.body(), false, &[]);
            }
            Stmt::FunctionDeclaration(fd) => {
                let names: Vec<&TokenReference> = fd.name().names().iter().collect();
                let method = fd.name().method_name();
                if names.len() == 1 && method.is_none() {
                    self.assign_name(names[0]);
                } else if let Some(first) = names.first() {
                    // `function text.pad()`, `function M:m()`: the first key is stored
                    // into the table itself (later ones into what it holds).
                    let kind = self.resolve(first);
                    if let Some(k) = names.get(1).copied().or(method) {
                        self.store(&kind, &ident(k));
                    }
                }
                self.function(fd.body(), method.is_some(), &[]);
            }
            Stmt::Assignment(a) => {
                for var in a.variables().iter() {
                    match var {
                        Var::Name(n) => self.assign_name(n),
                        Var::Expression(ve) => {
                            let suffixes: Vec<&Suffix> = ve.suffixes().collect();
                            let (last, init) = suffixes.split_last().expect("a var has a suffix");
                            let base = self.suffixed(ve.prefix(), init);
                            match last {
                                Suffix::Index(Index::Dot { name, .. }) => {
                                    self.store(&base, &ident(name))
                                }
                                Suffix::Index(Index::Brackets { expression, .. }) => {
                                    if let Some(k) = literal(expression) {
                                        self.store(&base, &k);
                                    }
                                    self.expr(expression);
                                }
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                for e in a.expressions().iter() {
                    self.expr(e);
                }
            }
            Stmt::FunctionCall(fc) => {
                let suffixes: Vec<&Suffix> = fc.suffixes().collect();
                self.suffixed(fc.prefix(), &suffixes);
            }
            Stmt::Do(d) => self.block(d.block(), &[]),
            Stmt::While(w) => {
                self.expr(w.condition());
                self.block(w.block(), &[]);
            }
            Stmt::Repeat(r) => {
                self.scopes.push(HashMap::new());
                self.stmts(r.block());
                self.expr(r.until());
                self.scopes.pop();
            }
            Stmt::If(i) => {
                self.expr(i.condition());
                self.block(i.block(), &[]);
                for ei in i.else_if().into_iter().flatten() {
                    self.expr(ei.condition());
                    self.block(ei.block(), &[]);
                }
                if let Some(b) = i.else_block() {
                    self.block(b, &[]);
                }
            }
            Stmt::NumericFor(f) => {
                self.expr(f.start());
                self.expr(f.end());
                if let Some(s) = f.step() {
                    self.expr(s);
                }
                self.block(f.block(), &[(f.index_variable(), Kind::Unknown)]);
            }
            Stmt::GenericFor(f) => {
                let exprs: Vec<&Expression> = f.expressions().iter().collect();
                let mut items = Kind::Unknown;
                // `for _, t in ipairs(targets(…))`: the values are handles.
                if let [Expression::FunctionCall(fc)] = exprs.as_slice() {
                    let suffixes: Vec<&Suffix> = fc.suffixes().collect();
                    let iter = match fc.prefix() {
                        Prefix::Name(n) => self.resolve(n),
                        _ => Kind::Unknown,
                    };
                    if let (Kind::Global(g), [Suffix::Call(Call::AnonymousCall(args))]) =
                        (&iter, suffixes.as_slice())
                    {
                        let kinds = self.args(&Kind::Unknown, args);
                        if (g == "ipairs" || g == "pairs")
                            && kinds.first() == Some(&Kind::TargetList)
                        {
                            items = Kind::Target;
                        }
                    } else {
                        self.suffixed(fc.prefix(), &suffixes);
                    }
                } else {
                    for e in &exprs {
                        self.expr(e);
                    }
                }
                let names: Vec<&TokenReference> = f.names().iter().collect();
                let params: Vec<(&TokenReference, Kind)> = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (*n, if i == 1 { items.clone() } else { Kind::Unknown }))
                    .collect();
                self.block(f.block(), &params);
            }
            _ => {}
        }
    }

    fn expr(&mut self, e: &Expression) -> Kind {
        match e {
            Expression::BinaryOperator { lhs, binop, rhs } => {
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                match binop {
                    // `cond and handle`: a handle or false, which has no methods either.
                    BinOp::And(_) => r,
                    BinOp::Or(_) if l == r => l,
                    _ => Kind::Unknown,
                }
            }
            Expression::Parentheses { expression, .. } => self.expr(expression),
            Expression::UnaryOperator { expression, .. } => {
                self.expr(expression);
                Kind::Unknown
            }
            Expression::Function(f) => {
                self.function(f.body(), false, &[]);
                Kind::Unknown
            }
            Expression::FunctionCall(fc) => {
                let suffixes: Vec<&Suffix> = fc.suffixes().collect();
                self.suffixed(fc.prefix(), &suffixes)
            }
            Expression::TableConstructor(t) => {
                self.table(t);
                Kind::Unknown
            }
            Expression::Var(Var::Name(n)) => self.resolve(n),
            Expression::Var(Var::Expression(ve)) => {
                let suffixes: Vec<&Suffix> = ve.suffixes().collect();
                self.suffixed(ve.prefix(), &suffixes)
            }
            _ => Kind::Unknown,
        }
    }

    fn table(&mut self, t: &ast::TableConstructor) {
        for f in t.fields().iter() {
            match f {
                Field::ExpressionKey { key, value, .. } => {
                    self.expr(key);
                    self.expr(value);
                }
                Field::NameKey { value, .. } => {
                    self.expr(value);
                }
                Field::NoKey(v) => {
                    self.expr(v);
                }
                _ => {}
            }
        }
    }

    /// Walks a call's arguments; `callee` is what is called (for `parallel(targets(…),
    /// function(t) … end)`, whose function gets handles).
    fn args(&mut self, callee: &Kind, args: &FunctionArgs) -> Vec<Kind> {
        match args {
            FunctionArgs::Parentheses { arguments, .. } => {
                let list: Vec<&Expression> = arguments.iter().collect();
                let mut kinds = Vec::new();
                for (i, a) in list.iter().enumerate() {
                    let parallel_fn = i == 1
                        && *callee == Kind::Global("parallel".into())
                        && kinds.first() == Some(&Kind::TargetList);
                    match a {
                        Expression::Function(f) if parallel_fn => {
                            self.function(f.body(), false, &[Kind::Target]);
                            kinds.push(Kind::Unknown);
                        }
                        _ => {
                            let k = self.expr(a);
                            kinds.push(k);
                        }
                    }
                }
                kinds
            }
            FunctionArgs::TableConstructor(t) => {
                self.table(t);
                vec![Kind::Unknown]
            }
            _ => vec![Kind::Unknown],
        }
    }

    /// `prefix` followed by `.key`, `[expr]`, `(args)`, `:m(args)`: what it is.
    fn suffixed(&mut self, prefix: &Prefix, suffixes: &[&Suffix]) -> Kind {
        let (mut kind, mut shown) = match prefix {
            Prefix::Name(n) => (self.resolve(n), ident(n)),
            Prefix::Expression(e) => (self.expr(e), String::from("(…)")),
            _ => (Kind::Unknown, String::new()),
        };
        // What a call here would call, by the name its options are known under: a
        // global function of the sandbox (`step`), or an API table's (`cache.clear`).
        let mut callee = match &kind {
            Kind::Global(g) if !self.known.tables.contains_key(g) => Some(g.clone()),
            _ => None,
        };
        for s in suffixes {
            let next_callee = match (s, &kind) {
                (Suffix::Index(Index::Dot { name, .. }), Kind::Global(g))
                    if self.known.tables.contains_key(g) =>
                {
                    Some(format!("{g}.{}", ident(name)))
                }
                _ => None,
            };
            kind = match s {
                Suffix::Index(Index::Dot { name, .. }) => {
                    let k = self.index(&kind, &shown, name, false);
                    shown = format!("{shown}.{}", ident(name));
                    k
                }
                Suffix::Index(Index::Brackets { expression, .. }) => {
                    self.expr(expression);
                    shown.push_str("[…]");
                    Kind::Unknown
                }
                Suffix::Call(Call::MethodCall(mc)) => {
                    let method = ident(mc.name());
                    if kind == Kind::Target {
                        let called = format!("{shown}:{method}");
                        self.options_of(&format!(":{method}"), &called, mc.args());
                    }
                    let k = self.index(&kind, &shown, mc.name(), true);
                    self.args(&Kind::Unknown, mc.args());
                    shown = format!("{shown}:{method}(…)");
                    k
                }
                Suffix::Call(Call::AnonymousCall(args)) => {
                    if let Some(c) = &callee {
                        self.options_of(c, &shown, args);
                    }
                    let kinds = self.args(&kind, args);
                    shown.push_str("(…)");
                    self.call_result(&kind, args, &kinds)
                }
                _ => Kind::Unknown,
            };
            callee = next_callee;
        }
        kind
    }

    /// A call of `callee` (shown as `called`): each key of a table written in the call
    /// for an options argument must be one of its options. Only keys written as names or
    /// string literals are checked; a table built elsewhere is not looked at.
    fn options_of(&mut self, callee: &str, called: &str, args: &FunctionArgs) {
        let Some(options) = self.known.options.get(callee) else {
            return;
        };
        let list: Vec<&Expression> = match args {
            FunctionArgs::Parentheses { arguments, .. } => arguments.iter().collect(),
            _ => return,
        };
        let mut found = Vec::new();
        for (index, keys) in options {
            let Some(Expression::TableConstructor(t)) = list.get(*index) else {
                continue;
            };
            for f in t.fields().iter() {
                let (at, key) = match f {
                    Field::NameKey { key, .. } => (key, ident(key)),
                    // A key with an escape (`"read\95only"`) is left alone: the
                    // parser gives it as written, not as Lua reads it.
                    Field::ExpressionKey { key, brackets, .. } => match literal(key) {
                        Some(k) if !k.contains('\\') => (brackets.tokens().0, k),
                        _ => continue,
                    },
                    _ => continue,
                };
                if !keys.contains(&key) {
                    let s = crate::base::suggest::closest(&key, keys.iter().map(String::as_str))
                        .map(str::to_string);
                    found.push((at.clone(), key, s));
                }
            }
        }
        for (at, key, s) in found {
            self.report(
                &at,
                key.clone(),
                format!("{called}() takes no option '{key}'"),
                s,
            );
        }
    }

    fn call_result(&self, callee: &Kind, args: &FunctionArgs, _kinds: &[Kind]) -> Kind {
        let Kind::Global(g) = callee else {
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
                FunctionArgs::Parentheses { arguments, .. } if arguments.len() == 1 => {
                    arguments.iter().next().and_then(literal)
                }
                FunctionArgs::String(t) => literal(&Expression::String(t.clone())),
                _ => None,
            };
            if let Some(m) = name.filter(|m| self.known.modules.contains_key(m)) {
                return Kind::Module(m);
            }
        }
        Kind::Unknown
    }
}

#[cfg(test)]
mod tests;
