//! Which names carry credentials: headers, cookies, query keys and body fields. One rule for
//! the engine's reports (what an error sample keeps of a request and its answer) and for the
//! importers (what they turn into `{{env.NAME}}`), so both hide the same things.

/// The mark a redacted value leaves in its place.
pub const REDACTED: &str = "[redacted]";

/// The words of a name, lower-case: `X-Api-Key` → `x api key`, `sessionId` → `session id`.
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut after_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            after_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && after_lower {
            out.push(std::mem::take(&mut word));
        }
        after_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Words that make a name a credential wherever they appear in one of its words
/// (`accesstoken`, `client_secret`, `X-Session-Id`).
const WITHIN: [&str; 11] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "session",
    "sessid",
    "apikey",
    "credential",
    "csrf",
    "xsrf",
];

/// Words that make a name a credential when they are one of its words (`X-Auth`, `sig`, but
/// not `author`).
const WHOLE: [&str; 10] = ["authorization", "auth", "cookie", "signature", "sig", "jwt", "pwd", "pass", "sid", "key"];

/// What a `…key` is a credential of (`api_key`, `X-Access-Key`, `Ocp-Apim-Subscription-Key`),
/// unlike `Idempotency-Key` or `Sec-WebSocket-Key`.
const KEY_OF: [&str; 12] = [
    "api",
    "access",
    "private",
    "secret",
    "subscription",
    "consumer",
    "client",
    "auth",
    "app",
    "license",
    "master",
    "signing",
];

/// Whether a header, a query key, a body field, a cookie or a variable named `name` holds a
/// credential. `key` counts as a word of its own only when it is the whole name (`?key=`).
pub fn is_credential(name: &str) -> bool {
    let w = words(name);
    if let [only] = &w[..]
        && only == "key"
    {
        return true;
    }
    w.iter().any(|x| WITHIN.iter().any(|c| x.contains(c)) || (x != "key" && WHOLE.contains(&x.as_str())))
        || w.windows(2).any(|p| p[1] == "key" && KEY_OF.contains(&p[0].as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_told_from_ordinary_ones() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "Set-Cookie",
            "X-Api-Key",
            "X-Goog-Api-Key",
            "Ocp-Apim-Subscription-Key",
            "X-Auth-Token",
            "X-Amz-Security-Token",
            "X-Client-Secret",
            "X-CSRF-Token",
            "api_key",
            "apiKey",
            "access_token",
            "refresh_token",
            "token",
            "key",
            "sig",
            "signature",
            "password",
            "secret",
            "auth",
            "session",
            "session_id",
            "sessionId",
            "PHPSESSID",
            "JSESSIONID",
            "client_secret",
            "shopToken",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "Content-Type",
            "Accept",
            "Host",
            "User-Agent",
            "X-Request-Id",
            "Idempotency-Key",
            "Sec-WebSocket-Key",
            "author",
            "authority",
            "keyword",
            "user",
            "q",
            "id",
            "page",
            "productId",
            "monkey",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }
}
