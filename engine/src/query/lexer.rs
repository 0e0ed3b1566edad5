//! Tokenizer: turns query text into tokens carrying their line and column.
//!
//! Identifiers and keywords are one token kind (keywords are recognised by the
//! parser, case-insensitively). Strings may use `'…'` or `"…"` with JSON-style
//! backslash escapes; numbers are JSON-style decimals read as doubles;
//! `@name` is a parameter; `--` starts a comment running to the end of the line.

use crate::query::QueryError;

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Param(String),
    Sym(&'static str),
    /// Text that cannot be tokenized (described); always the last token, so
    /// the parser reports an earlier unexpected token first.
    Error(String),
    Eof,
}

/// A token and where it starts (1-based line and column, in characters),
/// with its extent in the text as character offsets (`start..end`).
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) line: u32,
    pub(crate) col: u32,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Tok {
    /// How the token is named in error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier '{s}'"),
            Tok::Str(s) => format!("string '{}'", truncate(s)),
            Tok::Num(n) => format!("number {n}"),
            Tok::Param(p) => format!("parameter '{p}'"),
            Tok::Sym(s) => format!("'{s}'"),
            Tok::Error(s) => s.clone(),
            Tok::Eof => "end of input".to_owned(),
        }
    }
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 40 {
        let mut t: String = s.chars().take(40).collect();
        t.push('…');
        t
    } else {
        s.to_owned()
    }
}

/// Symbols, longest first so that `>=` wins over `>`.
const SYMBOLS: [&str; 31] = [
    ">>>", "!=", "<>", "<=", ">=", "||", "??", "<<", ">>", "=", "<", ">", "+", "-", "*", "/", "%",
    "&", "|", "^", "~", "(", ")", "[", "]", "{", "}", ",", ".", ":", "?",
];

/// Splits `text` into tokens, ending with [`Tok::Eof`] or, when some text
/// cannot be tokenized, with a [`Tok::Error`] token at that position.
pub(crate) fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    if let Err(QueryError::Syntax {
        line,
        column,
        found,
    }) = tokenize_into(text, &mut out)
    {
        let at = text.chars().count();
        out.push(Token {
            tok: Tok::Error(found),
            line,
            col: column,
            start: at,
            end: at,
        });
    }
    out
}

fn tokenize_into(text: &str, out: &mut Vec<Token>) -> Result<(), QueryError> {
    let chars: Vec<char> = text.chars().collect();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let err = |line: u32, col: u32, found: String| QueryError::Syntax {
        line,
        column: col,
        found,
    };
    while i < chars.len() {
        let c = chars[i];
        let (start_line, start_col, start) = (line, col, i);
        // Advances over `n` characters, tracking line and column.
        let advance = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
            for _ in 0..n {
                if chars.get(*i) == Some(&'\n') {
                    *line += 1;
                    *col = 1;
                } else {
                    *col += 1;
                }
                *i += 1;
            }
        };
        if c.is_whitespace() {
            advance(&mut i, &mut line, &mut col, 1);
            continue;
        }
        if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                advance(&mut i, &mut line, &mut col, 1);
            }
            continue;
        }
        let tok = if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                advance(&mut i, &mut line, &mut col, 1);
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c == '@' {
            let start = i;
            advance(&mut i, &mut line, &mut col, 1);
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                advance(&mut i, &mut line, &mut col, 1);
            }
            if i == start + 1 {
                return Err(err(start_line, start_col, "'@'".to_owned()));
            }
            Tok::Param(chars[start..i].iter().collect())
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                advance(&mut i, &mut line, &mut col, 1);
            }
            if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
                advance(&mut i, &mut line, &mut col, 1);
                while i < chars.len() && chars[i].is_ascii_digit() {
                    advance(&mut i, &mut line, &mut col, 1);
                }
            }
            if matches!(chars.get(i), Some('e' | 'E')) {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('+' | '-')) {
                    j += 1;
                }
                if chars.get(j).is_some_and(char::is_ascii_digit) {
                    let n = j - i;
                    advance(&mut i, &mut line, &mut col, n);
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        advance(&mut i, &mut line, &mut col, 1);
                    }
                }
            }
            let s: String = chars[start..i].iter().collect();
            match s.parse::<f64>() {
                Ok(n) if n.is_finite() => Tok::Num(n),
                _ => return Err(err(start_line, start_col, format!("number {s}"))),
            }
        } else if c == '\'' || c == '"' {
            advance(&mut i, &mut line, &mut col, 1);
            let mut s = String::new();
            loop {
                let Some(&d) = chars.get(i) else {
                    return Err(err(start_line, start_col, "unterminated string".to_owned()));
                };
                advance(&mut i, &mut line, &mut col, 1);
                if d == c {
                    break;
                }
                if d != '\\' {
                    s.push(d);
                    continue;
                }
                let Some(&e) = chars.get(i) else {
                    return Err(err(start_line, start_col, "unterminated string".to_owned()));
                };
                let (el, ec) = (line, col);
                advance(&mut i, &mut line, &mut col, 1);
                match e {
                    'b' => s.push('\u{8}'),
                    'f' => s.push('\u{c}'),
                    'n' => s.push('\n'),
                    'r' => s.push('\r'),
                    't' => s.push('\t'),
                    'u' => {
                        let hex = |i: usize| -> Option<u32> {
                            let h: String = chars.get(i..i + 4)?.iter().collect();
                            u32::from_str_radix(&h, 16).ok()
                        };
                        let Some(u) = hex(i) else {
                            return Err(err(el, ec, "invalid escape '\\u'".to_owned()));
                        };
                        advance(&mut i, &mut line, &mut col, 4);
                        let code = if (0xD800..0xDC00).contains(&u)
                            && chars.get(i) == Some(&'\\')
                            && chars.get(i + 1) == Some(&'u')
                        {
                            match hex(i + 2) {
                                Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                    advance(&mut i, &mut line, &mut col, 6);
                                    0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                                }
                                _ => u,
                            }
                        } else {
                            u
                        };
                        s.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    }
                    other => s.push(other),
                }
            }
            Tok::Str(s)
        } else {
            let rest = &chars[i..];
            let Some(sym) = SYMBOLS.iter().find(|s| {
                let n = s.chars().count();
                rest.len() >= n && s.chars().zip(rest).all(|(a, b)| a == *b)
            }) else {
                return Err(err(start_line, start_col, format!("character '{c}'")));
            };
            advance(&mut i, &mut line, &mut col, sym.len());
            Tok::Sym(sym)
        };
        out.push(Token {
            tok,
            line: start_line,
            col: start_col,
            start,
            end: i,
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col,
        start: chars.len(),
        end: chars.len(),
    });
    Ok(())
}
