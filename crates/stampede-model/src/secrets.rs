//! Which names carry credentials: headers, cookies, query keys and body fields. One rule for
//! the engine's reports (what an error sample keeps of a request and its answer) and for the
//! importers (what they turn into `{{env.NAME}}`), so both hide the same things.

/// The mark a redacted value leaves in its place.
pub const REDACTED: &str = "[redacted]";

/// Words that make a name a credential wherever they stand in it (`x-auth-token`,
/// `client_secret`, `sessionId`). Compared without case, `-` and `_`.
const WORDS: [&str; 13] = [
    "authorization",
    "sessid",
    "cookie",
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "session",
    "credential",
    "signature",
    "privatekey",
    "accesskey",
];

/// Whole names that are credentials only alone (as a part of a longer name they are common
/// words: `monkey`, `authority`, `design`).
const WHOLE: [&str; 8] = ["auth", "key", "sig", "pass", "pwd", "sid", "jwt", "code"];

/// Header names that are credentials whatever their shape.
const HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "set-cookie"];

fn squashed(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '-' | '_' | '.' | ' ')).flat_map(char::to_lowercase).collect()
}

/// Whether a header, cookie, query key or body field called `name` holds a credential:
/// `Authorization`, `X-Api-Key`, `api_key`, `access_token`, `password`, `session_id`, `sig`…
pub fn is_credential(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if HEADERS.contains(&lower.as_str()) {
        return true;
    }
    let s = squashed(name);
    if WHOLE.contains(&s.as_str()) {
        return true;
    }
    // `x-api-key`, `subscription-key`, `x-amz-security-token`: a key or token at the end.
    let last = lower.rsplit(['-', '_', '.']).next().unwrap_or_default();
    if lower.len() > last.len() && matches!(last, "key" | "auth" | "sig" | "pass" | "pwd") {
        return true;
    }
    WORDS.iter().any(|w| s.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_told_from_ordinary_ones() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Set-Cookie",
            "X-Api-Key",
            "x-auth-token",
            "Ocp-Apim-Subscription-Key",
            "X-Amz-Security-Token",
            "api_key",
            "apiKey",
            "access_token",
            "token",
            "key",
            "sig",
            "password",
            "client_secret",
            "session_id",
            "sessionId",
            "PHPSESSID",
            "JSESSIONID",
            "x-csrf-token",
            "refresh_token",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in ["Content-Type", "Accept", "Host", "id", "page", "monkey", "keyword", "authority", "q", "user"] {
            assert!(!is_credential(name), "{name}");
        }
    }
}
