//! A small XML reader for what JMeter writes (`.jmx`): elements, attributes, text, CDATA,
//! comments, the five entities and character references. Not a validating parser; a document
//! that is cut short or badly nested is an error naming the line.

/// An element: its name, attributes in order, text, and child elements.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) text: String,
    pub(crate) children: Vec<Node>,
}

impl Node {
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The first child element named `name` whose `name` attribute is `prop` (JMeter's
    /// `<stringProp name="HTTPSampler.path">`), any of the property kinds when `name` is `*`.
    pub(crate) fn prop(&self, prop: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name.ends_with("Prop") && c.attr("name") == Some(prop))
    }

    /// A property's text (`stringProp`, `intProp`, `boolProp`, `longProp`).
    pub(crate) fn prop_text(&self, prop: &str) -> Option<&str> {
        self.prop(prop).map(|p| p.text.as_str())
    }
}

/// How deep elements may nest (JMeter's deepest plans are a few dozen levels): deeper is a
/// clear error, not a stack overflow in the walk that follows.
pub(crate) const DEPTH: usize = 1_000;

/// Decodes entities and character references in `s`; what is wrong, without its line (the
/// caller names it, counting lines only then: a document reads in linear time).
fn unescape(s: &str) -> Result<String, String> {
    if !s.contains('&') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after.find(';').ok_or_else(|| "an `&` without its `;`".to_string())?;
        let entity = &after[..end];
        let c = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            e if e.starts_with("#x") => {
                u32::from_str_radix(&e[2..], 16).ok().and_then(char::from_u32).unwrap_or('\u{fffd}')
            }
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32).unwrap_or('\u{fffd}'),
            e => return Err(format!("unknown entity `&{e};`")),
        };
        out.push(c);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// Parses a document; its root element.
pub(crate) fn parse(text: &str) -> Result<Node, String> {
    let mut stack: Vec<Node> = vec![Node::default()];
    let mut i = 0;
    let bytes = text.as_bytes();
    let line = |at: usize| line_of(text, at);
    while i < bytes.len() {
        if bytes[i] != b'<' {
            let end = text[i..].find('<').map_or(text.len(), |e| i + e);
            let chunk = unescape(&text[i..end]).map_err(|e| format!("line {}: {e}", line(i)))?;
            if let Some(top) = stack.last_mut() {
                top.text.push_str(&chunk);
            }
            i = end;
            continue;
        }
        let rest = &text[i..];
        if let Some(r) = rest.strip_prefix("<!--") {
            let end = r.find("-->").ok_or_else(|| format!("line {}: a comment is not closed", line(i)))?;
            i += 4 + end + 3;
        } else if let Some(r) = rest.strip_prefix("<![CDATA[") {
            let end = r.find("]]>").ok_or_else(|| format!("line {}: a CDATA section is not closed", line(i)))?;
            if let Some(top) = stack.last_mut() {
                top.text.push_str(&r[..end]);
            }
            i += 9 + end + 3;
        } else if rest.starts_with("<?") || rest.starts_with("<!") {
            let end = rest.find('>').ok_or_else(|| format!("line {}: a declaration is not closed", line(i)))?;
            i += end + 1;
        } else if let Some(r) = rest.strip_prefix("</") {
            let end = r.find('>').ok_or_else(|| format!("line {}: a closing tag is not closed", line(i)))?;
            let name = r[..end].trim();
            let node = stack
                .pop()
                .filter(|_| !stack.is_empty())
                .ok_or_else(|| format!("line {}: `</{name}>` closes nothing", line(i)))?;
            if node.name != name {
                return Err(format!("line {}: `</{name}>` closes `<{}>`", line(i), node.name));
            }
            stack.last_mut().expect("the document node").children.push(node);
            i += 2 + end + 1;
        } else {
            // A start tag: name, attributes (quoted with " or '), `/>` or `>`.
            let mut j = i + 1;
            let name_end =
                text[j..].find(|c: char| c.is_whitespace() || c == '>' || c == '/').map_or(text.len(), |e| j + e);
            let mut node = Node { name: text[j..name_end].to_string(), ..Node::default() };
            if node.name.is_empty() {
                return Err(format!("line {}: a tag without a name", line(i)));
            }
            j = name_end;
            loop {
                let skip = text[j..]
                    .find(|c: char| !c.is_whitespace())
                    .ok_or_else(|| format!("line {}: `<{}` is cut short", line(i), node.name))?;
                j += skip;
                let r = &text[j..];
                if r.starts_with("/>") {
                    stack.last_mut().expect("the document node").children.push(node);
                    i = j + 2;
                    break;
                }
                if r.starts_with('>') {
                    if stack.len() > DEPTH {
                        return Err(format!("line {}: elements nest deeper than {DEPTH} levels", line(i)));
                    }
                    stack.push(node);
                    i = j + 1;
                    break;
                }
                let eq = r
                    .find('=')
                    .ok_or_else(|| format!("line {}: an attribute of `<{}>` has no value", line(j), node.name))?;
                let key = r[..eq].trim().to_string();
                let after = r[eq + 1..].trim_start();
                let quote = after
                    .chars()
                    .next()
                    .filter(|q| *q == '"' || *q == '\'')
                    .ok_or_else(|| format!("line {}: attribute `{key}` is not quoted", line(j)))?;
                let close = after[1..]
                    .find(quote)
                    .ok_or_else(|| format!("line {}: attribute `{key}` is not closed", line(j)))?;
                node.attrs.push((key, unescape(&after[1..1 + close]).map_err(|e| format!("line {}: {e}", line(j)))?));
                j += r.len() - after.len() + close + 2;
            }
        }
    }
    let mut doc = stack.pop().unwrap_or_default();
    if !stack.is_empty() {
        return Err(format!("the document is cut short: `<{}>` is not closed", doc.name));
    }
    doc.children.pop().ok_or_else(|| "no element".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_attributes_text_and_errors() {
        let doc = parse(
            "<?xml version=\"1.0\"?>\n<!-- c --><a x=\"1 &amp; 2\" y='q'><b>t&lt;&#65;&#x42;</b><c/><![CDATA[<raw>]]></a>",
        )
        .unwrap();
        assert_eq!((doc.name.as_str(), doc.attr("x"), doc.attr("y")), ("a", Some("1 & 2"), Some("q")));
        assert_eq!(doc.children[0].text, "t<AB");
        assert_eq!(doc.children[1].name, "c");
        assert_eq!(doc.text, "<raw>");
        assert!(parse("<a><b></a>").unwrap_err().contains("`</a>` closes `<b>`"));
        assert!(parse("<a>\n<b>").unwrap_err().contains("cut short"));
        assert!(parse("<a x=1/>").unwrap_err().contains("not quoted"));
        assert!(parse("<a>&nope;</a>").unwrap_err().contains("unknown entity"));
        let deep = "<a>".repeat(200_000);
        assert!(parse(&deep).unwrap_err().contains("line 1: elements nest deeper than 1000 levels"));
        assert_eq!(parse(&format!("{}{}", "<a>".repeat(DEPTH), "</a>".repeat(DEPTH))).map(|n| n.name), Ok("a".into()));
    }
}
