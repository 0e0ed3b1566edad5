//! Recursive-descent parser with a nesting-depth limit, plus the compile step
//! (name resolution and aggregate lifting).
//!
//! Binary operators use precedence climbing (lowest first): `? :`, `??`, OR,
//! AND, NOT, comparisons / IN / BETWEEN / LIKE, `||`, `|`, `^`, `&`, shifts,
//! `+ -`, `* / %`, unary `- + ~`, then postfix `.name` / `[expr]`.
//!
//! Every nested expression, every unary operator and every link of an
//! operator or postfix chain counts one level against [`MAX_DEPTH`]; the
//! resulting tree is therefore never deeper than the limit, which bounds all
//! later recursion (evaluation, resolution, clone, drop). Exceeding it is a
//! 400 "query nested too deeply", never a stack overflow.

use serde_json::Value;

use crate::query::QueryError;
use crate::query::ast::{
    AggKind, AggSpec, BinOp, Count, Expr, From, PathSeg, Query, RawFrom, RawQuery, RawSelect,
    Select, SortItem, Spans, SubKind, UnOp,
};
use crate::query::functions;
use crate::query::lexer::{Tok, Token, tokenize};

/// Maximum nesting depth of a query's expressions.
pub(crate) const MAX_DEPTH: usize = 128;

/// Words that cannot be used as identifiers (aliases, bindings).
const RESERVED: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "LIKE",
    "ESCAPE",
    "TOP",
    "VALUE",
    "DISTINCT",
    "ORDER",
    "BY",
    "ASC",
    "DESC",
    "OFFSET",
    "LIMIT",
    "JOIN",
    "AS",
    "GROUP",
    "TRUE",
    "FALSE",
    "NULL",
    "UNDEFINED",
    "EXISTS",
    "ARRAY",
    "UDF",
];

fn is_reserved(s: &str) -> bool {
    RESERVED.iter().any(|k| k.eq_ignore_ascii_case(s))
}

/// `a op b op c …` as a balanced tree of `op`, the operands in order.
fn balanced(op: BinOp, mut operands: Vec<Expr>) -> Expr {
    if operands.len() == 1 {
        return operands.pop().unwrap_or(Expr::Undefined);
    }
    let right = operands.split_off(operands.len() / 2);
    Expr::Binary(
        op,
        Box::new(balanced(op, operands)),
        Box::new(balanced(op, right)),
    )
}

/// Parses and compiles a query.
pub(crate) fn parse_query(text: &str) -> Result<Query, QueryError> {
    parse_query_spans(text).map(|(query, _)| query)
}

/// Parses and compiles a query, with where its top-level clauses are in
/// the text (for [`crate::query::plan`]).
pub(crate) fn parse_query_spans(text: &str) -> Result<(Query, Spans), QueryError> {
    let tokens = tokenize(text);
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
        params: Vec::new(),
    };
    let mut raw = p.query()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected());
    }
    let spans = std::mem::take(&mut raw.spans);
    Ok((compile(raw, p.params, fnv(text))?, spans))
}

/// FNV-1a, used to tie continuation tokens to their query.
pub(crate) fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    params: Vec<String>,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos.min(self.tokens.len() - 1)].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.tokens[(self.pos + n).min(self.tokens.len() - 1)].tok
    }

    /// Takes the token at the cursor. The cursor always advances (reads past
    /// the end see the final token again), so `self.pos -= 1` undoes a bump.
    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    fn unexpected(&self) -> QueryError {
        let t = &self.tokens[self.pos.min(self.tokens.len() - 1)];
        QueryError::Syntax {
            line: t.line,
            column: t.col,
            found: t.tok.describe(),
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), QueryError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        let yes = matches!(self.peek(), Tok::Sym(s) if *s == sym);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn expect_sym(&mut self, sym: &str) -> Result<(), QueryError> {
        if self.eat_sym(sym) {
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// An identifier that is not a keyword.
    fn ident(&mut self) -> Result<String, QueryError> {
        match self.peek() {
            Tok::Ident(s) if !is_reserved(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.unexpected()),
        }
    }

    /// `[AS] alias`, optional.
    fn alias(&mut self) -> Result<Option<String>, QueryError> {
        let explicit = self.eat_kw("AS");
        if explicit || matches!(self.peek(), Tok::Ident(s) if !is_reserved(s)) {
            return self.ident().map(Some);
        }
        Ok(None)
    }

    /// Enters one nesting level.
    fn enter(&mut self) -> Result<(), QueryError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let t = &self.tokens[self.pos.min(self.tokens.len() - 1)];
            return Err(QueryError::TooDeep {
                line: t.line,
                column: t.col,
                limit: MAX_DEPTH,
            });
        }
        Ok(())
    }

    fn leave(&mut self, n: usize) {
        self.depth -= n;
    }

    /// Records a parameter; returns its index in [`Query::params`].
    fn note_param(&mut self, name: &str) -> usize {
        match self.params.iter().position(|p| p == name) {
            Some(i) => i,
            None => {
                self.params.push(name.to_owned());
                self.params.len() - 1
            }
        }
    }

    fn count(&mut self) -> Result<Count, QueryError> {
        match self.peek().clone() {
            Tok::Num(n) if n >= 0.0 && n.fract() == 0.0 && n <= 9.0e15 => {
                self.pos += 1;
                Ok(Count::Lit(n as u64))
            }
            Tok::Param(p) => {
                self.pos += 1;
                self.note_param(&p);
                Ok(Count::Param(p))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// The character range of the tokens from `first` (a token index) to
    /// the last one taken.
    fn span_since(&self, first: usize) -> (usize, usize) {
        let start = self.tokens[first.min(self.tokens.len() - 1)].start;
        let end = self.tokens[(self.pos.max(1) - 1).min(self.tokens.len() - 1)].end;
        (start, end.max(start))
    }

    fn query(&mut self) -> Result<RawQuery, QueryError> {
        let mut spans = Spans::default();
        self.expect_kw("SELECT")?;
        let distinct = self.eat_kw("DISTINCT");
        let top = if self.eat_kw("TOP") {
            Some(self.count()?)
        } else {
            None
        };
        let select = if self.eat_sym("*") {
            RawSelect::Star
        } else if self.eat_kw("VALUE") {
            let first = self.pos;
            let e = self.expr()?;
            spans.select.push(self.span_since(first));
            if self.eat_kw("AS") {
                self.ident()?;
            }
            RawSelect::Value(e)
        } else {
            let mut items = Vec::new();
            loop {
                let first = self.pos;
                let e = self.expr()?;
                spans.select.push(self.span_since(first));
                let alias = self.alias()?;
                items.push((alias, e));
                if !self.eat_sym(",") {
                    break;
                }
            }
            RawSelect::List(items)
        };
        let from = if self.eat_kw("FROM") {
            let first = self.pos;
            let from = self.from()?;
            spans.from = Some(self.span_since(first));
            Some(from)
        } else {
            None
        };
        let filter = if self.eat_kw("WHERE") {
            let first = self.pos;
            let filter = self.expr()?;
            spans.filter = Some(self.span_since(first));
            Some(filter)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            loop {
                group_by.push(self.expr()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let mut order_by = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            loop {
                let first = self.pos;
                let expr = self.expr()?;
                spans.order_by.push(self.span_since(first));
                let descending = if self.eat_kw("DESC") {
                    true
                } else {
                    self.eat_kw("ASC");
                    false
                };
                order_by.push(SortItem { expr, descending });
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        let offset_limit = if self.eat_kw("OFFSET") {
            let offset = self.count()?;
            self.expect_kw("LIMIT")?;
            Some((offset, self.count()?))
        } else {
            None
        };
        Ok(RawQuery {
            distinct,
            top,
            select,
            from,
            filter,
            group_by,
            order_by,
            offset_limit,
            spans,
        })
    }

    fn from(&mut self) -> Result<RawFrom, QueryError> {
        let first = self.ident()?;
        let mut from = if self.eat_kw("IN") {
            // `FROM x IN c.arr`: iterate over an array of each document.
            let source = self.expr()?;
            let root = root_var(&source).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "the source of '{first}' in from must be a path such as c.items"
                ))
            })?;
            RawFrom {
                root_path: Vec::new(),
                names: vec![root, first],
                joins: vec![source],
                star_slot: 1,
                star_ok: true,
            }
        } else {
            let mut root_path = Vec::new();
            loop {
                if self.eat_sym(".") {
                    match self.bump() {
                        Tok::Ident(s) => root_path.push(PathSeg::Prop(s)),
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected());
                        }
                    }
                } else if self.eat_sym("[") {
                    match self.bump() {
                        Tok::Str(s) => root_path.push(PathSeg::Prop(s)),
                        Tok::Num(n) if n >= 0.0 && n.fract() == 0.0 => {
                            root_path.push(PathSeg::Index(n as usize))
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected());
                        }
                    }
                    self.expect_sym("]")?;
                } else {
                    break;
                }
            }
            let alias = self.alias()?;
            let name = match (alias, root_path.last()) {
                (Some(a), _) => a,
                (None, None) => first,
                (None, Some(PathSeg::Prop(p))) => p.clone(),
                (None, Some(PathSeg::Index(_))) => return Err(self.unexpected()),
            };
            RawFrom {
                root_path,
                names: vec![name],
                joins: Vec::new(),
                star_slot: 0,
                star_ok: true,
            }
        };
        while self.eat_kw("JOIN") {
            if from.joins.len() >= 10 {
                return Err(QueryError::Invalid(
                    "a query can have at most 10 joins".to_owned(),
                ));
            }
            let name = self.ident()?;
            self.expect_kw("IN")?;
            let source = self.expr()?;
            from.names.push(name);
            from.joins.push(source);
            from.star_ok = false;
        }
        Ok(from)
    }

    /// A full expression (one nesting level).
    fn expr(&mut self) -> Result<Expr, QueryError> {
        self.enter()?;
        let cond = self.coalesce()?;
        let out = if self.eat_sym("?") {
            let a = self.expr()?;
            self.expect_sym(":")?;
            let b = self.expr()?;
            Expr::Ternary(Box::new(cond), Box::new(a), Box::new(b))
        } else {
            cond
        };
        self.leave(1);
        Ok(out)
    }

    fn coalesce(&mut self) -> Result<Expr, QueryError> {
        let left = self.binary(1)?;
        if self.eat_sym("??") {
            self.enter()?;
            let right = self.coalesce();
            self.leave(1);
            return Ok(Expr::Coalesce(Box::new(left), Box::new(right?)));
        }
        Ok(left)
    }

    /// The binary operator at the cursor and its precedence.
    fn binop(&self) -> Option<(BinOp, u8)> {
        Some(match self.peek() {
            Tok::Ident(s) if s.eq_ignore_ascii_case("OR") => (BinOp::Or, 1),
            Tok::Ident(s) if s.eq_ignore_ascii_case("AND") => (BinOp::And, 2),
            Tok::Sym("=") => (BinOp::Eq, 4),
            Tok::Sym("!=" | "<>") => (BinOp::Ne, 4),
            Tok::Sym("<") => (BinOp::Lt, 4),
            Tok::Sym("<=") => (BinOp::Le, 4),
            Tok::Sym(">") => (BinOp::Gt, 4),
            Tok::Sym(">=") => (BinOp::Ge, 4),
            Tok::Sym("||") => (BinOp::Concat, 5),
            Tok::Sym("|") => (BinOp::BitOr, 6),
            Tok::Sym("^") => (BinOp::BitXor, 7),
            Tok::Sym("&") => (BinOp::BitAnd, 8),
            Tok::Sym("<<") => (BinOp::Shl, 9),
            Tok::Sym(">>") => (BinOp::Shr, 9),
            Tok::Sym(">>>") => (BinOp::UShr, 9),
            Tok::Sym("+") => (BinOp::Add, 10),
            Tok::Sym("-") => (BinOp::Sub, 10),
            Tok::Sym("*") => (BinOp::Mul, 11),
            Tok::Sym("/") => (BinOp::Div, 11),
            Tok::Sym("%") => (BinOp::Mod, 11),
            _ => return None,
        })
    }

    /// Precedence climbing over operators of precedence `min` and above.
    fn binary(&mut self, min: u8) -> Result<Expr, QueryError> {
        let mut levels = 0;
        let result = self.binary_inner(min, &mut levels);
        self.leave(levels);
        result
    }

    fn binary_inner(&mut self, min: u8, levels: &mut usize) -> Result<Expr, QueryError> {
        let mut left = if min <= 3 && self.is_kw("NOT") {
            self.pos += 1;
            self.enter()?;
            *levels += 1;
            Expr::Unary(UnOp::Not, Box::new(self.binary(3)?))
        } else {
            self.unary()?
        };
        loop {
            // IN, BETWEEN and LIKE, optionally negated, sit with the comparisons.
            if min <= 4 && self.at_predicate() {
                left = self.predicate(left, levels)?;
                continue;
            }
            let Some((op, prec)) = self.binop() else {
                break;
            };
            if prec < min {
                break;
            }
            self.pos += 1;
            if matches!(op, BinOp::And | BinOp::Or) {
                // A chain of one logical operator (the SDKs' `read_items`
                // sends hundreds of ORs) becomes a balanced tree: the same
                // value and short-circuit order, since both are
                // associative, at logarithmic depth.
                let mut operands = vec![left, self.binary(prec + 1)?];
                while self.binop().is_some_and(|(next, _)| next == op)
                    && !(min <= 4 && self.at_predicate())
                {
                    self.pos += 1;
                    operands.push(self.binary(prec + 1)?);
                }
                let depth = operands.len().next_power_of_two().trailing_zeros() as usize;
                for _ in 0..depth {
                    self.enter()?;
                    *levels += 1;
                }
                left = balanced(op, operands);
                continue;
            }
            self.enter()?;
            *levels += 1;
            let right = self.binary(prec + 1)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn at_predicate(&self) -> bool {
        let is = |t: &Tok| {
            matches!(t, Tok::Ident(s)
            if ["IN", "BETWEEN", "LIKE"].iter().any(|k| s.eq_ignore_ascii_case(k)))
        };
        is(self.peek()) || (self.is_kw("NOT") && is(self.peek_at(1)))
    }

    /// `[NOT] IN (…)`, `[NOT] BETWEEN a AND b`, `[NOT] LIKE p [ESCAPE c]`.
    #[inline(never)]
    fn predicate(&mut self, left: Expr, levels: &mut usize) -> Result<Expr, QueryError> {
        let negated = self.eat_kw("NOT");
        self.enter()?;
        *levels += 1;
        let left = Box::new(left);
        if self.eat_kw("IN") {
            self.expect_sym("(")?;
            let mut list = Vec::new();
            if !self.eat_sym(")") {
                loop {
                    list.push(self.expr()?);
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                self.expect_sym(")")?;
            }
            return Ok(Expr::In {
                expr: left,
                list,
                negated,
            });
        }
        if self.eat_kw("BETWEEN") {
            let low = Box::new(self.binary(5)?);
            self.expect_kw("AND")?;
            let high = Box::new(self.binary(5)?);
            return Ok(Expr::Between {
                expr: left,
                low,
                high,
                negated,
            });
        }
        self.expect_kw("LIKE")?;
        let pattern = Box::new(self.binary(5)?);
        let escape = if self.eat_kw("ESCAPE") {
            match self.bump() {
                Tok::Str(s) if s.chars().count() == 1 => s.chars().next(),
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected());
                }
            }
        } else {
            None
        };
        Ok(Expr::Like {
            expr: left,
            pattern,
            escape,
            negated,
        })
    }

    fn unary(&mut self) -> Result<Expr, QueryError> {
        let op = match self.peek() {
            Tok::Sym("-") => UnOp::Neg,
            Tok::Sym("+") => UnOp::Plus,
            Tok::Sym("~") => UnOp::BitNot,
            _ => return self.postfix(),
        };
        self.pos += 1;
        self.enter()?;
        let operand = self.unary();
        self.leave(1);
        let operand = operand?;
        Ok(match (op, operand) {
            (UnOp::Neg, Expr::Lit(v)) if v.is_number() => lit(v
                .as_f64()
                .and_then(|f| crate::query::eval::number(-f))
                .unwrap_or(Value::Null)),
            (op, e) => Expr::Unary(op, Box::new(e)),
        })
    }

    fn postfix(&mut self) -> Result<Expr, QueryError> {
        let mut levels = 0;
        let result = self.postfix_inner(&mut levels);
        self.leave(levels);
        result
    }

    fn postfix_inner(&mut self, levels: &mut usize) -> Result<Expr, QueryError> {
        let mut e = self.primary()?;
        loop {
            if self.eat_sym(".") {
                self.enter()?;
                *levels += 1;
                match self.bump() {
                    Tok::Ident(s) => e = Expr::Prop(Box::new(e), s),
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected());
                    }
                }
            } else if self.eat_sym("[") {
                self.enter()?;
                *levels += 1;
                let idx = self.expr()?;
                self.expect_sym("]")?;
                e = match idx {
                    Expr::Lit(v) if v.is_string() => match *v {
                        Value::String(s) => Expr::Prop(Box::new(e), s),
                        other => Expr::Index(Box::new(e), Box::new(lit(other))),
                    },
                    idx => Expr::Index(Box::new(e), Box::new(idx)),
                };
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self) -> Result<Vec<Expr>, QueryError> {
        self.expect_sym("(")?;
        let mut args = Vec::new();
        if self.eat_sym(")") {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if !self.eat_sym(",") {
                break;
            }
        }
        self.expect_sym(")")?;
        Ok(args)
    }

    /// Primary expressions. Kept small (dispatch only) because it is on the
    /// recursion path of every nesting level.
    fn primary(&mut self) -> Result<Expr, QueryError> {
        if self.peek() == &Tok::Sym("(")
            && !matches!(self.peek_at(1), Tok::Ident(s) if s.eq_ignore_ascii_case("SELECT"))
        {
            return self.paren();
        }
        self.primary_other()
    }

    #[inline(never)]
    fn paren(&mut self) -> Result<Expr, QueryError> {
        self.pos += 1;
        let e = self.expr()?;
        self.expect_sym(")")?;
        Ok(e)
    }

    #[inline(never)]
    fn primary_other(&mut self) -> Result<Expr, QueryError> {
        match self.peek() {
            Tok::Num(_) | Tok::Str(_) | Tok::Param(_) => self.literal(),
            Tok::Sym("(") => self.subquery(SubKind::Scalar),
            Tok::Sym("{") => self.object(),
            Tok::Sym("[") => self.array(),
            Tok::Ident(_) => self.ident_primary(),
            _ => Err(self.unexpected()),
        }
    }

    /// `( SELECT … )` at the cursor.
    #[inline(never)]
    fn subquery(&mut self, kind: SubKind) -> Result<Expr, QueryError> {
        self.expect_sym("(")?;
        self.enter()?;
        let raw = self.query();
        self.leave(1);
        let raw = raw?;
        self.expect_sym(")")?;
        Ok(Expr::RawSubquery(kind, Box::new(raw)))
    }

    #[inline(never)]
    fn literal(&mut self) -> Result<Expr, QueryError> {
        match self.bump() {
            Tok::Num(n) => Ok(lit(crate::query::eval::number(n).unwrap_or(Value::Null))),
            Tok::Str(s) => Ok(lit(Value::String(s))),
            Tok::Param(p) => Ok(Expr::Param(self.note_param(&p))),
            _ => {
                self.pos -= 1;
                Err(self.unexpected())
            }
        }
    }

    #[inline(never)]
    fn object(&mut self) -> Result<Expr, QueryError> {
        self.pos += 1;
        self.enter()?;
        let mut props: Vec<(String, Expr)> = Vec::new();
        if !self.eat_sym("}") {
            loop {
                let key = match self.bump() {
                    Tok::Ident(s) | Tok::Str(s) => s,
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected());
                    }
                };
                self.expect_sym(":")?;
                let v = self.expr()?;
                if props.iter().any(|(k, _)| *k == key) {
                    return Err(QueryError::Invalid(format!(
                        "duplicate property name '{key}' in object"
                    )));
                }
                props.push((key, v));
                if !self.eat_sym(",") {
                    break;
                }
            }
            self.expect_sym("}")?;
        }
        self.leave(1);
        Ok(Expr::Object(props))
    }

    #[inline(never)]
    fn array(&mut self) -> Result<Expr, QueryError> {
        self.pos += 1;
        self.enter()?;
        let mut items = Vec::new();
        if !self.eat_sym("]") {
            loop {
                items.push(self.expr()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
            self.expect_sym("]")?;
        }
        self.leave(1);
        Ok(Expr::Array(items))
    }

    #[inline(never)]
    fn ident_primary(&mut self) -> Result<Expr, QueryError> {
        let Tok::Ident(name) = self.peek().clone() else {
            return Err(self.unexpected());
        };
        let keyword = |k: &str| name.eq_ignore_ascii_case(k);
        let call = self.peek_at(1) == &Tok::Sym("(");
        if keyword("TRUE") || keyword("FALSE") || keyword("NULL") || keyword("UNDEFINED") {
            self.pos += 1;
            return Ok(match name.to_ascii_uppercase().as_str() {
                "TRUE" => lit(Value::Bool(true)),
                "FALSE" => lit(Value::Bool(false)),
                "NULL" => lit(Value::Null),
                _ => Expr::Undefined,
            });
        }
        if keyword("UDF") && self.peek_at(1) == &Tok::Sym(".") {
            self.pos += 2;
            let fname = match self.bump() {
                Tok::Ident(s) => s,
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected());
                }
            };
            self.enter()?;
            let args = self.args();
            self.leave(1);
            return Ok(Expr::Udf(fname, args?));
        }
        if (keyword("EXISTS") || keyword("ARRAY")) && call {
            self.pos += 1;
            let kind = if keyword("EXISTS") {
                SubKind::Exists
            } else {
                SubKind::Array
            };
            return self.subquery(kind);
        }
        if call {
            return self.call(name);
        }
        if is_reserved(&name) {
            return Err(self.unexpected());
        }
        self.pos += 1;
        Ok(Expr::Var(name))
    }

    #[inline(never)]
    fn call(&mut self, name: String) -> Result<Expr, QueryError> {
        let upper = name.to_ascii_uppercase();
        self.pos += 1;
        let agg = match upper.as_str() {
            "COUNT" => Some(AggKind::Count),
            "SUM" => Some(AggKind::Sum),
            "AVG" => Some(AggKind::Avg),
            "MIN" => Some(AggKind::Min),
            "MAX" => Some(AggKind::Max),
            _ => None,
        };
        let found = functions::lookup(&name);
        if agg.is_none() && found.is_none() {
            return Err(QueryError::UnknownFunction(name));
        }
        self.enter()?;
        let args = self.args();
        self.leave(1);
        let mut args = args?;
        if let Some(kind) = agg {
            if args.len() != 1 {
                return Err(QueryError::ArgumentCount {
                    name: upper,
                    expected: "1".to_owned(),
                    got: args.len(),
                });
            }
            let arg = args.pop().unwrap_or(Expr::Undefined);
            return Ok(Expr::Agg(kind, Box::new(arg)));
        }
        let (func, min, max) = found.ok_or_else(|| QueryError::UnknownFunction(name.clone()))?;
        if args.len() < min || args.len() > max {
            let expected = if min == max {
                min.to_string()
            } else if max == usize::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(QueryError::ArgumentCount {
                name: upper,
                expected,
                got: args.len(),
            });
        }
        Ok(Expr::Call(func, args))
    }
}

fn lit(v: Value) -> Expr {
    Expr::Lit(Box::new(v))
}

/// The identifier a path expression starts from (`c` in `c.a[0]`).
fn root_var(e: &Expr) -> Option<String> {
    let mut e = e;
    loop {
        match e {
            Expr::Var(name) => return Some(name.clone()),
            Expr::Prop(base, _) | Expr::Index(base, _) => e = base,
            _ => return None,
        }
    }
}

/// Direct children of an expression, mutably.
pub(crate) fn children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    match e {
        Expr::Lit(_)
        | Expr::Undefined
        | Expr::Param(_)
        | Expr::Var(_)
        | Expr::Slot(_)
        | Expr::AggRef(_)
        | Expr::GroupKey(_)
        | Expr::RawSubquery(..)
        | Expr::Subquery(..) => Vec::new(),
        Expr::Prop(b, _) | Expr::Unary(_, b) | Expr::Agg(_, b) => vec![&mut **b],
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
            vec![&mut **a, &mut **b]
        }
        Expr::In { expr, list, .. } => std::iter::once(&mut **expr)
            .chain(list.iter_mut())
            .collect(),
        Expr::Between {
            expr, low, high, ..
        } => vec![&mut **expr, &mut **low, &mut **high],
        Expr::Like { expr, pattern, .. } => vec![&mut **expr, &mut **pattern],
        Expr::Ternary(a, b, c) => vec![&mut **a, &mut **b, &mut **c],
        Expr::Object(props) => props.iter_mut().map(|(_, v)| v).collect(),
        Expr::Array(items) | Expr::Call(_, items) | Expr::Udf(_, items) => {
            items.iter_mut().collect()
        }
    }
}

/// Replaces identifiers by slots; `scope` is the visible binding names.
fn resolve(e: &mut Expr, scope: &[String]) -> Result<(), QueryError> {
    if matches!(e, Expr::RawSubquery(..)) {
        if let Expr::RawSubquery(kind, raw) = std::mem::replace(e, Expr::Undefined) {
            let q = compile_scoped(*raw, Vec::new(), 0, Some(scope))?;
            *e = Expr::Subquery(kind, Box::new(q));
        }
        return Ok(());
    }
    if let Expr::Var(name) = e {
        let slot = scope
            .iter()
            .rposition(|n| n == name)
            .ok_or_else(|| QueryError::UnknownIdentifier(name.clone()))?;
        *e = Expr::Slot(slot);
        return Ok(());
    }
    for c in children_mut(e) {
        resolve(c, scope)?;
    }
    Ok(())
}

fn contains_agg(e: &mut Expr) -> bool {
    matches!(e, Expr::Agg(..)) || children_mut(e).into_iter().any(contains_agg)
}

/// Lifts aggregates and GROUP BY keys out of a projection expression.
fn lift(e: &mut Expr, group_by: &[Expr], aggs: &mut Vec<AggSpec>) -> Result<(), QueryError> {
    if let Some(i) = group_by.iter().position(|g| g == e) {
        *e = Expr::GroupKey(i);
        return Ok(());
    }
    match e {
        Expr::Agg(kind, arg) => {
            if contains_agg(arg) {
                return Err(QueryError::Invalid("aggregate functions cannot be nested".to_owned()));
            }
            aggs.push(AggSpec { kind: *kind, arg: std::mem::replace(&mut **arg, Expr::Undefined) });
            *e = Expr::AggRef(aggs.len() - 1);
            Ok(())
        }
        Expr::Slot(_) => Err(QueryError::Invalid(
            "a projection with aggregates or group by may only refer to aggregates and group by expressions"
                .to_owned(),
        )),
        _ => {
            for c in children_mut(e) {
                lift(c, group_by, aggs)?;
            }
            Ok(())
        }
    }
}

fn no_agg(e: &mut Expr, clause: &str) -> Result<(), QueryError> {
    if contains_agg(e) {
        return Err(QueryError::Invalid(format!(
            "aggregate functions are not allowed in {clause}"
        )));
    }
    Ok(())
}

/// Resolves names and lifts aggregates.
fn compile(raw: RawQuery, params: Vec<String>, text_hash: u64) -> Result<Query, QueryError> {
    compile_scoped(raw, params, text_hash, None)
}

/// Compiles a query; `outer` is the enclosing query's binding names for a
/// (correlated) subquery, whose own bindings take the slots after them.
fn compile_scoped(
    raw: RawQuery,
    params: Vec<String>,
    text_hash: u64,
    outer: Option<&[String]>,
) -> Result<Query, QueryError> {
    let RawQuery {
        distinct,
        top,
        select,
        from,
        mut filter,
        mut group_by,
        mut order_by,
        offset_limit,
        spans: _,
    } = raw;
    let base = outer.map_or(0, <[String]>::len);
    let outer_scope = outer.unwrap_or(&[]).to_vec();
    let (from, scope) = match from {
        None => (None, outer_scope),
        Some(RawFrom {
            names, mut joins, ..
        }) if outer.is_some() => {
            // In a subquery only the iteration form makes sense: `x IN c.arr`
            // (plus JOINs) over the enclosing row.
            if joins.is_empty() || names.len() != joins.len() + 1 {
                return Err(QueryError::Invalid(
                    "a subquery's from must iterate over a value of the enclosing row, as in 'FROM t IN c.tags'"
                        .to_owned(),
                ));
            }
            let names: Vec<String> = names[1..].to_vec();
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) || outer_scope.contains(n) {
                    return Err(QueryError::Invalid(format!(
                        "duplicate alias '{n}' in from"
                    )));
                }
            }
            let mut scope = outer_scope;
            for (j, name) in joins.iter_mut().zip(&names) {
                resolve(j, &scope)?;
                no_agg(j, "join")?;
                scope.push(name.clone());
            }
            (
                Some(From {
                    base,
                    root_path: Vec::new(),
                    names,
                    joins,
                    star_slot: base,
                    star_ok: true,
                }),
                scope,
            )
        }
        Some(RawFrom {
            root_path,
            names,
            mut joins,
            star_slot,
            star_ok,
        }) => {
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(QueryError::Invalid(format!(
                        "duplicate alias '{n}' in from"
                    )));
                }
            }
            for (i, j) in joins.iter_mut().enumerate() {
                resolve(j, &names[..=i])?;
                no_agg(j, "join")?;
            }
            let scope = names.clone();
            (
                Some(From {
                    base: 0,
                    root_path,
                    names,
                    joins,
                    star_slot,
                    star_ok,
                }),
                scope,
            )
        }
    };
    if let Some(f) = &mut filter {
        resolve(f, &scope)?;
        no_agg(f, "where")?;
    }
    for g in &mut group_by {
        resolve(g, &scope)?;
        no_agg(g, "group by")?;
    }
    for s in &mut order_by {
        resolve(&mut s.expr, &scope)?;
        no_agg(&mut s.expr, "order by")?;
    }
    let mut select = match select {
        RawSelect::Star => {
            match &from {
                Some(f) if f.star_ok => {}
                Some(_) => {
                    return Err(QueryError::Invalid(
                        "'select *' is only valid with a single input set".to_owned(),
                    ));
                }
                None => {
                    return Err(QueryError::Invalid(
                        "'select *' requires a from clause".to_owned(),
                    ));
                }
            }
            Select::Star
        }
        RawSelect::Value(mut e) => {
            resolve(&mut e, &scope)?;
            Select::Value(e)
        }
        RawSelect::List(items) => {
            let mut out: Vec<(String, Expr)> = Vec::with_capacity(items.len());
            let mut unnamed = 0;
            for (alias, mut e) in items {
                let name = match (alias, &e) {
                    (Some(a), _) => a,
                    (None, Expr::Prop(_, n) | Expr::Var(n)) => n.clone(),
                    _ => {
                        unnamed += 1;
                        format!("${unnamed}")
                    }
                };
                if out.iter().any(|(n, _)| *n == name) {
                    return Err(QueryError::Invalid(format!(
                        "duplicate property name '{name}' in select"
                    )));
                }
                resolve(&mut e, &scope)?;
                out.push((name, e));
            }
            Select::List(out)
        }
    };
    let mut aggregates = Vec::new();
    let has_agg = match &mut select {
        Select::Star => false,
        Select::Value(e) => contains_agg(e),
        Select::List(items) => items.iter_mut().any(|(_, e)| contains_agg(e)),
    };
    if has_agg || !group_by.is_empty() {
        match &mut select {
            Select::Star => {
                return Err(QueryError::Invalid(
                    "'select *' is not valid with group by".to_owned(),
                ));
            }
            Select::Value(e) => lift(e, &group_by, &mut aggregates)?,
            Select::List(items) => {
                for (_, e) in items {
                    lift(e, &group_by, &mut aggregates)?;
                }
            }
        }
        // Cosmos DB accepts ORDER BY beside aggregates (`SELECT VALUE
        // SUM(c.x) FROM c ORDER BY c.y`): the rows are ordered before they
        // are aggregated, so the order changes nothing but which rows take
        // part (a single sort key drops rows where it is undefined). With
        // GROUP BY it refuses ORDER BY.
        if !group_by.is_empty() && !order_by.is_empty() {
            return Err(QueryError::Invalid(
                "order by is not supported with group by".to_owned(),
            ));
        }
    }
    Ok(Query {
        text_hash,
        distinct,
        top,
        select,
        from,
        filter,
        group_by,
        order_by,
        offset_limit,
        aggregates,
        params,
    })
}
