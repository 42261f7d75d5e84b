//! The part of a Lua 5.4 file the typo check walks, read by a parser of its own.
//!
//! Why not full_moon (the parser `runbook fmt` uses, which the check read files with
//! before): a syntax tree that keeps every token, with its whitespace and comments, made
//! the check the most of `runbook check`'s time and memory (a 1,000-step file: 80 million
//! instructions and 15 MB for the tree, against 19 million for Lua's own compile). Here
//! only what the walk looks at is kept: names with their line, string literals as
//! written, and the shape of statements and expressions, each kind of node in one vector
//! of the [`Ast`] (a node names its children by their place there: one allocation per
//! kind, not one per node, to make and to free). The file has already been compiled by
//! Lua when this runs, so this parser need not explain a syntax error: it only says where
//! it stopped.
//!
//! As full_moon read it: a line is counted at each `\n` (so a lone `\r` starts none), a
//! string literal is the text between its delimiters as written (escapes not decoded, a
//! long string's first newline kept), and a `#!` first line is skipped.

/// An expression's place in [`Ast::exprs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExprId(u32);

/// A function body's place in [`Ast::bodies`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyId(u32);

/// A list of nodes, in order, in one of the [`Ast`]'s vectors: where it starts, how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// Parsed nodes, by kind.
#[derive(Debug, Default)]
pub struct Ast<'s> {
    stmts: Vec<Stmt<'s>>,
    exprs: Vec<Expr<'s>>,
    suffixes: Vec<Suffix<'s>>,
    fields: Vec<Field<'s>>,
    names: Vec<Name<'s>>,
    bodies: Vec<FuncBody>,
    arms: Vec<(Expr<'s>, Block)>,
}

impl<'s> Ast<'s> {
    /// No nodes: what a walk is over between two statements.
    pub fn empty() -> &'static Ast<'static> {
        static EMPTY: Ast<'static> = Ast {
            stmts: Vec::new(),
            exprs: Vec::new(),
            suffixes: Vec::new(),
            fields: Vec::new(),
            names: Vec::new(),
            bodies: Vec::new(),
            arms: Vec::new(),
        };
        &EMPTY
    }

    pub fn stmts(&self, s: Span) -> &[Stmt<'s>] {
        &self.stmts[s.range()]
    }
    pub fn exprs(&self, s: Span) -> &[Expr<'s>] {
        &self.exprs[s.range()]
    }
    pub fn expr(&self, e: ExprId) -> &Expr<'s> {
        &self.exprs[e.0 as usize]
    }
    pub fn suffixes(&self, s: Span) -> &[Suffix<'s>] {
        &self.suffixes[s.range()]
    }
    pub fn fields(&self, s: Span) -> &[Field<'s>] {
        &self.fields[s.range()]
    }
    pub fn names(&self, s: Span) -> &[Name<'s>] {
        &self.names[s.range()]
    }
    pub fn body(&self, b: BodyId) -> &FuncBody {
        &self.bodies[b.0 as usize]
    }
    pub fn arms(&self, s: Span) -> &[(Expr<'s>, Block)] {
        &self.arms[s.range()]
    }
    /// Whether the suffixes `s` make a call (the last one calls), not an index.
    pub fn is_call(&self, s: Span) -> bool {
        matches!(
            self.suffixes(s).last(),
            Some(Suffix::Call(_) | Suffix::Method(..))
        )
    }
}

/// A name, as written, and the line it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'s> {
    pub text: &'s str,
    pub line: usize,
}

/// A sequence of statements (`Ast::stmts`) and the `return` that may end it (its
/// expressions, `Ast::exprs`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Block {
    pub stmts: Span,
    pub ret: Option<Span>,
}

#[derive(Debug)]
pub enum Stmt<'s> {
    /// `local a, b <const> = e1, e2`: the names, the expressions.
    Local(Span, Span),
    /// `local function f() … end`
    LocalFunction(Name<'s>, BodyId),
    /// `function a.b.c:m() … end`: the dotted names, then the method's.
    Function(Span, Option<Name<'s>>, BodyId),
    /// `v1, v2 = e1, e2`: each target (`Ast::exprs`) a name or a suffixed expression
    /// ending in an index; the expressions.
    Assign(Span, Span),
    /// A call as a statement: its prefix and suffixes (the last one calls).
    Call(Prefix<'s>, Span),
    Do(Block),
    While(Expr<'s>, Block),
    Repeat(Block, Expr<'s>),
    /// `if` and each `elseif` (`Ast::arms`), and the `else` block.
    If(Span, Option<Block>),
    /// `for v = start, end[, step] do … end`
    NumericFor(Name<'s>, ExprId, ExprId, Option<ExprId>, Block),
    /// `for n1, n2 in e1, e2 do … end`
    GenericFor(Span, Span, Block),
    /// `break`, `goto`, a label: nothing the walk reads.
    Other,
}

#[derive(Debug)]
pub struct FuncBody {
    /// The named parameters (`Ast::names`; a `...` is not one).
    pub params: Span,
    pub block: Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    And,
    Or,
    /// Every other operator: the walk only tells these two apart.
    Other,
}

#[derive(Debug)]
pub enum Expr<'s> {
    Name(Name<'s>),
    /// A string literal: its text as written, between its delimiters.
    Str(&'s str),
    Paren(ExprId),
    Unary(ExprId),
    Binary(ExprId, BinOp, ExprId),
    Function(BodyId),
    /// A table constructor's fields (`Ast::fields`).
    Table(Span),
    /// A prefix and its suffixes (at least one).
    Suffixed(Prefix<'s>, Span),
    /// `nil`, `true`, `false`, a number, `...`.
    Other,
}

#[derive(Debug, Clone, Copy)]
pub enum Prefix<'s> {
    Name(Name<'s>),
    /// `( exp )`
    Paren(ExprId),
}

#[derive(Debug)]
pub enum Suffix<'s> {
    /// `.name`
    Dot(Name<'s>),
    /// `[exp]`
    Index(Expr<'s>),
    /// `(args)`, `{table}`, `"string"`
    Call(Args<'s>),
    /// `:name(args)`
    Method(Name<'s>, Args<'s>),
}

#[derive(Debug, Clone, Copy)]
pub enum Args<'s> {
    /// `(e1, e2)` (`Ast::exprs`)
    Paren(Span),
    /// `f { … }`: its fields (`Ast::fields`)
    Table(Span),
    /// `f "text"`: its text as written.
    Str(&'s str),
}

#[derive(Debug)]
pub enum Field<'s> {
    /// `[key] = value`, and the line of its `[`.
    Bracket(usize, Expr<'s>, Expr<'s>),
    /// `name = value`
    Named(Name<'s>, Expr<'s>),
    /// `value`
    Positional(Expr<'s>),
}

/// Parses a whole file: its nodes and its top-level block. `Err`: `line N: what was
/// expected`. (The check itself reads a statement at a time, `TopLevel`; the tests read
/// whole files.)
#[cfg_attr(not(test), allow(dead_code))]
pub fn parse(source: &str) -> Result<(Ast<'_>, Block), String> {
    let mut p = Parser::new(source)?;
    let root = p.block()?;
    if p.tok.t != T::Eof {
        return Err(p.expected("the end of the file"));
    }
    Ok((p.ast, root))
}

/// A statement of a file's top level, or the `return` that ends it.
pub enum TopLevel<'s> {
    Stmt(Stmt<'s>),
    /// The `return`'s expressions (`Ast::exprs`).
    Return(Span),
}

/// Reads a file one top-level statement at a time, each statement's nodes alone in its
/// [`Ast`] (`clear` makes room for the next): what is held at once is one statement,
/// not the whole file.
pub struct TopLevels<'s> {
    p: Parser<'s>,
}

impl<'s> TopLevels<'s> {
    pub fn new(source: &'s str) -> Result<Self, String> {
        Ok(TopLevels {
            p: Parser::new(source)?,
        })
    }

    /// The next statement (its nodes in `ast()`), none at the end of the file. `Err`:
    /// `line N: what was expected`.
    pub fn next(&mut self) -> Result<Option<TopLevel<'s>>, String> {
        let p = &mut self.p;
        loop {
            match p.tok.t {
                T::Eof => return Ok(None),
                T::Semicolon => {
                    p.advance()?;
                }
                T::Return => {
                    let exprs = p.ret()?;
                    if p.tok.t != T::Eof {
                        return Err(p.expected("the end of the file"));
                    }
                    return Ok(Some(TopLevel::Return(exprs)));
                }
                T::End | T::Else | T::Elseif | T::Until => {
                    return Err(p.expected("the end of the file"))
                }
                _ => return p.stmt().map(|s| Some(TopLevel::Stmt(s))),
            }
        }
    }

    /// The nodes of the statement `next` gave.
    pub fn ast(&self) -> &Ast<'s> {
        &self.p.ast
    }

    /// Forgets the last statement's nodes (their room is kept for the next).
    pub fn clear(&mut self) {
        let a = &mut self.p.ast;
        a.stmts.clear();
        a.exprs.clear();
        a.suffixes.clear();
        a.fields.clear();
        a.names.clear();
        a.bodies.clear();
        a.arms.clear();
    }
}

/// Token kinds: each keyword and symbol its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum T {
    Name,
    Str,
    Number,
    Eof,
    // Keywords.
    And,
    Break,
    Do,
    Else,
    Elseif,
    End,
    False,
    For,
    Function,
    Goto,
    If,
    In,
    Local,
    Nil,
    Not,
    Or,
    Repeat,
    Return,
    Then,
    True,
    Until,
    While,
    // Symbols.
    Plus,
    Minus,
    Star,
    Slash,
    DoubleSlash,
    Percent,
    Caret,
    Hash,
    Amp,
    Tilde,
    Pipe,
    Shl,
    Shr,
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
    Assign,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    DoubleColon,
    Semicolon,
    Colon,
    Comma,
    Dot,
    Concat,
    Dots,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    t: T,
    /// The token's text: a name's, a string's between its delimiters.
    start: usize,
    end: usize,
    line: usize,
}

impl Token {
    const EOF: Token = Token {
        t: T::Eof,
        start: 0,
        end: 0,
        line: 0,
    };
}

fn keyword(word: &[u8]) -> Option<T> {
    Some(match word {
        b"and" => T::And,
        b"break" => T::Break,
        b"do" => T::Do,
        b"else" => T::Else,
        b"elseif" => T::Elseif,
        b"end" => T::End,
        b"false" => T::False,
        b"for" => T::For,
        b"function" => T::Function,
        b"goto" => T::Goto,
        b"if" => T::If,
        b"in" => T::In,
        b"local" => T::Local,
        b"nil" => T::Nil,
        b"not" => T::Not,
        b"or" => T::Or,
        b"repeat" => T::Repeat,
        b"return" => T::Return,
        b"then" => T::Then,
        b"true" => T::True,
        b"until" => T::Until,
        b"while" => T::While,
        _ => return None,
    })
}

struct Lexer<'s> {
    src: &'s str,
    b: &'s [u8],
    pos: usize,
    line: usize,
}

impl<'s> Lexer<'s> {
    fn new(src: &'s str) -> Self {
        let b = src.as_bytes();
        let mut pos = 0;
        if b.starts_with(b"#!") {
            pos = b.iter().position(|c| *c == b'\n').unwrap_or(b.len());
        }
        Lexer {
            src,
            b,
            pos,
            line: 1,
        }
    }

    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    fn error(&self, what: &str) -> String {
        format!("line {}: {what}", self.line)
    }

    /// Skips to the end of a long bracket whose `[`s and `=`s end at `self.pos` (`level`
    /// `=`s); returns where its content ends.
    fn long_bracket(&mut self, level: usize) -> Result<usize, String> {
        loop {
            match self.b.get(self.pos) {
                None => return Err(self.error("unfinished long string or comment")),
                Some(b'\n') => {
                    self.line += 1;
                    self.pos += 1;
                }
                Some(b']') => {
                    let end = self.pos;
                    let mut i = self.pos + 1;
                    let mut eq = 0;
                    while eq < level && self.at(i) == b'=' {
                        eq += 1;
                        i += 1;
                    }
                    if eq == level && self.at(i) == b']' {
                        self.pos = i + 1;
                        return Ok(end);
                    }
                    // Not the close: go on from the first byte after this `]`.
                    self.pos += 1;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// The level of a long bracket opening at `self.pos` (`[`, `=`s, `[`), if one does.
    fn long_open(&self) -> Option<usize> {
        let mut i = self.pos + 1;
        while self.at(i) == b'=' {
            i += 1;
        }
        (self.at(i) == b'[').then(|| i - self.pos - 1)
    }

    fn next(&mut self) -> Result<Token, String> {
        // Whitespace and comments.
        loop {
            match self.at(self.pos) {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'-' if self.at(self.pos + 1) == b'-' => {
                    self.pos += 2;
                    match (self.at(self.pos) == b'[')
                        .then(|| self.long_open())
                        .flatten()
                    {
                        Some(level) => {
                            self.pos += level + 2;
                            self.long_bracket(level)?;
                        }
                        None => {
                            // To the line's end, which a `\r` is too for Lua.
                            while self.pos < self.b.len()
                                && !matches!(self.b[self.pos], b'\n' | b'\r')
                            {
                                self.pos += 1;
                            }
                        }
                    }
                }
                _ => break,
            }
        }
        let start = self.pos;
        let line = self.line;
        let tok = |t: T, end: usize| Token {
            t,
            start,
            end,
            line,
        };
        let Some(&c) = self.b.get(start) else {
            return Ok(tok(T::Eof, start));
        };
        let one = |lexer: &mut Self, t: T| {
            lexer.pos += 1;
            Ok(tok(t, lexer.pos))
        };
        let two = |lexer: &mut Self, t: T| {
            lexer.pos += 2;
            Ok(tok(t, lexer.pos))
        };
        let next = self.at(start + 1);
        match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let mut i = start + 1;
                while matches!(self.at(i), b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'0'..=b'9') {
                    i += 1;
                }
                self.pos = i;
                Ok(tok(keyword(&self.b[start..i]).unwrap_or(T::Name), i))
            }
            b'0'..=b'9' => Ok(self.number(start, line)),
            b'.' if next.is_ascii_digit() => Ok(self.number(start, line)),
            b'.' if next == b'.' && self.at(start + 2) == b'.' => {
                self.pos += 3;
                Ok(tok(T::Dots, self.pos))
            }
            b'.' if next == b'.' => two(self, T::Concat),
            b'.' => one(self, T::Dot),
            b'"' | b'\'' => {
                let mut i = start + 1;
                loop {
                    match self.b.get(i) {
                        None => return Err(self.error("unfinished string")),
                        Some(b'\\') => match self.at(i + 1) {
                            // An escaped line break, `\r\n` as one.
                            b'\n' => {
                                self.line += 1;
                                i += 2;
                            }
                            b'\r' => {
                                i += 2;
                                if self.at(i) == b'\n' {
                                    self.line += 1;
                                    i += 1;
                                }
                            }
                            // `\z` skips the white space after it, line breaks included.
                            b'z' => {
                                i += 2;
                                while let Some(c @ (b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)) =
                                    self.b.get(i)
                                {
                                    if *c == b'\n' {
                                        self.line += 1;
                                    }
                                    i += 1;
                                }
                            }
                            _ => i += 2,
                        },
                        Some(b'\n') => return Err(self.error("unfinished string")),
                        Some(q) if *q == c => break,
                        Some(_) => i += 1,
                    }
                }
                self.pos = i + 1;
                Ok(Token {
                    t: T::Str,
                    start: start + 1,
                    end: i,
                    line,
                })
            }
            b'[' => match self.long_open() {
                Some(level) => {
                    self.pos = start + level + 2;
                    let content = self.pos;
                    let end = self.long_bracket(level)?;
                    Ok(Token {
                        t: T::Str,
                        start: content,
                        end,
                        line,
                    })
                }
                None => one(self, T::LBracket),
            },
            b'+' => one(self, T::Plus),
            b'-' => one(self, T::Minus),
            b'*' => one(self, T::Star),
            b'/' if next == b'/' => two(self, T::DoubleSlash),
            b'/' => one(self, T::Slash),
            b'%' => one(self, T::Percent),
            b'^' => one(self, T::Caret),
            b'#' => one(self, T::Hash),
            b'&' => one(self, T::Amp),
            b'~' if next == b'=' => two(self, T::Ne),
            b'~' => one(self, T::Tilde),
            b'|' => one(self, T::Pipe),
            b'<' if next == b'<' => two(self, T::Shl),
            b'<' if next == b'=' => two(self, T::Le),
            b'<' => one(self, T::Lt),
            b'>' if next == b'>' => two(self, T::Shr),
            b'>' if next == b'=' => two(self, T::Ge),
            b'>' => one(self, T::Gt),
            b'=' if next == b'=' => two(self, T::Eq),
            b'=' => one(self, T::Assign),
            b'(' => one(self, T::LParen),
            b')' => one(self, T::RParen),
            b'{' => one(self, T::LBrace),
            b'}' => one(self, T::RBrace),
            b']' => one(self, T::RBracket),
            b':' if next == b':' => two(self, T::DoubleColon),
            b':' => one(self, T::Colon),
            b';' => one(self, T::Semicolon),
            b',' => one(self, T::Comma),
            _ => Err(self.error("unexpected character")),
        }
    }

    /// A numeral as Lua's lexer reads one: digits, `.`, and an exponent's sign; hex digits
    /// and `p` exponents after `0x`.
    fn number(&mut self, start: usize, line: usize) -> Token {
        let mut i = start;
        let hex = self.at(i) == b'0' && matches!(self.at(i + 1), b'x' | b'X');
        let expo: &[u8] = if hex {
            i += 2;
            b"Pp"
        } else {
            b"Ee"
        };
        loop {
            let c = self.at(i);
            if expo.contains(&c) {
                i += 1;
                if matches!(self.at(i), b'+' | b'-') {
                    i += 1;
                }
            } else if c.is_ascii_hexdigit() || c == b'.' {
                i += 1;
            } else {
                break;
            }
        }
        self.pos = i;
        Token {
            t: T::Number,
            start,
            end: i,
            line,
        }
    }
}

struct Parser<'s> {
    lex: Lexer<'s>,
    tok: Token,
    /// The token after `tok`, when it was looked at.
    ahead: Option<Token>,
    ast: Ast<'s>,
    // Where a list is gathered (nested lists above it, moved off before it ends) until
    // it is whole and moved, in order, to the end of the `Ast`'s vector of its kind.
    stmts: Vec<Stmt<'s>>,
    exprs: Vec<Expr<'s>>,
    suffixes: Vec<Suffix<'s>>,
    fields: Vec<Field<'s>>,
    names: Vec<Name<'s>>,
    arms: Vec<(Expr<'s>, Block)>,
}

/// Moves what `stack` gathered since `start` to the end of `to`: where it is there.
fn settle<T>(stack: &mut Vec<T>, start: usize, to: &mut Vec<T>) -> Span {
    let span = Span {
        start: to.len() as u32,
        len: (stack.len() - start) as u32,
    };
    to.extend(stack.drain(start..));
    span
}

/// Binary operators: (left, right) priority, as Lua's parser has them.
fn binary(t: T) -> Option<(BinOp, u8, u8)> {
    let (op, l, r) = match t {
        T::Or => (BinOp::Or, 1, 1),
        T::And => (BinOp::And, 2, 2),
        T::Lt | T::Gt | T::Le | T::Ge | T::Ne | T::Eq => (BinOp::Other, 3, 3),
        T::Pipe => (BinOp::Other, 4, 4),
        T::Tilde => (BinOp::Other, 5, 5),
        T::Amp => (BinOp::Other, 6, 6),
        T::Shl | T::Shr => (BinOp::Other, 7, 7),
        T::Concat => (BinOp::Other, 9, 8),
        T::Plus | T::Minus => (BinOp::Other, 10, 10),
        T::Star | T::Slash | T::DoubleSlash | T::Percent => (BinOp::Other, 11, 11),
        T::Caret => (BinOp::Other, 14, 13),
        _ => return None,
    };
    Some((op, l, r))
}

const UNARY_PRIORITY: u8 = 12;

impl<'s> Parser<'s> {
    fn new(source: &'s str) -> Result<Self, String> {
        let mut p = Parser {
            lex: Lexer::new(source),
            tok: Token::EOF,
            ahead: None,
            ast: Ast::default(),
            stmts: Vec::new(),
            exprs: Vec::new(),
            suffixes: Vec::new(),
            fields: Vec::new(),
            names: Vec::new(),
            arms: Vec::new(),
        };
        p.advance()?;
        Ok(p)
    }

    fn advance(&mut self) -> Result<Token, String> {
        let was = self.tok;
        self.tok = match self.ahead.take() {
            Some(t) => t,
            None => self.lex.next()?,
        };
        Ok(was)
    }

    fn peek(&mut self) -> Result<T, String> {
        if self.ahead.is_none() {
            self.ahead = Some(self.lex.next()?);
        }
        Ok(self.ahead.map_or(T::Eof, |t| t.t))
    }

    fn expected(&self, what: &str) -> String {
        format!("line {}: expected {what}", self.tok.line)
    }

    fn text(&self, t: Token) -> &'s str {
        &self.lex.src[t.start..t.end]
    }

    fn accept(&mut self, t: T) -> Result<bool, String> {
        if self.tok.t == t {
            self.advance()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn expect(&mut self, t: T, what: &str) -> Result<Token, String> {
        if self.tok.t == t {
            self.advance()
        } else {
            Err(self.expected(what))
        }
    }

    fn name(&mut self) -> Result<Name<'s>, String> {
        let t = self.expect(T::Name, "a name")?;
        Ok(Name {
            text: self.text(t),
            line: t.line,
        })
    }

    /// `e` as a node of its own (a child of another).
    fn alone(&mut self, e: Expr<'s>) -> ExprId {
        self.ast.exprs.push(e);
        ExprId((self.ast.exprs.len() - 1) as u32)
    }

    fn block(&mut self) -> Result<Block, String> {
        let start = self.stmts.len();
        let mut ret = None;
        loop {
            match self.tok.t {
                T::Eof | T::End | T::Else | T::Elseif | T::Until => break,
                T::Return => {
                    ret = Some(self.ret()?);
                    break;
                }
                T::Semicolon => {
                    self.advance()?;
                }
                _ => {
                    let stmt = self.stmt()?;
                    self.stmts.push(stmt);
                }
            }
        }
        Ok(Block {
            stmts: settle(&mut self.stmts, start, &mut self.ast.stmts),
            ret,
        })
    }

    /// `return [exps] [;]`, at its `return`: the expressions.
    fn ret(&mut self) -> Result<Span, String> {
        self.expect(T::Return, "'return'")?;
        let exprs = match self.tok.t {
            T::Eof | T::End | T::Else | T::Elseif | T::Until | T::Semicolon => Span::default(),
            _ => self.exprs()?,
        };
        self.accept(T::Semicolon)?;
        Ok(exprs)
    }

    fn end(&mut self) -> Result<(), String> {
        self.expect(T::End, "'end'").map(|_| ())
    }

    /// A list of names, the first already read, more after commas.
    fn names_after(&mut self, first: Name<'s>) -> Result<Span, String> {
        let start = self.names.len();
        self.names.push(first);
        while self.accept(T::Comma)? {
            let n = self.name()?;
            self.names.push(n);
        }
        Ok(settle(&mut self.names, start, &mut self.ast.names))
    }

    fn stmt(&mut self) -> Result<Stmt<'s>, String> {
        Ok(match self.tok.t {
            T::If => {
                self.advance()?;
                let start = self.arms.len();
                let cond = self.expr()?;
                self.expect(T::Then, "'then'")?;
                let block = self.block()?;
                self.arms.push((cond, block));
                let mut otherwise = None;
                loop {
                    match self.tok.t {
                        T::Elseif => {
                            self.advance()?;
                            let cond = self.expr()?;
                            self.expect(T::Then, "'then'")?;
                            let block = self.block()?;
                            self.arms.push((cond, block));
                        }
                        T::Else => {
                            self.advance()?;
                            otherwise = Some(self.block()?);
                            self.end()?;
                            break;
                        }
                        _ => {
                            self.end()?;
                            break;
                        }
                    }
                }
                Stmt::If(settle(&mut self.arms, start, &mut self.ast.arms), otherwise)
            }
            T::While => {
                self.advance()?;
                let cond = self.expr()?;
                self.expect(T::Do, "'do'")?;
                let block = self.block()?;
                self.end()?;
                Stmt::While(cond, block)
            }
            T::Do => {
                self.advance()?;
                let block = self.block()?;
                self.end()?;
                Stmt::Do(block)
            }
            T::For => {
                self.advance()?;
                let first = self.name()?;
                if self.accept(T::Assign)? {
                    let start = self.expr()?;
                    let start = self.alone(start);
                    self.expect(T::Comma, "','")?;
                    let end = self.expr()?;
                    let end = self.alone(end);
                    let step = if self.accept(T::Comma)? {
                        let e = self.expr()?;
                        Some(self.alone(e))
                    } else {
                        None
                    };
                    self.expect(T::Do, "'do'")?;
                    let block = self.block()?;
                    self.end()?;
                    Stmt::NumericFor(first, start, end, step, block)
                } else {
                    let names = self.names_after(first)?;
                    self.expect(T::In, "'in' or '='")?;
                    let exprs = self.exprs()?;
                    self.expect(T::Do, "'do'")?;
                    let block = self.block()?;
                    self.end()?;
                    Stmt::GenericFor(names, exprs, block)
                }
            }
            T::Repeat => {
                self.advance()?;
                let block = self.block()?;
                self.expect(T::Until, "'until'")?;
                Stmt::Repeat(block, self.expr()?)
            }
            T::Function => {
                self.advance()?;
                let start = self.names.len();
                let first = self.name()?;
                self.names.push(first);
                let mut method = None;
                loop {
                    if self.accept(T::Dot)? {
                        let n = self.name()?;
                        self.names.push(n);
                    } else if self.accept(T::Colon)? {
                        method = Some(self.name()?);
                        break;
                    } else {
                        break;
                    }
                }
                let names = settle(&mut self.names, start, &mut self.ast.names);
                Stmt::Function(names, method, self.body()?)
            }
            T::Local => {
                self.advance()?;
                if self.accept(T::Function)? {
                    let name = self.name()?;
                    Stmt::LocalFunction(name, self.body()?)
                } else {
                    let start = self.names.len();
                    loop {
                        let n = self.name()?;
                        self.names.push(n);
                        // An attribute: `<const>`, `<close>`.
                        if self.accept(T::Lt)? {
                            self.name()?;
                            self.expect(T::Gt, "'>'")?;
                        }
                        if !self.accept(T::Comma)? {
                            break;
                        }
                    }
                    let names = settle(&mut self.names, start, &mut self.ast.names);
                    let exprs = if self.accept(T::Assign)? {
                        self.exprs()?
                    } else {
                        Span::default()
                    };
                    Stmt::Local(names, exprs)
                }
            }
            T::DoubleColon => {
                self.advance()?;
                self.name()?;
                self.expect(T::DoubleColon, "'::'")?;
                Stmt::Other
            }
            T::Break => {
                self.advance()?;
                Stmt::Other
            }
            T::Goto => {
                self.advance()?;
                self.name()?;
                Stmt::Other
            }
            _ => {
                let first = self.suffixed()?;
                if matches!(self.tok.t, T::Assign | T::Comma) {
                    let start = self.exprs.len();
                    self.exprs.push(first);
                    while self.accept(T::Comma)? {
                        let v = self.suffixed()?;
                        self.exprs.push(v);
                    }
                    self.expect(T::Assign, "'='")?;
                    for v in &self.exprs[start..] {
                        let assignable = match v {
                            Expr::Name(_) => true,
                            Expr::Suffixed(_, s) => !self.ast.is_call(*s),
                            _ => false,
                        };
                        if !assignable {
                            return Err(self.expected("a variable before '='"));
                        }
                    }
                    let vars = settle(&mut self.exprs, start, &mut self.ast.exprs);
                    Stmt::Assign(vars, self.exprs()?)
                } else {
                    match first {
                        Expr::Suffixed(prefix, s) if self.ast.is_call(s) => Stmt::Call(prefix, s),
                        _ => return Err(self.expected("a call or an assignment")),
                    }
                }
            }
        })
    }

    fn body(&mut self) -> Result<BodyId, String> {
        self.expect(T::LParen, "'('")?;
        let start = self.names.len();
        if self.tok.t != T::RParen {
            loop {
                if self.accept(T::Dots)? {
                    break;
                }
                let n = self.name()?;
                self.names.push(n);
                if !self.accept(T::Comma)? {
                    break;
                }
            }
        }
        let params = settle(&mut self.names, start, &mut self.ast.names);
        self.expect(T::RParen, "')'")?;
        let block = self.block()?;
        self.end()?;
        self.ast.bodies.push(FuncBody { params, block });
        Ok(BodyId((self.ast.bodies.len() - 1) as u32))
    }

    fn exprs(&mut self) -> Result<Span, String> {
        let start = self.exprs.len();
        loop {
            let e = self.expr()?;
            self.exprs.push(e);
            if !self.accept(T::Comma)? {
                break;
            }
        }
        Ok(settle(&mut self.exprs, start, &mut self.ast.exprs))
    }

    fn expr(&mut self) -> Result<Expr<'s>, String> {
        self.subexpr(0)
    }

    /// Lua's `subexpr`: operators that bind tighter than `limit`.
    fn subexpr(&mut self, limit: u8) -> Result<Expr<'s>, String> {
        let mut left = match self.tok.t {
            T::Not | T::Minus | T::Hash | T::Tilde => {
                self.advance()?;
                let e = self.subexpr(UNARY_PRIORITY)?;
                Expr::Unary(self.alone(e))
            }
            _ => self.simple()?,
        };
        while let Some((op, l, r)) = binary(self.tok.t) {
            if l <= limit {
                break;
            }
            self.advance()?;
            let right = self.subexpr(r)?;
            let (l, r) = (self.alone(left), self.alone(right));
            left = Expr::Binary(l, op, r);
        }
        Ok(left)
    }

    fn simple(&mut self) -> Result<Expr<'s>, String> {
        Ok(match self.tok.t {
            T::Number | T::Nil | T::True | T::False | T::Dots => {
                self.advance()?;
                Expr::Other
            }
            T::Str => {
                let t = self.advance()?;
                Expr::Str(self.text(t))
            }
            T::LBrace => Expr::Table(self.table()?),
            T::Function => {
                self.advance()?;
                Expr::Function(self.body()?)
            }
            _ => self.suffixed()?,
        })
    }

    /// A name or `( exp )`, then its suffixes: a bare name is `Expr::Name`, a bare
    /// parenthesised expression `Expr::Paren`.
    fn suffixed(&mut self) -> Result<Expr<'s>, String> {
        let prefix = match self.tok.t {
            T::Name => Prefix::Name(self.name()?),
            T::LParen => {
                self.advance()?;
                let e = self.expr()?;
                self.expect(T::RParen, "')'")?;
                Prefix::Paren(self.alone(e))
            }
            _ => return Err(self.expected("an expression")),
        };
        let start = self.suffixes.len();
        loop {
            let s = match self.tok.t {
                T::Dot => {
                    self.advance()?;
                    Suffix::Dot(self.name()?)
                }
                T::LBracket => {
                    self.advance()?;
                    let e = self.expr()?;
                    self.expect(T::RBracket, "']'")?;
                    Suffix::Index(e)
                }
                T::Colon => {
                    self.advance()?;
                    let name = self.name()?;
                    Suffix::Method(name, self.args()?)
                }
                T::LParen | T::LBrace | T::Str => Suffix::Call(self.args()?),
                _ => break,
            };
            self.suffixes.push(s);
        }
        Ok(match (prefix, self.suffixes.len() == start) {
            (Prefix::Name(n), true) => Expr::Name(n),
            (Prefix::Paren(e), true) => Expr::Paren(e),
            (prefix, false) => Expr::Suffixed(
                prefix,
                settle(&mut self.suffixes, start, &mut self.ast.suffixes),
            ),
        })
    }

    fn args(&mut self) -> Result<Args<'s>, String> {
        Ok(match self.tok.t {
            T::Str => {
                let t = self.advance()?;
                Args::Str(self.text(t))
            }
            T::LBrace => Args::Table(self.table()?),
            T::LParen => {
                self.advance()?;
                let list = if self.tok.t == T::RParen {
                    Span::default()
                } else {
                    self.exprs()?
                };
                self.expect(T::RParen, "')'")?;
                Args::Paren(list)
            }
            _ => return Err(self.expected("function arguments")),
        })
    }

    fn table(&mut self) -> Result<Span, String> {
        self.expect(T::LBrace, "'{'")?;
        let start = self.fields.len();
        while self.tok.t != T::RBrace {
            let named = self.tok.t == T::Name && self.peek()? == T::Assign;
            let field = match self.tok.t {
                T::LBracket => {
                    let open = self.advance()?;
                    let key = self.expr()?;
                    self.expect(T::RBracket, "']'")?;
                    self.expect(T::Assign, "'='")?;
                    Field::Bracket(open.line, key, self.expr()?)
                }
                T::Name if named => {
                    let key = self.name()?;
                    self.advance()?;
                    Field::Named(key, self.expr()?)
                }
                _ => Field::Positional(self.expr()?),
            };
            self.fields.push(field);
            if !(self.accept(T::Comma)? || self.accept(T::Semicolon)?) {
                break;
            }
        }
        self.expect(T::RBrace, "'}'")?;
        Ok(settle(&mut self.fields, start, &mut self.ast.fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_literals_are_as_written() {
        let src = "#!/usr/bin/env runbook\nlocal a = [==[\nx]]=]==] .. 'q\\'\\\n' -- c\n--[[ long\n]] b(\"s\")";
        let (ast, root) = parse(src).unwrap();
        let stmts = ast.stmts(root.stmts);
        let Stmt::Local(names, exprs) = &stmts[0] else {
            panic!("{ast:?}")
        };
        assert_eq!(ast.names(*names)[0], Name { text: "a", line: 2 });
        let Expr::Binary(l, _, r) = &ast.exprs(*exprs)[0] else {
            panic!("{ast:?}")
        };
        assert!(matches!(ast.expr(*l), Expr::Str("\nx]]=")), "{ast:?}");
        assert!(matches!(ast.expr(*r), Expr::Str("q\\'\\\n")), "{ast:?}");
        let Stmt::Call(prefix, _) = &stmts[1] else {
            panic!("{ast:?}")
        };
        assert!(matches!(prefix, Prefix::Name(Name { text: "b", line: 6 })));
    }

    #[test]
    fn precedence_is_luas() {
        // `a or b and c .. d`: or(a, and(b, ..(c, d))).
        let (ast, root) = parse("x = a or b and c .. d").unwrap();
        let Stmt::Assign(_, e) = &ast.stmts(root.stmts)[0] else {
            panic!()
        };
        let Expr::Binary(_, BinOp::Or, and) = &ast.exprs(*e)[0] else {
            panic!()
        };
        let Expr::Binary(_, BinOp::And, concat) = ast.expr(*and) else {
            panic!()
        };
        assert!(matches!(
            ast.expr(*concat),
            Expr::Binary(_, BinOp::Other, _)
        ));
        // `not a and b`: and(not a, b); `-x ^ 2`: -(x ^ 2).
        let (ast, root) = parse("x = not a and b\ny = -x ^ 2").unwrap();
        let stmts = ast.stmts(root.stmts);
        let Stmt::Assign(_, e) = &stmts[0] else {
            panic!()
        };
        let Expr::Binary(not, BinOp::And, _) = &ast.exprs(*e)[0] else {
            panic!()
        };
        assert!(matches!(ast.expr(*not), Expr::Unary(_)));
        let Stmt::Assign(_, e) = &stmts[1] else {
            panic!()
        };
        assert!(matches!(ast.exprs(*e)[0], Expr::Unary(_)));
    }

    #[test]
    fn all_of_lua_54_parses() {
        let src = r#"
local x <const>, y <close> = 1, nil
local t = { [1] = 2; a = 3, 4, f = function(...) return ... end }
for i = 1, 10, 2 do if i > 3 then break end end
for k, v in pairs(t) do goto next ::next:: end
while x < 0x1p4 and 3.5e-2 ~= .5 do x = x // 2 | 1 ~ 2 & 3 << 1 >> 1 end
repeat local z = #t until z
function t.a.b:c(p, ...) return self, p end
local function f() end
f{ 1 } f"s" f[[s]] t:m"s" (f)()
do ; end
return x, y;
"#;
        let (ast, root) = parse(src).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ast.stmts(root.stmts).len(), 13, "{ast:?}");
        assert!(root.ret.is_some());
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("local a = 1\nlocal = 2\n").unwrap_err();
        assert!(e.starts_with("line 2"), "{e}");
        assert!(parse("x = 'open\n'").is_err());
        assert!(parse("f() = 1").is_err());
        assert!(parse("x").is_err());
    }
}
