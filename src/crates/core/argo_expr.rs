//! Argo Rollouts' condition language (expr-lang, `utils/evaluate` of Argo Rollouts) for the
//! subset AnalysisTemplates use: `result[0] >= 0.95`, `len(result) > 0`,
//! `all(result, {# < 1})`, `isNaN(result[0])`, `default(result, 0) < 5`, `&&`/`||`/`and`/`or`/
//! `not`/`!`, arithmetic, comparisons, string equality, number and string literals, `asInt`,
//! `asFloat`, `isInf`, `isNil`, `any`, `none`, `abs`, and member access into a JSON object
//! result (`result.major == '1'`, `result['status']`), as Argo's web provider gives one.
//!
//! [`parse`] refuses any other syntax with its 1-based column, so a template is refused when
//! it is read, never mid-rollout. [`Condition::eval`] is total: a type mismatch or an index out
//! of range is an [`EvalError`] (Argo's measurement phase `Error`), never a panic. Pure.

use std::collections::BTreeMap;
use std::fmt;

/// A value a condition works on: what a provider measured, or what an expression computed.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Bool(bool),
    Str(String),
    List(Vec<Value>),
    /// A JSON object (Argo's web provider: what its `jsonPath` selects), by key.
    Map(BTreeMap<String, Value>),
    /// No value: a provider's answer without data (`isNil(result)`, `default(result, 0)`).
    Nil,
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Str(_) => "string",
            Value::List(_) => "array",
            Value::Map(_) => "map",
            Value::Nil => "nil",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Nil => write!(f, "nil"),
            Value::List(items) => {
                write!(f, "[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Value::Map(entries) => {
                write!(f, "{{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Syntax sluice does not read, at its 1-based column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct ParseError {
    pub column: usize,
    pub message: String,
}

/// Why a condition could not be evaluated on a result (Argo's measurement phase `Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

/// The functions of Argo's environment that sluice evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    Len,
    All,
    Any,
    None,
    IsNaN,
    IsInf,
    IsNil,
    Default,
    AsInt,
    AsFloat,
    Abs,
}

const FUNCS: &[(&str, Func, usize)] = &[
    ("len", Func::Len, 1),
    ("all", Func::All, 2),
    ("any", Func::Any, 2),
    ("none", Func::None, 2),
    ("isNaN", Func::IsNaN, 1),
    ("isInf", Func::IsInf, 1),
    ("isNil", Func::IsNil, 1),
    ("default", Func::Default, 2),
    ("asInt", Func::AsInt, 1),
    ("asFloat", Func::AsFloat, 1),
    ("abs", Func::Abs, 1),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Lit(Value),
    /// `result`.
    Result,
    /// `#`: the element a predicate looks at.
    Element,
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
    /// `{ ... }`, a predicate; only as the second argument of `all`, `any`, `none`.
    Predicate(Box<Expr>),
}

/// A parsed `successCondition` or `failureCondition`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")", "[", "]",
    "{", "}", ",", "#", ".", ":",
];

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |i: usize, message: String| ParseError {
        column: i + 1,
        message,
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || chars[i] == '_'
                    || ((chars[i] == 'e' || chars[i] == 'E') && i > start)
                    || ((chars[i] == '+' || chars[i] == '-') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let n = s
                .parse::<f64>()
                .map_err(|_| err(start, format!("not a number: {s:?}")))?;
            out.push((Tok::Num(n), start));
            continue;
        }
        if c.is_alphabetic() || c == '_' || c == '$' {
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), start));
            continue;
        }
        if c == '"' || c == '\'' {
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => return Err(err(start, "unterminated string".into())),
                    Some(q) if *q == c => break,
                    Some('\\') => {
                        let e = chars
                            .get(i + 1)
                            .ok_or_else(|| err(i, "unterminated string".into()))?;
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            other => *other,
                        });
                        i += 2;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            i += 1;
            out.push((Tok::Str(s), start));
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match OPS.iter().find(|op| rest.starts_with(**op)) {
            Some(op) => {
                i += op.len();
                out.push((Tok::Op(op), start));
            }
            None => return Err(err(start, format!("unexpected character {c:?}"))),
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
    /// Inside `{ ... }`, where `#` is the element.
    in_predicate: bool,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn column(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(_, c)| *c) + 1
    }

    fn fail<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            column: self.column(),
            message: message.into(),
        })
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.peek() == Some(&Tok::Op(leak(op))) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Ident(w)) if w == word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<(), ParseError> {
        if self.eat_op(op) {
            Ok(())
        } else {
            self.fail(format!("expected {op:?}, found {}", self.found()))
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Tok::Num(n)) => format!("{n}"),
            Some(Tok::Str(s)) => format!("{s:?}"),
            Some(Tok::Ident(s)) => format!("{s:?}"),
            Some(Tok::Op(o)) => format!("{o:?}"),
        }
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while self.eat_op("||") || self.eat_word("or") {
            left = Expr::Bin(BinOp::Or, Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.compare()?;
        while self.eat_op("&&") || self.eat_word("and") {
            left = Expr::Bin(BinOp::And, Box::new(left), Box::new(self.compare()?));
        }
        Ok(left)
    }

    fn compare(&mut self) -> Result<Expr, ParseError> {
        let left = self.additive()?;
        let op = [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ]
        .into_iter()
        .find(|(s, _)| self.eat_op(s));
        match op {
            Some((_, op)) => {
                let right = self.additive()?;
                if ["==", "!=", "<=", ">=", "<", ">"]
                    .iter()
                    .any(|s| self.peek() == Some(&Tok::Op(leak(s))))
                {
                    return self.fail("chained comparisons are not supported: join them with &&");
                }
                Ok(Expr::Bin(op, Box::new(left), Box::new(right)))
            }
            None => Ok(left),
        }
    }

    /// One level of left-associative binary operators `ops` over operands `next` reads.
    fn level(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Parser) -> Result<Expr, ParseError>,
    ) -> Result<Expr, ParseError> {
        let mut left = next(self)?;
        while let Some(op) = ops.iter().find(|(s, _)| self.eat_op(s)).map(|(_, op)| *op) {
            left = Expr::Bin(op, Box::new(left), Box::new(next(self)?));
        }
        Ok(left)
    }

    fn additive(&mut self) -> Result<Expr, ParseError> {
        self.level(
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            Parser::multiplicative,
        )
    }

    fn multiplicative(&mut self) -> Result<Expr, ParseError> {
        self.level(
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
            Parser::unary,
        )
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.eat_op("!") || self.eat_word("not") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat_op("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_op("+") {
            return self.unary();
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.primary()?;
        loop {
            if self.eat_op("[") {
                let index = self.or()?;
                self.expect_op("]")?;
                e = Expr::Index(Box::new(e), Box::new(index));
            } else if self.eat_op(".") {
                // `result.major` is `result['major']`, as in expr-lang.
                let Some(Tok::Ident(field)) = self.peek().cloned() else {
                    return self.fail(format!(
                        "expected a field name after '.', found {}",
                        self.found()
                    ));
                };
                self.pos += 1;
                e = Expr::Index(Box::new(e), Box::new(Expr::Lit(Value::Str(field))));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let column = self.column();
        let Some(tok) = self.peek().cloned() else {
            return self.fail("expected a value, found the end");
        };
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Lit(Value::Number(n))),
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Op("(") => {
                let e = self.or()?;
                self.expect_op(")")?;
                Ok(e)
            }
            Tok::Op("#") if self.in_predicate => Ok(Expr::Element),
            Tok::Op("#") => Err(ParseError {
                column,
                message: "# stands for an element only inside a predicate {...}".into(),
            }),
            Tok::Ident(word) => self.word(&word, column),
            Tok::Op(op) => Err(ParseError {
                column,
                message: format!("expected a value, found {op:?}"),
            }),
        }
    }

    fn word(&mut self, word: &str, column: usize) -> Result<Expr, ParseError> {
        match word {
            "true" => return Ok(Expr::Lit(Value::Bool(true))),
            "false" => return Ok(Expr::Lit(Value::Bool(false))),
            "nil" => return Ok(Expr::Lit(Value::Nil)),
            "result" => return Ok(Expr::Result),
            _ => {}
        }
        let Some((_, func, arity)) = FUNCS.iter().find(|(name, _, _)| *name == word) else {
            return Err(ParseError {
                column,
                message: format!(
                    "unsupported name {word:?}: sluice reads result and the functions {}",
                    FUNCS
                        .iter()
                        .map(|(n, _, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        self.expect_op("(")?;
        let mut args = Vec::new();
        if !self.eat_op(")") {
            loop {
                let predicate_slot =
                    matches!(func, Func::All | Func::Any | Func::None) && args.len() == 1;
                if predicate_slot {
                    self.expect_op("{")?;
                    let outer = self.in_predicate;
                    self.in_predicate = true;
                    let body = self.or()?;
                    self.in_predicate = outer;
                    self.expect_op("}")?;
                    args.push(Expr::Predicate(Box::new(body)));
                } else {
                    args.push(self.or()?);
                }
                if self.eat_op(")") {
                    break;
                }
                self.expect_op(",")?;
            }
        }
        if args.len() != *arity {
            return Err(ParseError {
                column,
                message: format!("{word} takes {arity} argument(s), found {}", args.len()),
            });
        }
        Ok(Expr::Call(*func, args))
    }
}

/// The `&'static str` of an operator, for comparing tokens.
fn leak(op: &str) -> &'static str {
    OPS.iter().copied().find(|o| *o == op).unwrap_or("")
}

/// Parses a condition; syntax outside the subset is refused with its column.
pub fn parse(text: &str) -> Result<Condition, ParseError> {
    let toks = lex(text)?;
    let end = text.chars().count();
    let mut p = Parser {
        toks,
        pos: 0,
        end,
        in_predicate: false,
    };
    let expr = p.or()?;
    if p.pos < p.toks.len() {
        return p.fail(format!("unexpected {}", p.found()));
    }
    Ok(Condition { expr })
}

impl Condition {
    /// The condition on `result`: true or false, or why it could not be evaluated (a
    /// non-bool result too, as Argo's `expected bool`).
    pub fn eval(&self, result: &Value) -> Result<bool, EvalError> {
        match eval(&self.expr, result, None)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError(format!(
                "expected bool, but got {} {other}",
                other.type_name()
            ))),
        }
    }
}

fn num(v: &Value, what: &str) -> Result<f64, EvalError> {
    match v {
        Value::Number(n) => Ok(*n),
        other => Err(EvalError(format!(
            "{what}: expected a number, found {} {other}",
            other.type_name()
        ))),
    }
}

fn truth(v: &Value, what: &str) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(EvalError(format!(
            "{what}: expected bool, found {} {other}",
            other.type_name()
        ))),
    }
}

fn eval(e: &Expr, result: &Value, element: Option<&Value>) -> Result<Value, EvalError> {
    let go = |e: &Expr| eval(e, result, element);
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Result => result.clone(),
        Expr::Element => element.cloned().unwrap_or(Value::Nil),
        Expr::Predicate(_) => return Err(EvalError("a predicate {...} is not a value".into())),
        Expr::Not(x) => Value::Bool(!truth(&go(x)?, "not")?),
        Expr::Neg(x) => Value::Number(-num(&go(x)?, "-")?),
        Expr::Bin(BinOp::Or, a, b) => Value::Bool(truth(&go(a)?, "||")? || truth(&go(b)?, "||")?),
        Expr::Bin(BinOp::And, a, b) => Value::Bool(truth(&go(a)?, "&&")? && truth(&go(b)?, "&&")?),
        Expr::Bin(op, a, b) => binary(*op, &go(a)?, &go(b)?)?,
        Expr::Index(list, index) => match (go(list)?, go(index)?) {
            // A missing key is nil, as expr-lang reads a map.
            (Value::Map(mut entries), Value::Str(key)) => {
                entries.remove(&key).unwrap_or(Value::Nil)
            }
            (Value::Map(_), other) => {
                return Err(EvalError(format!(
                    "cannot index a map with {} {other}",
                    other.type_name()
                )))
            }
            (other, Value::Str(key)) => {
                return Err(EvalError(format!(
                    "cannot fetch {key:?} from {} {other}",
                    other.type_name()
                )))
            }
            (list, index) => {
                let index = num(&index, "index")?;
                index_list(list, index)?
            }
        },
        Expr::Call(func, args) => call(*func, args, result, element)?,
    })
}

/// `list[index]`: a negative index counts from the end, as in expr-lang.
fn index_list(list: Value, index: f64) -> Result<Value, EvalError> {
    Ok(match list {
        Value::List(items) => {
            let len = items.len() as f64;
            let i = if index < 0.0 { index + len } else { index };
            if i.fract() != 0.0 || i < 0.0 || i >= len {
                return Err(EvalError(format!(
                    "index out of range: {index} (array of length {})",
                    items.len()
                )));
            }
            items.into_iter().nth(i as usize).unwrap_or(Value::Nil)
        }
        other => {
            return Err(EvalError(format!(
                "cannot index {} {other}",
                other.type_name()
            )))
        }
    })
}

fn binary(op: BinOp, a: &Value, b: &Value) -> Result<Value, EvalError> {
    let cmp = |f: fn(f64, f64) -> bool, sym: &str| -> Result<Value, EvalError> {
        match (a, b) {
            (Value::Str(x), Value::Str(y)) => Ok(Value::Bool(f(x.cmp(y) as i8 as f64, 0.0))),
            _ => Ok(Value::Bool(f(num(a, sym)?, num(b, sym)?))),
        }
    };
    Ok(match op {
        BinOp::Eq => Value::Bool(a == b),
        BinOp::Ne => Value::Bool(a != b),
        BinOp::Lt => cmp(|x, y| x < y, "<")?,
        BinOp::Le => cmp(|x, y| x <= y, "<=")?,
        BinOp::Gt => cmp(|x, y| x > y, ">")?,
        BinOp::Ge => cmp(|x, y| x >= y, ">=")?,
        BinOp::Add => match (a, b) {
            (Value::Str(x), Value::Str(y)) => Value::Str(format!("{x}{y}")),
            _ => Value::Number(num(a, "+")? + num(b, "+")?),
        },
        BinOp::Sub => Value::Number(num(a, "-")? - num(b, "-")?),
        BinOp::Mul => Value::Number(num(a, "*")? * num(b, "*")?),
        BinOp::Div => Value::Number(num(a, "/")? / num(b, "/")?),
        BinOp::Rem => {
            let (x, y) = (num(a, "%")?, num(b, "%")?);
            if y == 0.0 || x.fract() != 0.0 || y.fract() != 0.0 {
                return Err(EvalError(format!(
                    "%: expected integers with a non-zero divisor, found {x} % {y}"
                )));
            }
            Value::Number(x % y)
        }
        BinOp::Or | BinOp::And => {
            return Err(EvalError("logical operator reached as arithmetic".into()))
        }
    })
}

fn call(
    func: Func,
    args: &[Expr],
    result: &Value,
    element: Option<&Value>,
) -> Result<Value, EvalError> {
    let arg = |i: usize| -> Result<Value, EvalError> {
        match args.get(i) {
            Some(e) => eval(e, result, element),
            None => Err(EvalError("missing argument".into())),
        }
    };
    Ok(match func {
        Func::Len => match arg(0)? {
            Value::List(items) => Value::Number(items.len() as f64),
            Value::Map(entries) => Value::Number(entries.len() as f64),
            Value::Str(s) => Value::Number(s.chars().count() as f64),
            other => {
                return Err(EvalError(format!(
                    "invalid argument for len (type {})",
                    other.type_name()
                )))
            }
        },
        Func::All | Func::Any | Func::None => {
            let Value::List(items) = arg(0)? else {
                return Err(EvalError(format!(
                    "{func:?}: expected an array as first argument"
                )));
            };
            let Some(Expr::Predicate(body)) = args.get(1) else {
                return Err(EvalError(format!("{func:?}: expected a predicate {{...}}")));
            };
            let mut hits = 0;
            for item in &items {
                if truth(&eval(body, result, Some(item))?, "predicate")? {
                    hits += 1;
                }
            }
            Value::Bool(match func {
                Func::All => hits == items.len(),
                Func::Any => hits > 0,
                _ => hits == 0,
            })
        }
        Func::IsNaN => Value::Bool(num(&arg(0)?, "isNaN")?.is_nan()),
        Func::IsInf => Value::Bool(num(&arg(0)?, "isInf")?.is_infinite()),
        Func::IsNil => Value::Bool(arg(0)? == Value::Nil),
        Func::Default => match arg(0)? {
            Value::Nil => arg(1)?,
            Value::List(items) if items.is_empty() => arg(1)?,
            v => v,
        },
        Func::AsInt => Value::Number(as_number(&arg(0)?, "asInt")?.trunc()),
        Func::AsFloat => Value::Number(as_number(&arg(0)?, "asFloat")?),
        Func::Abs => Value::Number(num(&arg(0)?, "abs")?.abs()),
    })
}

fn as_number(v: &Value, what: &str) -> Result<f64, EvalError> {
    match v {
        Value::Number(n) => Ok(*n),
        Value::Str(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| EvalError(format!("{what}() not supported on string {s:?}"))),
        other => Err(EvalError(format!(
            "{what}() not supported on {} {other}",
            other.type_name()
        ))),
    }
}

impl Value {
    /// A value read back from its display (`[0.97, NaN]`, `-inf`, `nil`, `"ok"`), as a
    /// measurement records it; `None` when `text` is not one.
    pub fn parse_recorded(text: &str) -> Option<Value> {
        let toks = lex(text).ok()?;
        let mut pos = 0;
        let v = recorded(&toks, &mut pos)?;
        (pos == toks.len()).then_some(v)
    }
}

fn recorded(toks: &[(Tok, usize)], pos: &mut usize) -> Option<Value> {
    let (tok, _) = toks.get(*pos)?;
    *pos += 1;
    Some(match tok {
        Tok::Num(n) => Value::Number(*n),
        Tok::Str(s) => Value::Str(s.clone()),
        Tok::Ident(w) => match w.as_str() {
            "nil" => Value::Nil,
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "NaN" => Value::Number(f64::NAN),
            "inf" => Value::Number(f64::INFINITY),
            _ => return None,
        },
        Tok::Op("-") => match recorded(toks, pos)? {
            Value::Number(n) => Value::Number(-n),
            _ => return None,
        },
        Tok::Op("[") => {
            let mut items = Vec::new();
            if toks.get(*pos).map(|t| &t.0) == Some(&Tok::Op("]")) {
                *pos += 1;
                return Some(Value::List(items));
            }
            loop {
                items.push(recorded(toks, pos)?);
                let (sep, _) = toks.get(*pos)?;
                *pos += 1;
                match sep {
                    Tok::Op(",") => continue,
                    Tok::Op("]") => break,
                    _ => return None,
                }
            }
            Value::List(items)
        }
        Tok::Op("{") => {
            let mut entries = BTreeMap::new();
            if toks.get(*pos).map(|t| &t.0) == Some(&Tok::Op("}")) {
                *pos += 1;
                return Some(Value::Map(entries));
            }
            loop {
                let (Tok::Str(key), _) = toks.get(*pos)? else {
                    return None;
                };
                if toks.get(*pos + 1).map(|t| &t.0) != Some(&Tok::Op(":")) {
                    return None;
                }
                *pos += 2;
                entries.insert(key.clone(), recorded(toks, pos)?);
                let (sep, _) = toks.get(*pos)?;
                *pos += 1;
                match sep {
                    Tok::Op(",") => continue,
                    Tok::Op("}") => break,
                    _ => return None,
                }
            }
            Value::Map(entries)
        }
        Tok::Op(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(v: &[f64]) -> Value {
        Value::List(v.iter().map(|x| Value::Number(*x)).collect())
    }

    fn check(cond: &str, result: &Value) -> Result<bool, EvalError> {
        parse(cond).unwrap().eval(result)
    }

    #[test]
    fn conditions_real_templates_use_evaluate_as_argo_does() {
        let r = list(&[0.97]);
        assert_eq!(check("result[0] >= 0.95", &r), Ok(true));
        assert_eq!(check("result[0] < 0.95", &r), Ok(false));
        assert_eq!(check("len(result) > 0 && result[0] >= 0.9", &r), Ok(true));
        assert_eq!(check("all(result, {# < 1})", &list(&[0.1, 0.9])), Ok(true));
        assert_eq!(check("all(result, {# < 1})", &list(&[0.1, 1.5])), Ok(false));
        assert_eq!(check("any(result, {# > 1})", &list(&[0.1, 1.5])), Ok(true));
        assert_eq!(check("none(result, {# > 1})", &list(&[0.1])), Ok(true));
        assert_eq!(
            check("isNaN(result[0]) || result[0] < 5", &list(&[f64::NAN])),
            Ok(true)
        );
        assert_eq!(check("isInf(result[0])", &list(&[f64::INFINITY])), Ok(true));
        assert_eq!(check("default(result, 0) < 5", &Value::Nil), Ok(true));
        assert_eq!(check("isNil(result)", &Value::Nil), Ok(true));
        assert_eq!(check("result < 0.05", &Value::Number(0.01)), Ok(true));
        assert_eq!(check("result == 'ok'", &Value::Str("ok".into())), Ok(true));
        assert_eq!(
            check("asInt(result) == 3", &Value::Str("3".into())),
            Ok(true)
        );
        assert_eq!(
            check("asFloat(result) > 2.5", &Value::Str("3.1".into())),
            Ok(true)
        );
        assert_eq!(check("not (result[0] > 1) and true", &r), Ok(true));
        assert_eq!(check("!(result[0] > 1) or false", &r), Ok(true));
        assert_eq!(check("(result[0] * 100 - 7) / 2 >= 45", &r), Ok(true));
        assert_eq!(check("result[-1] == 0.97", &r), Ok(true));
        assert_eq!(check("4 % 2 == 0", &r), Ok(true));
        assert_eq!(check("1e3 == 1000", &r), Ok(true));
    }

    fn json_object(entries: &[(&str, Value)]) -> Value {
        Value::Map(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    /// The conditions the corpus writes on Argo's web provider's results: a member of an
    /// object, by `.` or `['...']`, compared with a string or number; a missing member is nil.
    #[test]
    fn members_of_a_json_result_compare_as_in_expr_lang() {
        let version = json_object(&[
            ("major", Value::Str("1".into())),
            ("minor", Value::Str("31".into())),
        ]);
        assert_eq!(check("result.major == '1'", &version), Ok(true));
        assert_eq!(check("result['minor'] == \"31\"", &version), Ok(true));
        assert_eq!(check("result.major == 1", &version), Ok(false));
        assert_eq!(check("result.absent == nil", &version), Ok(true));
        assert_eq!(check("asInt(result.minor) >= 30", &version), Ok(true));
        assert_eq!(check("len(result) == 2", &version), Ok(true));
        let dns = json_object(&[
            ("Status", Value::Number(0.0)),
            (
                "Answer",
                Value::List(vec![json_object(&[("data", Value::Str("1.2.3.4".into()))])]),
            ),
        ]);
        assert_eq!(check("result.Status == 999", &dns), Ok(false));
        assert_eq!(check("result.Status == 0", &dns), Ok(true));
        assert_eq!(check("result.Answer[0].data == '1.2.3.4'", &dns), Ok(true));
        assert_eq!(
            check("result.Status < 1 && result.Status >= -1", &dns),
            Ok(true)
        );
        let status = json_object(&[("status", Value::Str("200".into()))]);
        assert_eq!(check("result.status == \"200\"", &status), Ok(true));
        assert_eq!(check("result.status != \"200\"", &status), Ok(false));
        assert_eq!(check("result >= 'b'", &Value::Str("c".into())), Ok(true));
        assert_eq!(
            check("result == 'It worked!'", &Value::Str("It worked!".into())),
            Ok(true)
        );
        assert!(check("result.major == '1'", &Value::Nil)
            .unwrap_err()
            .0
            .contains("cannot fetch \"major\" from nil"));
        assert!(check("result[0] == 1", &version).is_err());
        assert_eq!(parse("result.").unwrap_err().column, 8);
        assert_eq!(parse("result.1").unwrap_err().column, 7);
    }

    #[test]
    fn evaluation_problems_are_errors_not_panics() {
        let empty = list(&[]);
        assert!(check("result[0] >= 0.95", &empty)
            .unwrap_err()
            .0
            .contains("index out of range"));
        assert!(check("result[0]", &list(&[1.0]))
            .unwrap_err()
            .0
            .contains("expected bool"));
        assert!(check("result >= 1", &list(&[1.0])).is_err());
        assert!(check("len(result) > 0", &Value::Number(1.0)).is_err());
        assert!(check("1 % 0 == 0", &empty).is_err());
    }

    #[test]
    fn unsupported_syntax_is_refused_at_its_column() {
        let e = parse("result[0] >= 0.95 && foo(result)").unwrap_err();
        assert_eq!(e.column, 22);
        assert!(e.message.contains("unsupported name \"foo\""), "{e}");
        assert_eq!(parse("result[0] >=").unwrap_err().column, 13);
        assert_eq!(parse("result ? 1 : 2").unwrap_err().column, 8);
        assert_eq!(parse("# > 1").unwrap_err().column, 1);
        assert_eq!(parse("1 < result < 2").unwrap_err().column, 12);
        assert!(parse("len(result, 1)").is_err());
        assert!(parse("'open").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn a_recorded_value_reads_back() {
        for v in [
            list(&[0.97, f64::INFINITY, -f64::INFINITY, -2.5]),
            list(&[]),
            Value::Nil,
            Value::Str("a, \"b\"]".into()),
            Value::List(vec![Value::Bool(true), Value::Number(1e-7)]),
            json_object(&[
                ("a b", Value::Str("x".into())),
                ("n", json_object(&[("m", list(&[1.0]))])),
            ]),
            json_object(&[]),
        ] {
            assert_eq!(
                Value::parse_recorded(&v.to_string()),
                Some(v.clone()),
                "{v}"
            );
        }
        let nan = Value::parse_recorded(&list(&[f64::NAN]).to_string()).unwrap();
        assert_eq!(nan.to_string(), "[NaN]");
        assert_eq!(Value::parse_recorded("[1,"), None);
        assert_eq!(Value::parse_recorded("result"), None);
    }

    proptest! {
        #[test]
        fn a_recorded_number_list_reads_back(xs in proptest::collection::vec(proptest::num::f64::ANY, 0..5)) {
            let v = list(&xs);
            let back = Value::parse_recorded(&v.to_string());
            prop_assert_eq!(back.map(|b| b.to_string()), Some(v.to_string()));
        }

        #[test]
        fn parsing_any_text_never_panics(text in "\\PC{0,40}") {
            if let Ok(c) = parse(&text) {
                let _ = c.eval(&list(&[1.0, f64::NAN]));
            }
        }

        #[test]
        fn a_threshold_compares_as_the_numbers_do(x in -1e6f64..1e6, t in -1e6f64..1e6) {
            let r = list(&[x]);
            prop_assert_eq!(check(&format!("result[0] >= {t:?}"), &r), Ok(x >= t));
            prop_assert_eq!(check(&format!("result[0] < {t:?}"), &r), Ok(x < t));
            prop_assert_eq!(check(&format!("all(result, {{# <= {t:?}}})"), &r), Ok(x <= t));
        }
    }
}
