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
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = text.chars().peekable();
    // A redirection's target word is skipped.
    let mut skip_next = false;
    let push = |word: &mut Option<String>, commands: &mut Vec<Vec<String>>, skip: &mut bool| {
        if let Some(w) = word.take() {
            if std::mem::take(skip) {
                return;
            }
            commands.last_mut().unwrap().push(w);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some(e) => word.get_or_insert_with(String::new).push(e),
                None => {}
            },
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a single quote is not closed".into()),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
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
            '$' | '`' => {
                let w = word.get_or_insert_with(String::new);
                match shell_variable(&mut chars, c == '`') {
                    Some(var) => w.push_str(&var),
                    None => w.push('$'),
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => w.push(e),
                            Some('\n') => {}
                            Some(e) => {
                                w.push('\\');
                                w.push(e);
                            }
                            None => return Err("a double quote is not closed".into()),
                        },
                        Some(c @ ('$' | '`')) => match shell_variable(&mut chars, c == '`') {
                            Some(var) => w.push_str(&var),
                            None => w.push('$'),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a double quote is not closed".into()),
                    }
                }
            }
            ' ' | '\t' | '\r' => push(&mut word, &mut commands, &mut skip_next),
            '\n' | ';' | '|' => {
                push(&mut word, &mut commands, &mut skip_next);
                if c == '|' && chars.peek() == Some(&'|') {
                    chars.next();
                }
                commands.push(Vec::new());
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                push(&mut word, &mut commands, &mut skip_next);
                commands.push(Vec::new());
            }
            '>' | '<' => {
                // `> file`, `>> file`, `2>&1`, `< file`: a redirection, not an argument.
                if word.as_deref().is_some_and(|w| w.chars().all(|c| c.is_ascii_digit())) {
                    word = None;
                }
                push(&mut word, &mut commands, &mut skip_next);
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&')) {
                    chars.next();
                }
                if chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                } else {
                    skip_next = true;
                }
            }
            '#' if word.is_none() => {
                // A comment, to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                push(&mut word, &mut commands, &mut skip_next);
                commands.push(Vec::new());
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    push(&mut word, &mut commands, &mut skip_next);
    Ok(commands.into_iter().filter(|c| !c.is_empty()).collect())
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
