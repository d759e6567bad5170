//! Shell text as bash reads it, for [`super::curl`]: commands and their words, with quotes,
//! escapes, continuations, and shell variables marked where they stood (they become
//! `{{env.NAME}}` once a word is in its place).

/// Where a shell variable (`$NAME`, `${NAME}`, a command's output `$(…)`) stood in a word:
/// `VAR_OPEN NAME VAR_CLOSE` (private-use characters no command holds), turned into
/// `{{env.NAME}}` once the word is in its place (`templated` in [`super::curl`]).
pub(super) const VAR_OPEN: char = '\u{e000}';
pub(super) const VAR_CLOSE: char = '\u{e001}';

/// A shell variable or command substitution after a `$` (or a backquote), as a marked name:
/// `$NAME`, `${NAME}` (a `${NAME:-default}`'s name), `$(command)` and `` `command` `` as
/// `COMMAND_OUTPUT`. `None`: the `$` is a character.
fn shell_variable(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, backquote: bool) -> Option<String> {
    let mark = |name: &str| format!("{VAR_OPEN}{name}{VAR_CLOSE}");
    if backquote {
        for c in chars.by_ref() {
            if c == '`' {
                break;
            }
        }
        return Some(mark("COMMAND_OUTPUT"));
    }
    match chars.peek().copied() {
        Some('{') => {
            chars.next();
            let inner: String = chars.by_ref().take_while(|c| *c != '}').collect();
            let name: String = inner.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            Some(mark(if name.is_empty() { "SHELL_VALUE" } else { &name }))
        }
        Some('(') => {
            let mut depth = 0;
            for c in chars.by_ref() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            Some(mark("COMMAND_OUTPUT"))
        }
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            let mut name = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '_') {
                name.push(c);
                chars.next();
            }
            Some(mark(&name))
        }
        _ => None,
    }
}

/// Splits shell text into words as bash would for a simple command: single quotes, double quotes
/// (with `\` before `"`, `\`, `$` and a newline), ANSI-C `$'…'` (as Chrome writes bodies),
/// backslash escapes and line continuations; shell variables and command substitutions marked
/// (they become `{{env.NAME}}`). Words of each command (`;`, `&&`, `||`, `|`, a newline not
/// continued) are a list of their own; redirections (`> file`, `2>&1`, `< file`) are left out.
pub(super) fn shell_words(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut words = Words { commands: vec![Vec::new()], word: None, skip_next: false };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some(e) => words.word().push(e),
                None => {}
            },
            '\'' => single_quoted(&mut chars, words.word())?,
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                ansi_c_quoted(&mut chars, words.word())?;
            }
            '$' | '`' => push_variable(&mut chars, c == '`', words.word()),
            '"' => double_quoted(&mut chars, words.word())?,
            ' ' | '\t' | '\r' => words.end_word(),
            '\n' | ';' | '|' => {
                words.end_command();
                if c == '|' && chars.peek() == Some(&'|') {
                    chars.next();
                }
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                words.end_command();
            }
            '>' | '<' => words.redirection(&mut chars),
            '#' if words.word.is_none() => {
                // A comment, to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                words.end_command();
            }
            c => words.word().push(c),
        }
    }
    words.end_word();
    Ok(words.commands.into_iter().filter(|c| !c.is_empty()).collect())
}

/// The words [`shell_words`] has read so far: each command's, the one being read, and whether
/// the next is a redirection's target (left out).
struct Words {
    commands: Vec<Vec<String>>,
    word: Option<String>,
    skip_next: bool,
}

impl Words {
    /// The word being read, started empty when none is.
    fn word(&mut self) -> &mut String {
        self.word.get_or_insert_with(String::new)
    }

    /// Ends the word being read: one more word of the last command, or left out when it is a
    /// redirection's target.
    fn end_word(&mut self) {
        if let Some(w) = self.word.take() {
            if std::mem::take(&mut self.skip_next) {
                return;
            }
            self.commands.last_mut().unwrap().push(w);
        }
    }

    /// Ends the word being read and its command: what follows is another command's.
    fn end_command(&mut self) {
        self.end_word();
        self.commands.push(Vec::new());
    }

    /// Leaves out a redirection whose `>` or `<` was just read (`> file`, `>> file`, `2>&1`,
    /// `< file`): the descriptor's digits before it, and the file word after it.
    fn redirection(&mut self, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        if self.word.as_deref().is_some_and(|w| w.chars().all(|c| c.is_ascii_digit())) {
            self.word = None;
        }
        self.end_word();
        while chars.peek().is_some_and(|c| matches!(c, '>' | '&')) {
            chars.next();
        }
        if chars.peek().is_some_and(char::is_ascii_digit) {
            chars.next();
        } else {
            self.skip_next = true;
        }
    }
}

/// A shell variable or command substitution after a `$` (or a backquote) onto `w`, marked; the
/// `$` itself when none follows.
fn push_variable(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, backquote: bool, w: &mut String) {
    match shell_variable(chars, backquote) {
        Some(var) => w.push_str(&var),
        None => w.push('$'),
    }
}

/// A single-quoted string after its `'` onto `w`, every character as it is, to the closing `'`.
fn single_quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, w: &mut String) -> Result<(), String> {
    loop {
        match chars.next() {
            Some('\'') => return Ok(()),
            Some(c) => w.push(c),
            None => return Err("a single quote is not closed".into()),
        }
    }
}

/// An ANSI-C `$'…'` string after its `'` onto `w`, its escapes (`\n`, `\t`, `\r`, `\xHH`,
/// `\uHHHH`, `\` before any other character) read, to the closing `'`.
fn ansi_c_quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, w: &mut String) -> Result<(), String> {
    loop {
        match chars.next() {
            Some('\'') => return Ok(()),
            Some('\\') => match chars.next() {
                Some('n') => w.push('\n'),
                Some('t') => w.push('\t'),
                Some('r') => w.push('\r'),
                Some('x') => {
                    let hex: String = (0..2).filter_map(|_| chars.next()).collect();
                    let byte = u8::from_str_radix(&hex, 16).map_err(|_| format!("bad escape \\x{hex}"))?;
                    w.push(byte as char);
                }
                Some('u') => {
                    let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                    let code = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad escape \\u{hex}"))?;
                    w.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                Some(e) => w.push(e),
                None => return Err("a $'…' quote is not closed".into()),
            },
            Some(c) => w.push(c),
            None => return Err("a $'…' quote is not closed".into()),
        }
    }
}

/// A double-quoted string after its `"` onto `w`, to the closing `"`: `\` escapes `"`, `\`,
/// `$`, a backquote and a newline (and is kept before anything else); shell variables marked.
fn double_quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, w: &mut String) -> Result<(), String> {
    loop {
        match chars.next() {
            Some('"') => return Ok(()),
            Some('\\') => match chars.next() {
                Some(e @ ('"' | '\\' | '$' | '`')) => w.push(e),
                Some('\n') => {}
                Some(e) => {
                    w.push('\\');
                    w.push(e);
                }
                None => return Err("a double quote is not closed".into()),
            },
            Some(c @ ('$' | '`')) => push_variable(chars, c == '`', w),
            Some(c) => w.push(c),
            None => return Err("a double quote is not closed".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_read_quotes_escapes_and_continuations_as_bash_does() {
        let text = "curl 'http://h/a b' \\\n  -H \"X: \\\"q\\\"\" --data-raw $'{\"a\":\"line\\nnext\\u00e9\"}' && echo hi\n# c\ncurl x";
        let words = shell_words(text).unwrap();
        assert_eq!(words[0], ["curl", "http://h/a b", "-H", "X: \"q\"", "--data-raw", "{\"a\":\"line\nnexté\"}"]);
        assert_eq!(words[1], ["echo", "hi"]);
        assert_eq!(words[2], ["curl", "x"]);
        assert!(shell_words("curl 'open").unwrap_err().contains("not closed"));
    }
}
