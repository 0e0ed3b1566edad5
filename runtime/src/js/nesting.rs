//! A bound on how deep a script's syntax tree can be, computed on tokens
//! before boa sees the text.
//!
//! boa's parser is recursive descent, its bytecode compiler recurses over
//! the tree and dropping the tree recurses too, so a deep tree overflows the
//! native stack, which aborts the process. Brackets are one way to nest;
//! prefix operators (`!!!!1`), right-associative chains (`a = a = a`,
//! `1 ** 1 ** 1`, `a ? 1 : a ? 1 : 1`, `x => x => 1`), left-associative ones
//! (`1 + 1 + 1`, `a.b.c`, `f()()()`, `(1, 1, 1)`, each a nested node too) and
//! statements without braces (`if (1) if (1) ...`, labels, `else if`) are
//! others.
//!
//! ESTIMATE
//! ========
//!
//! The text is split into tokens as boa splits it (strings, templates,
//! regular expressions, comments, Annex B's HTML-like comments), and every
//! token that can add a node above the next operand counts one: every
//! punctuator but `;` and closers, every keyword but the value ones (`this`,
//! `null`, ...), every opener and every template. A bracket pair is a
//! frame; within a frame, a *segment* is a run of tokens between statement
//! boundaries, and its depth is its count plus its deepest closed child:
//!
//! ```text
//!   depth(frame)   = 10 + max over its segments of (count + deepest child)
//!   estimate       = depth of the whole text
//! ```
//!
//! (a bracket pair weighs ten: boa parses what is inside through its whole
//! chain of precedence levels).
//!
//! A segment ends (the count restarts) only where a new node cannot sit
//! below the previous tokens: at `;` (unless `else` or `while` follows,
//! which continue an `if` or a `do`), at a line break between a token that
//! ends an expression and one that can only start a statement (automatic
//! semicolon insertion), after a block's `}` before such a token, and at
//! `,` in array literals, object literals and argument lists (which boa
//! keeps as flat lists). Everything else accumulates, so the estimate is at
//! least the tree's depth: each nested node of a segment owns a counted
//! token or a child frame.
//!
//! Where the text alone cannot tell a regular expression from a division
//! (after `}`, `++`, contextual keywords such as `yield`), or an HTML-like
//! `-->` comment from code, both readings must agree on where strings,
//! comments and brackets are; a text where they do not is refused rather
//! than guessed. Closers that do not match their opener are refused too
//! (boa would refuse them anyway; refusing keeps a misread from hiding
//! code).

/// The deepest estimate accepted. Real scripts estimate 100 to 150 (the
/// samples, prelude.js). Measured with boa 0.22 in a debug build (the
/// costliest; release frames are several times smaller), parsing, compiling
/// and dropping take at most about 24 KB of stack per unit (`x => x => ...`
/// and `await await ...`; `!` 21 KB, brackets 14 to 20 KB at ten units a
/// pair), so [`COMPILE_STACK`] holds the deepest accepted text about 2.5
/// times over. `parse_hostile::probe` in the runtime's tests re-measures.
pub(crate) const MAX_DEPTH: usize = 1_000;

/// What a bracket pair adds to the estimate: boa parses the inside of each
/// through its whole chain of precedence levels, about ten times the stack
/// a prefix operator takes.
const FRAME_WEIGHT: usize = 10;

/// The stack parsing and compiling run on (see `sandbox::on_compile_stack`):
/// address space, of which a compilation touches what it uses.
pub(crate) const COMPILE_STACK: usize = 64 << 20;

/// Why a text was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The estimate is above [`MAX_DEPTH`].
    TooDeep,
    /// A `/` or `-->` that the text alone cannot classify, in a form whose
    /// readings disagree.
    Ambiguous(&'static str),
    /// A closer that does not match the open bracket.
    Unbalanced,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooDeep => write!(
                f,
                "The script nests too deeply: operators, brackets and statements nest more than {MAX_DEPTH} levels."
            ),
            Refusal::Ambiguous(what) => write!(f, "{what}"),
            Refusal::Unbalanced => write!(f, "Brackets do not match."),
        }
    }
}

/// Checks that `source` nests no deeper than [`MAX_DEPTH`]; returns the
/// estimate.
pub(crate) fn check(source: &str) -> Result<usize, Refusal> {
    let depth = Scanner::new(source).run()?;
    if depth > MAX_DEPTH {
        return Err(Refusal::TooDeep);
    }
    Ok(depth)
}

/// What the previous token was, as far as the next one cares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prev {
    /// Start of text.
    Start,
    /// Ends an expression: identifier, literal, `]`, an object's `}`, a
    /// `)` other than a statement head's, template, regular expression,
    /// `this`, `null`, `break`, ...
    Value,
    /// A punctuator that expects an operand (not `)`, `]`, `}`, `++`, `--`).
    Punct(Punct),
    /// A keyword that expects an operand or a statement.
    Keyword(KeywordKind),
    /// `)` closing `if (...)`, `while (...)`, `for (...)`, `with (...)`,
    /// `switch (...)` or `catch (...)`.
    HeadClose,
    /// `}` of a frame read as a block or a function or class body.
    BlockClose,
    /// A contextual keyword (`yield`, `await`, `let`, ...), an escaped
    /// identifier, `++` or `--`: either an operand or an operator.
    Unsure,
    /// `.` or `?.`: the next word is a property name.
    Dot,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Punct {
    /// `(`, `[` or `${`.
    Open,
    /// `{`.
    OpenBrace,
    /// `*` (before a generator method's computed key).
    Star,
    /// `,`.
    Comma,
    /// `;`.
    Semicolon,
    /// `:`.
    Colon,
    /// `=>`.
    Arrow,
    /// Any other operator.
    Other,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum KeywordKind {
    /// `return`, `yield` (restricted: a line break ends the statement).
    Return,
    /// `else`, `do`, `try`, `catch`, `finally`, `class`: a `{` after them
    /// is a block.
    Block,
    /// Any other.
    Other,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The whole text.
    Top,
    /// `(`: `flat` for argument lists, `head` for statement heads.
    Paren { flat: bool, head: bool },
    /// `[`: `flat` for array literals.
    Bracket { flat: bool },
    /// `{`: `object` for object literals.
    Brace { object: bool },
    /// `${` in a template.
    Subst,
}

impl Kind {
    fn flat(self) -> bool {
        matches!(
            self,
            Kind::Paren { flat: true, .. }
                | Kind::Bracket { flat: true }
                | Kind::Brace { object: true }
        )
    }
}

struct Frame {
    kind: Kind,
    /// Counted tokens of the current segment.
    count: usize,
    /// Deepest child frame closed in the current segment.
    child: usize,
    /// Deepest segment so far.
    max: usize,
}

impl Frame {
    fn new(kind: Kind) -> Frame {
        Frame {
            kind,
            count: 0,
            child: 0,
            max: 0,
        }
    }

    fn end_segment(&mut self) {
        self.max = self.max.max(self.count + self.child);
        self.count = 0;
        self.child = 0;
    }
}

/// How a token may relate to a statement boundary before it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Starts {
    /// Can only start a statement after an operand (a word, a literal).
    Statement,
    /// Continues (`else`, `while`, `catch`, `in`, an operator, ...).
    Other,
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    frames: Vec<Frame>,
    prev: Prev,
    /// A line terminator since the previous token.
    newline: bool,
    /// Only whitespace, comments and line terminators since the last line
    /// terminator (where Annex B reads `-->` as a comment).
    line_start: bool,
    /// A `;` ended the previous token; the segment ends unless `else` or
    /// `while` follows.
    pending_semicolon: bool,
    /// The previous word was `if`, `while`, `for`, `with`, `switch` or
    /// `catch` (or `await` after `for`): the next `(` is a head.
    head_next: bool,
    /// The previous word was `for` (for `for await (`).
    after_for: bool,
    /// Bytes [`Scanner::readings_agree`] may still look ahead.
    lookahead: usize,
}

const AMBIGUOUS_SLASH: &str = "A `/` here could start a regular expression or be a division, and the two readings differ: put the regular expression in parentheses or use `new RegExp(...)`.";
const AMBIGUOUS_HTML: &str =
    "A line starting with `-->` is an HTML-like comment here; remove it or write it as `//`.";

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

fn is_whitespace(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\u{000B}' | '\u{000C}' | '\u{00A0}' | '\u{FEFF}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '$' | '_' | '\\' | '#')
        || (!c.is_ascii() && !is_whitespace(c) && !is_line_terminator(c))
}

/// Punctuators, longest first within each first character (boa's
/// `Operator` lexer takes the longest match).
const PUNCTUATORS: &[&str] = &[
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==", "!=",
    "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
    "<<", ">>", "**", "=", "!", "~", "<", ">", "+", "-", "*", "%", "&", "|", "^", "?", ":", ".",
    ",", ";",
];

fn keyword(word: &str) -> Option<Prev> {
    Some(match word {
        "this" | "super" | "null" | "true" | "false" | "break" | "continue" | "debugger" => {
            Prev::Value
        }
        "return" => Prev::Keyword(KeywordKind::Return),
        "else" | "do" | "try" | "catch" | "finally" | "class" => Prev::Keyword(KeywordKind::Block),
        "case" | "const" | "default" | "delete" | "export" | "extends" | "for" | "function"
        | "if" | "import" | "in" | "instanceof" | "new" | "switch" | "throw" | "typeof" | "var"
        | "void" | "while" | "with" | "enum" => Prev::Keyword(KeywordKind::Other),
        "yield" | "await" | "let" | "async" | "of" | "get" | "set" | "static" | "implements"
        | "package" | "protected" | "interface" | "private" | "public" => Prev::Unsure,
        _ => return None,
    })
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            frames: vec![Frame::new(Kind::Top)],
            prev: Prev::Start,
            newline: false,
            line_start: true,
            pending_semicolon: false,
            head_next: false,
            after_for: false,
            lookahead: 4 * text.len() + (64 << 10),
        }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.bytes.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn top(&mut self) -> &mut Frame {
        self.frames
            .last_mut()
            .expect("the top frame is never popped")
    }

    fn run(mut self) -> Result<usize, Refusal> {
        while let Some(c) = self.peek() {
            if is_line_terminator(c) {
                self.pos += c.len_utf8();
                self.newline = true;
                self.line_start = true;
            } else if is_whitespace(c) {
                self.pos += c.len_utf8();
            } else if self.text[self.pos..].starts_with("//") {
                self.skip_line();
            } else if self.text[self.pos..].starts_with("/*") {
                self.skip_block_comment();
            } else if self.text[self.pos..].starts_with("<!--") {
                self.skip_line();
            } else if self.line_start && self.text[self.pos..].starts_with("-->") {
                self.html_close()?;
            } else {
                self.token(c)?;
                self.line_start = false;
                self.newline = false;
            }
        }
        if self.frames.len() != 1 {
            return Err(Refusal::Unbalanced);
        }
        let top = self.top();
        top.end_segment();
        Ok(top.max)
    }

    /// Skips to the next line terminator.
    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            if is_line_terminator(c) {
                return;
            }
            self.pos += c.len_utf8();
        }
    }

    fn skip_block_comment(&mut self) {
        self.pos += 2;
        while let Some(c) = self.peek() {
            if self.text[self.pos..].starts_with("*/") {
                self.pos += 2;
                return;
            }
            if is_line_terminator(c) {
                self.newline = true;
                self.line_start = true;
            }
            self.pos += c.len_utf8();
        }
    }

    /// `-->` at the start of a line: a comment to the end of the line in
    /// boa (Annex B), `--` and `>` if boa does not see a line start here.
    /// Both readings agree when the rest of the line holds nothing that
    /// opens a string, template, comment, regular expression or bracket;
    /// its tokens then count as operators.
    fn html_close(&mut self) -> Result<(), Refusal> {
        let start = self.pos;
        self.skip_line();
        let rest = &self.text[start + 3..self.pos];
        if rest.bytes().any(|b| b"`'\"/\\()[]{}".contains(&b)) || rest.contains("<!--") {
            return Err(Refusal::Ambiguous(AMBIGUOUS_HTML));
        }
        let count = rest.chars().filter(|c| !is_whitespace(*c)).count() + 2;
        self.top().count += count;
        Ok(())
    }

    /// Ends the segment before a token that `starts` a statement, when the
    /// previous token allows a boundary there.
    fn boundary(&mut self, starts: Starts, word: Option<&str>) {
        if self.pending_semicolon {
            self.pending_semicolon = false;
            if !matches!(word, Some("else" | "while")) {
                self.top().end_segment();
                return;
            }
        }
        if starts != Starts::Statement {
            return;
        }
        let ends_operand = matches!(self.prev, Prev::Value | Prev::BlockClose);
        if (self.prev == Prev::BlockClose || (self.newline && ends_operand))
            && !matches!(
                word,
                Some(
                    "else" | "while" | "catch" | "finally" | "in" | "instanceof" | "of" | "extends"
                )
            )
        {
            self.top().end_segment();
        }
    }

    fn token(&mut self, c: char) -> Result<(), Refusal> {
        let head_next = std::mem::take(&mut self.head_next);
        let after_for = std::mem::take(&mut self.after_for);
        match c {
            '\'' | '"' => {
                self.boundary(Starts::Statement, None);
                self.string(c);
                self.prev = Prev::Value;
            }
            '`' => {
                self.boundary(Starts::Other, None);
                self.top().count += 1;
                self.pos += 1;
                self.template()?;
            }
            '0'..='9' => {
                self.boundary(Starts::Statement, None);
                self.number();
            }
            '.' if self.peek_at(1).is_some_and(|b| b.is_ascii_digit()) => {
                self.boundary(Starts::Other, None);
                self.number();
            }
            '(' | '[' | '{' => {
                self.boundary(Starts::Other, None);
                self.pos += 1;
                self.open(c, head_next)?;
            }
            ')' | ']' | '}' => {
                self.boundary(Starts::Other, None);
                self.pos += 1;
                self.close(c)?;
            }
            '/' => {
                self.boundary(Starts::Other, None);
                self.slash()?;
            }
            c if is_word_char(c) => {
                let start = self.pos;
                while self.peek().is_some_and(is_word_char) {
                    self.bump();
                }
                let word = &self.text[start..self.pos];
                self.word(word, after_for);
            }
            _ => {
                self.boundary(Starts::Other, None);
                self.punctuator();
            }
        }
        Ok(())
    }

    fn word(&mut self, word: &'a str, after_for: bool) {
        let class = if self.prev == Prev::Dot || word.starts_with('#') {
            Some(Prev::Value)
        } else if word.contains('\\') {
            Some(Prev::Unsure)
        } else {
            keyword(word)
        };
        self.boundary(Starts::Statement, Some(word));
        match class {
            None | Some(Prev::Value) => self.prev = Prev::Value,
            Some(other) => {
                self.top().count += 1;
                self.prev = other;
                if matches!(word, "if" | "while" | "for" | "with" | "switch" | "catch") {
                    self.head_next = true;
                }
                self.after_for = word == "for";
                if word == "await" && after_for {
                    self.head_next = true;
                }
            }
        }
    }

    fn punctuator(&mut self) {
        let rest = &self.text[self.pos..];
        let p = PUNCTUATORS
            .iter()
            .find(|p| rest.starts_with(**p))
            // `?.` followed by a digit is `?` then a number.
            .map(|p| {
                if *p == "?." && rest.as_bytes().get(2).is_some_and(u8::is_ascii_digit) {
                    "?"
                } else {
                    p
                }
            });
        let Some(p) = p else {
            // Not a token boa knows: boa refuses it; count it.
            self.bump();
            self.top().count += 1;
            self.prev = Prev::Punct(Punct::Other);
            return;
        };
        self.pos += p.len();
        match p {
            ";" => {
                self.pending_semicolon = true;
                self.prev = Prev::Punct(Punct::Semicolon);
            }
            "," => {
                let top = self.top();
                if top.kind.flat() {
                    top.end_segment();
                } else {
                    top.count += 1;
                }
                self.prev = Prev::Punct(Punct::Comma);
            }
            _ => {
                self.top().count += 1;
                self.prev = match p {
                    "." | "?." => Prev::Dot,
                    "++" | "--" => Prev::Unsure,
                    ":" => Prev::Punct(Punct::Colon),
                    "*" => Prev::Punct(Punct::Star),
                    "=>" => Prev::Punct(Punct::Arrow),
                    _ => Prev::Punct(Punct::Other),
                };
            }
        }
    }

    fn number(&mut self) {
        let mut dot = false;
        while let Some(b) = self.peek_at(0) {
            if b == b'.' && !dot {
                dot = true;
            } else if !(b.is_ascii_alphanumeric() || b == b'_') {
                break;
            }
            self.pos += 1;
        }
        self.prev = Prev::Value;
    }

    /// A string literal; a line break ends it (boa refuses such a string),
    /// `\` escapes the next character, `\` CR LF continues the line.
    fn string(&mut self, quote: char) {
        self.pos += 1;
        while let Some(c) = self.peek() {
            if c == quote {
                self.pos += 1;
                return;
            }
            if c == '\n' || c == '\r' {
                return;
            }
            self.pos += c.len_utf8();
            if c == '\\' {
                if self.text[self.pos..].starts_with("\r\n") {
                    self.pos += 2;
                } else {
                    self.bump();
                }
            }
        }
    }

    /// Template characters after `` ` `` or a substitution's `}`: up to the
    /// closing `` ` `` (a value) or `${` (a new frame).
    fn template(&mut self) -> Result<(), Refusal> {
        while let Some(c) = self.bump() {
            match c {
                '`' => {
                    self.prev = Prev::Value;
                    return Ok(());
                }
                '\\' => {
                    self.bump();
                }
                '$' if self.peek_at(0) == Some(b'{') => {
                    if self.frames.len() > MAX_DEPTH / FRAME_WEIGHT + 1 {
                        return Err(Refusal::TooDeep);
                    }
                    self.pos += 1;
                    self.top().count += 1;
                    self.frames.push(Frame::new(Kind::Subst));
                    self.prev = Prev::Punct(Punct::Open);
                    return Ok(());
                }
                _ => {}
            }
        }
        // Unterminated: boa refuses it.
        self.prev = Prev::Value;
        Ok(())
    }

    fn open(&mut self, c: char, head: bool) -> Result<(), Refusal> {
        // Every open frame adds more than FRAME_WEIGHT to the estimate:
        // past this many the text is too deep whatever follows, and the
        // frames of 2 MB of `(` are never all held.
        if self.frames.len() > MAX_DEPTH / FRAME_WEIGHT + 1 {
            return Err(Refusal::TooDeep);
        }
        let prev = self.prev;
        let in_braces = matches!(self.top().kind, Kind::Brace { .. });
        let kind = match c {
            '(' => Kind::Paren {
                // A call's arguments follow an operand; `(` after a
                // keyword or contextual word is a grouping (or a head).
                flat: prev == Prev::Value,
                head,
            },
            '[' => Kind::Bracket {
                // An array literal where an operand is expected. In braces
                // (a block, an object, a class body), `[` after `{`, `,`,
                // `;` or `*` may be a computed key, which holds an
                // expression: not flat.
                flat: match prev {
                    Prev::Punct(Punct::Colon | Punct::Arrow | Punct::Other) => true,
                    Prev::Keyword(KeywordKind::Other | KeywordKind::Return) => true,
                    Prev::Start
                    | Prev::Punct(
                        Punct::Open | Punct::OpenBrace | Punct::Comma | Punct::Semicolon,
                    )
                    | Prev::Keyword(KeywordKind::Block) => !in_braces,
                    _ => false,
                },
            },
            _ => {
                let object = match prev {
                    // `{` after `(`, `[`, `${`, `,` or an operator.
                    Prev::Punct(Punct::Open | Punct::Comma | Punct::Other | Punct::Star) => true,
                    Prev::Punct(Punct::Colon) => {
                        matches!(self.top().kind, Kind::Brace { object: true })
                    }
                    Prev::Keyword(KeywordKind::Other) => true,
                    Prev::Keyword(KeywordKind::Return) => !self.newline,
                    // After `{`, `;`, `=>`, `)`, `}`, `else`, `catch`, ...
                    _ => false,
                };
                Kind::Brace { object }
            }
        };
        self.top().count += 1;
        self.frames.push(Frame::new(kind));
        self.prev = Prev::Punct(if c == '{' {
            Punct::OpenBrace
        } else {
            Punct::Open
        });
        Ok(())
    }

    fn close(&mut self, c: char) -> Result<(), Refusal> {
        if self.frames.len() == 1 {
            return Err(Refusal::Unbalanced);
        }
        let mut frame = self.frames.pop().expect("more than one frame");
        let matches = match frame.kind {
            Kind::Paren { .. } => c == ')',
            Kind::Bracket { .. } => c == ']',
            Kind::Brace { .. } | Kind::Subst => c == '}',
            Kind::Top => false,
        };
        if !matches {
            return Err(Refusal::Unbalanced);
        }
        frame.end_segment();
        let depth = FRAME_WEIGHT + frame.max;
        let parent = self.top();
        parent.child = parent.child.max(depth);
        self.prev = match frame.kind {
            Kind::Paren { head: true, .. } => Prev::HeadClose,
            Kind::Brace { object: false } => Prev::BlockClose,
            _ => Prev::Value,
        };
        if frame.kind == Kind::Subst {
            self.template()?;
        }
        Ok(())
    }

    /// A `/` that is not a comment: a division after an operand, a regular
    /// expression where an operand is expected, and where the previous
    /// token does not tell, a division only if both readings agree.
    fn slash(&mut self) -> Result<(), Refusal> {
        let regex = match self.prev {
            Prev::Value => false,
            Prev::Start | Prev::Punct(_) | Prev::Keyword(_) | Prev::HeadClose => true,
            Prev::Dot => false,
            Prev::BlockClose | Prev::Unsure => {
                if !self.readings_agree() {
                    return Err(Refusal::Ambiguous(AMBIGUOUS_SLASH));
                }
                false
            }
        };
        if regex {
            self.regex();
            self.prev = Prev::Value;
        } else {
            // `/` or `/=`.
            self.pos += 1;
            if self.peek_at(0) == Some(b'=') {
                self.pos += 1;
            }
            self.top().count += 1;
            self.prev = Prev::Punct(Punct::Other);
        }
        Ok(())
    }

    /// Whether reading the `/` at `pos` as a division and as the start of
    /// a regular expression finds the same strings, comments and brackets
    /// after it: no regular expression can end on this line, or its body
    /// holds none of them and no `/` or `*` follows it.
    ///
    /// The look-ahead of all such `/` together is bounded by
    /// [`Scanner::lookahead`] (a few times the text), so a text made of
    /// them cannot make the scan quadratic: past it, they are refused.
    fn readings_agree(&mut self) -> bool {
        let bytes = &self.text[self.pos + 1..];
        let mut class = false;
        let mut chars = bytes.char_indices();
        let mut end = None;
        let mut agree = true;
        while let Some((i, c)) = chars.next() {
            if i > self.lookahead {
                return false;
            }
            if is_line_terminator(c) {
                end = Some(i);
                break;
            }
            match c {
                '\\' => match chars.next() {
                    Some((_, n)) if !is_line_terminator(n) => {}
                    _ => {
                        end = Some(i);
                        break;
                    }
                },
                '[' => class = true,
                ']' => class = false,
                '/' if !class => {
                    let body = &bytes[..i];
                    let after = bytes[i + 1..].bytes().next();
                    agree = !body.bytes().any(|b| b"`'\"/()[]{}".contains(&b))
                        && !body.contains("<!--")
                        && !matches!(after, Some(b'/' | b'*'));
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let scanned = end.unwrap_or(bytes.len());
        self.lookahead = self.lookahead.saturating_sub(scanned);
        agree
    }

    /// A regular expression literal: to the `/` outside a class, then its
    /// flags. A line terminator ends it (boa refuses such a literal).
    fn regex(&mut self) {
        self.pos += 1;
        let mut class = false;
        while let Some(c) = self.peek() {
            if is_line_terminator(c) {
                return;
            }
            self.pos += c.len_utf8();
            match c {
                '\\' if self.peek().is_some_and(|n| !is_line_terminator(n)) => {
                    self.bump();
                }
                '[' => class = true,
                ']' => class = false,
                '/' if !class => break,
                _ => {}
            }
        }
        while self.peek().is_some_and(is_word_char) {
            self.bump();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> usize {
        Scanner::new(text).run().unwrap()
    }

    #[test]
    fn every_shape_counts() {
        let n = 50;
        for shape in [
            format!("{}1", "!".repeat(n)),
            format!("{}1", "typeof ".repeat(n)),
            format!("{}1", "a = ".repeat(n)),
            format!("1{}", " ** 1".repeat(n)),
            format!("1{}", " + 1".repeat(n)),
            format!("a{}", ".b".repeat(n)),
            format!("f{}", "()".repeat(n)),
            format!("(1{})", ", 1".repeat(n)),
            format!("{}1", "a ? 1 : ".repeat(n)),
            format!("{}1", "x => ".repeat(n)),
            format!("{}x;", "if (1) ".repeat(n)),
            format!("{}x;", "l: ".repeat(n)),
            format!("{}x", "`${".repeat(n)) + &"}`".repeat(n),
            format!("x{}", "``".repeat(n)),
            format!("if (a) x;{}", " else if (a) x;".repeat(n)),
            format!("if (a) x\n{}", "else if (a) x\n".repeat(n)),
            format!("{}x;{}", "do ".repeat(n), " while (1);".repeat(n)),
            // Comma expressions where a flat list could be mistaken.
            format!("try {{}} catch {{ 1{} }}", ", 1".repeat(n)),
            format!("{{ {{ 1{} }} }}", ", 1".repeat(n)),
            format!("x = {{ [1{}]: 1 }}", ", 1".repeat(n)),
            format!("class A {{ *[1{}]() {{}} }}", ", 1".repeat(n)),
            format!("class A {{ x = 1; [1{}] = 2 }}", ", 1".repeat(n)),
            format!("for (a[1{}] of b);", ", 1".repeat(n)),
            format!("if (a) (1{})", ", 1".repeat(n)),
            format!("return\n{{ 1{} }}", ", 1".repeat(n)),
        ] {
            assert!(depth(&shape) >= n, "{shape}: {}", depth(&shape));
        }
    }

    #[test]
    fn statements_and_lists_do_not_accumulate() {
        let n = 5_000;
        for flat in [
            "var a = 1 + 2;\n".repeat(n),
            "var a = 1 + 2\n".repeat(n),
            "if (a) { b = c + d }\n".repeat(n),
            "if(a){b=c+d}".repeat(n),
            "function f(){}".repeat(n),
            format!("[{}]", "-1, ".repeat(n)),
            format!("x = {{{}}}", "a: -1, ".repeat(n)),
            format!("f({})", "-1, ".repeat(n)),
            format!("x = {{a: [{}]}}", "-1, ".repeat(n)),
            format!("x = c ? [{}] : 0", "-1, ".repeat(n)),
            format!("x = '{}'", "!(".repeat(n)),
            format!("x = /{}/", "\\(".repeat(n)),
            format!("// {}", "((".repeat(n)),
            format!("/* {} */", "((".repeat(n)),
            format!("x = `{}`", "!((".repeat(n)),
        ] {
            assert!(depth(&flat) < 40, "{}: {}", &flat[..40], depth(&flat));
        }
    }

    #[test]
    fn hidden_code_is_seen() {
        let deep = "(".repeat(100) + &")".repeat(100);
        for text in [
            // A template's substitution is code.
            format!("`${{{deep}}}`"),
            // `\` CR LF continues a string; the quote after it closes it.
            format!("'a\\\r\nb' + {deep}"),
            // U+2028 ends a line comment.
            format!("// c\u{2028}{deep}"),
            // A division, not a regular expression.
            format!("a / 2 + {deep} / 2"),
            // A regular expression after `if (...)`.
            format!("if (a) /'/.test(b) + {deep}"),
        ] {
            assert!(depth(&text) >= 100, "{text:?}: {}", depth(&text));
        }
    }

    #[test]
    fn ambiguities_are_refused() {
        for text in [
            "{}\n/'/ + (((1)))",
            "function f(){}\n/(/",
            "a++ / '/' + 1",
            "x = 1\n--> ` and a template",
        ] {
            assert!(
                matches!(Scanner::new(text).run(), Err(Refusal::Ambiguous(_))),
                "{text}"
            );
        }
        // After an object literal, `/` is a division.
        assert!(Scanner::new("x = {}\n/'/ + (((1)))").run().is_ok());
        // Many ambiguous slashes, each looking ahead over a long line, are
        // refused rather than scanned quadratically.
        let many = format!("{}{}", "a++/[".repeat(20_000), "]".repeat(20_000));
        assert_eq!(
            Scanner::new(&many).run(),
            Err(Refusal::Ambiguous(AMBIGUOUS_SLASH))
        );
        // Readings that agree pass.
        assert!(Scanner::new("{}\n/a+/.test(b)").run().is_ok());
        assert!(Scanner::new("x = 1\n--> closing comment").run().is_ok());
    }

    /// The sample scripts and the prelude (a long real script) stay far
    /// below the bound.
    #[test]
    fn real_scripts_are_shallow() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let mut files = vec![format!("{root}/runtime/src/js/prelude.js")];
        for dir in ["sprocs/samples/js", "sprocs/fuzz"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
                files.push(entry.unwrap().path().display().to_string());
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let source = super::super::sandbox::wrapped(&text);
            let depth = check(&source).unwrap_or_else(|e| panic!("{file}: {e}"));
            println!("{file}: {depth}");
            assert!(depth < MAX_DEPTH / 4, "{file}: {depth}");
        }
    }

    #[test]
    fn open_frames_are_bounded_early() {
        for text in ["(".repeat(1 << 20), "`${".repeat(1 << 18)] {
            assert_eq!(Scanner::new(&text).run(), Err(Refusal::TooDeep));
        }
        // Just within: the estimate decides.
        let n = MAX_DEPTH / FRAME_WEIGHT / 2;
        let text = "(".repeat(n) + &")".repeat(n);
        assert!(Scanner::new(&text).run().is_ok());
    }

    #[test]
    fn mismatched_closers_are_refused() {
        for text in ["(]", ")", "(", "`${ ]`", "{ ) }"] {
            assert_eq!(Scanner::new(text).run(), Err(Refusal::Unbalanced), "{text}");
        }
    }
}
