//! #33: `stampede import curl` means what real curl means. Each command line below is run by
//! real curl (Debian's, through bash, as a user pastes it) and, imported, by `stampede run`,
//! against one recording server on loopback; the requests must be the same: method, target,
//! headers by name (curl's own `User-Agent: curl/…` aside, the `Proxy-Connection` it sends a
//! proxy, and a `Content-Length: 0` Stampede sends where curl sends none: both say "no body",
//! RFC 9112 §6.3), and the body byte for byte (a multipart body's boundary aside, which each
//! draws at random).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A request as it arrived: method, target, headers (lower-case name, value) in order, body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Seen {
    /// The first value of header `name` (lower-case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A server on loopback that answers every request `200` (and closes) and keeps what it saw.
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(20)));
                if let Some(request) = read_request(&mut BufReader::new(&stream)) {
                    kept.lock().unwrap().push(request);
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            }
        });
        Recorder { port, seen }
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// One HTTP/1.1 request from `reader` (`None` at its end or on anything malformed).
pub(crate) fn read_request(reader: &mut impl BufRead) -> Option<Seen> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let (method, target) = (words.next()?.to_string(), words.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen { method, target, headers, body })
}

/// `seen` comparable across clients: the headers sorted by name, curl's own user agent and its
/// proxy's header left out, a proxy's absolute-form target as a path, and a multipart body's
/// boundary (and so its length) made one.
fn normal(mut seen: Seen, port: u16) -> Seen {
    seen.headers.retain(|(n, v)| {
        !(n == "user-agent" && (v.starts_with("curl/") || v.starts_with("stampede/")))
            && n != "proxy-connection"
            && !(n == "content-length" && v == "0")
    });
    if let Some(path) = seen.target.strip_prefix(&format!("http://127.0.0.1:{port}")) {
        seen.target = path.to_string();
    }
    let boundary = seen
        .headers
        .iter()
        .find(|(n, _)| n == "content-type")
        .and_then(|(_, v)| v.split_once("boundary=").map(|(_, b)| b.to_string()));
    if let Some(b) = boundary {
        let body = String::from_utf8_lossy(&seen.body).replace(&b, "BOUNDARY");
        seen.body = body.into_bytes();
        for (n, v) in &mut seen.headers {
            if n == "content-type" {
                *v = v.replace(&b, "BOUNDARY");
            }
            if n == "content-length" {
                *v = "(multipart)".into();
            }
        }
    }
    seen.headers.sort();
    seen
}

/// One command line: `URL` stands for the recorder's origin. `env`: values for the variables the
/// import names (by the end of their name), the shell's and Stampede's alike.
struct Case {
    command: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case { command: "curl URL/get", env: &[] },
    Case { command: "curl -X PUT URL/put -H 'X-A: 1' -H 'X-B:  two words ' -H 'X-Empty;'", env: &[] },
    Case { command: "curl URL/post -d 'a=1' -d 'b=2'", env: &[] },
    Case { command: "curl URL/raw --data-raw '@not-a-file'", env: &[] },
    Case { command: "curl URL/binary --data-binary @body.txt", env: &[] },
    Case { command: "curl URL/ascii -d @body.txt --data-ascii 'x=1'", env: &[] },
    Case {
        command: "curl URL/enc --data-urlencode 'q=a b&c' --data-urlencode '=x y' --data-urlencode 'z/é' -d p=1",
        env: &[],
    },
    Case { command: "curl URL/encfile --data-urlencode 'text@body.txt'", env: &[] },
    Case { command: "curl -G URL/search?x=1 -d q=kettle --data-urlencode 'n=a b'", env: &[] },
    Case { command: "curl URL/json --json '{\"a\":1}' --json '{\"b\":2}'", env: &[] },
    Case {
        command: "curl http://URL/api/generate -d '{\n  \"model\": \"llama3.2\",\n  \"prompt\": \"Why is the sky blue?\",\n  \"stream\": false\n}'",
        env: &[],
    },
    Case {
        command: "curl URL/v1/chat \\\n  -H \"Content-Type: application/json\" \\\n  -H \"Authorization: Bearer $OPENAI_API_KEY\" \\\n  -d '{\n    \"model\": \"gpt-4o\",\n    \"messages\": [{\"role\": \"user\", \"content\": \"Say ${this} {{literally}}\"}]\n  }'",
        env: &[("OPENAI_API_KEY", "sk-test-123456")],
    },
    Case {
        command: "curl URL/form -F 'f=v' -F 'up=@up.txt' -F 'g=@data.bin;type=application/x-thing;filename=z.bin' -F 'h=<body.txt'",
        env: &[],
    },
    Case { command: "curl -u ann:s3cret-pw URL/basic", env: &[("AUTHORIZATION", "YW5uOnMzY3JldC1wdw==")] },
    Case { command: "curl -b 'sid=abc123; theme=dark' URL/cookie", env: &[("COOKIE", "sid=abc123; theme=dark")] },
    Case { command: "curl -H 'Authorization: Bearer tok-98765' URL/bearer", env: &[("AUTHORIZATION", "tok-98765")] },
    Case { command: "curl --oauth2-bearer tok-55555 URL/oauth", env: &[("AUTHORIZATION", "tok-55555")] },
    Case { command: "curl -x URL URL/via-proxy -H 'X-P: 1'", env: &[] },
    Case { command: "curl -g 'URL/glob?x[]=1&y={a}'", env: &[] },
    Case { command: "curl --compressed URL/compressed", env: &[] },
    Case { command: "curl -e 'http://ref.example/;auto' -A 'agent/1.0' URL/agent", env: &[] },
    Case { command: "curl -I URL/head", env: &[] },
    Case { command: "curl -XPOST -sSL URL/combined -d x=1 -H 'Accept: text/plain'", env: &[] },
    Case { command: "curl URL/q --url-query 'q=a b' --url-query '+raw=x%20y'", env: &[] },
    Case { command: "curl --request DELETE --url URL/items/7 --header 'accept: application/json'", env: &[] },
    Case { command: "$ curl -s URL/a | jq . && curl URL/b -o out.json 2>&1", env: &[] },
    Case { command: "curl URL/one URL/two -H 'X-Both: 1'", env: &[] },
];

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The variables `stampede import` said to set (`note: set NAME before running`).
fn noted(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("note: set "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn files(dir: &Path) {
    std::fs::write(dir.join("body.txt"), "line one\r\nline two\nend & more=1\n").unwrap();
    std::fs::write(dir.join("up.txt"), "uploaded text\n").unwrap();
    std::fs::write(dir.join("data.bin"), [0u8, 1, 2, 255, b'\r', b'\n', 7]).unwrap();
}

#[test]
fn imported_curl_commands_send_what_real_curl_sends_byte_for_byte() {
    let curl = Path::new("/usr/bin/curl");
    assert!(curl.exists(), "real curl (Debian's `curl`) is needed");
    let recorder = Recorder::start();
    let origin = format!("127.0.0.1:{}", recorder.port);
    let mut failures = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        files(dir.path());
        let command =
            case.command.replace("http://URL", &format!("http://{origin}")).replace("URL", &format!("http://{origin}"));
        let env: BTreeMap<&str, &str> = case.env.iter().copied().collect();
        // Real curl, as bash runs the text (its quotes, continuations, variables).
        let mut shell = Command::new("bash");
        shell.arg("-c").arg(command.replace("$ curl", "curl").replace("| jq .", "> /dev/null")).current_dir(dir.path());
        for (k, v) in &env {
            shell.env(k, v);
        }
        let _ = shell.output().unwrap();
        let by_curl = recorder.take();
        // Imported, then run by Stampede.
        std::fs::write(dir.path().join("cmd.sh"), &command).unwrap();
        let imported = run(Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["import", "curl", "cmd.sh", "-o", "s.yaml"])
            .current_dir(dir.path()));
        let stderr = String::from_utf8_lossy(&imported.stderr).into_owned();
        let mut stampede = Command::new(env!("CARGO_BIN_EXE_stampede"));
        stampede.args(["run", "s.yaml", "--quiet"]).current_dir(dir.path());
        for var in noted(&stderr) {
            let value = env.iter().find(|(k, _)| var.ends_with(*k)).map(|(_, v)| *v);
            let Some(value) = value else {
                failures.push(format!("case {i} `{command}`: no value for {var} ({stderr})"));
                continue;
            };
            stampede.env(&var, value);
        }
        let ran = stampede.output().unwrap();
        let by_stampede = recorder.take();
        let yaml = std::fs::read_to_string(dir.path().join("s.yaml")).unwrap_or_default();
        if by_curl.is_empty() || by_curl.len() != by_stampede.len() {
            failures.push(format!(
                "case {i} `{command}`: curl sent {} request(s), stampede {} (exit {:?}: {}){yaml}",
                by_curl.len(),
                by_stampede.len(),
                ran.status.code(),
                String::from_utf8_lossy(&ran.stderr)
            ));
            continue;
        }
        for (a, b) in by_curl.into_iter().zip(by_stampede) {
            let (a, b) = (normal(a, recorder.port), normal(b, recorder.port));
            if a != b {
                failures.push(format!("case {i} `{command}`:\n  curl     {a:?}\n  stampede {b:?}\n{yaml}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), CASES.len(), failures.join("\n\n"));
}
