//! Fuzzing the HTTP/1.1 response parser: a loopback server sends each input to a
//! [`Connection`] (whole, or in pieces of a few bytes), which sends up to three requests on
//! it. Inputs are responses put together at random (status lines, `content-length`,
//! `transfer-encoding: chunked` with extensions and trailers, `connection`, interim `1xx`
//! answers, answers to `HEAD`, several answers in a row), mutated copies of them and random
//! bytes. Each exchange gives an answer or an error, never a panic or a hang (a guard of a
//! few seconds: the server closes its side once it has written, so nothing may wait longer),
//! and the answers add up: a kept body is as long as the length reported, and no more bytes
//! are counted received than the server sent. The runner is the workspace's
//! (`crate::fuzz_support`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::client::connect::Io;
use crate::client::exchange::Headers;
use crate::client::http1::Connection;
use crate::client::url::HttpUrl;
use crate::fuzz_support::{self as support, Rng};

const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

/// Longest any case may take; past it the exchange hangs.
const HANG: Duration = Duration::from_secs(5);

fn head(rng: &mut Rng) -> String {
    let version = *rng.pick(&[
        "HTTP/1.1",
        "HTTP/1.1",
        "HTTP/1.1",
        "HTTP/1.1",
        "HTTP/1.1",
        "HTTP/1.1",
        "HTTP/1.0",
        "HTTP/1.0",
        "HTTP/2",
        "HTTP/1.1 ",
        "http/1.1",
        "HTTP/9.9",
    ]);
    let status = *rng.pick(&[
        "200", "200", "200", "200", "200", "201", "204", "304", "100", "101", "103", "404", "500", "999", "0", "1000",
        "20",
    ]);
    let mut out = format!("{version} {status} {}\r\n", *rng.pick(&["OK", "", "Whatever it is", "é"]));
    for _ in 0..rng.below(4) {
        out.push_str(rng.word(&[
            "server: fuzz\r\n",
            "set-cookie: a=b; Path=/\r\n",
            "location: /x\r\n",
            "x-empty:\r\n",
            "grpc-status: 0\r\n",
        ]));
    }
    out
}

fn chunked_body(rng: &mut Rng) -> String {
    let mut out = String::new();
    for _ in 0..rng.below(5) {
        let data = "d".repeat(rng.below(40));
        let size = match rng.below(8) {
            0 => format!("{:X}", data.len()),
            1 => format!("{:x};ext=1;q=\"a b\"", data.len()),
            2 => "ffffffffffffffff".into(),
            3 => "10000000000000000".into(),
            4 => format!("0x{:x}", data.len()),
            _ => format!("{:x}", data.len()),
        };
        out.push_str(&format!("{size}\r\n{data}\r\n"));
    }
    out.push_str(rng.word(&[
        "0\r\n\r\n",
        "0\r\nx-trailer: v\r\n\r\n",
        "0;done\r\n\r\n",
        "0\r\n",
        "",
        "0\r\nT: 1\r\nU: 2\r\n\r\n",
    ]));
    out
}

/// One response put together from valid parts, with mistakes now and then.
fn response(rng: &mut Rng) -> String {
    let mut out = head(rng);
    let body = "b".repeat(rng.size(10) - 1);
    match rng.below(6) {
        0 | 1 => {
            let length = match rng.below(10) {
                0 => "99999999999999999999".to_string(),
                1 => "18446744073709551615".to_string(),
                2 => "-1".to_string(),
                3 => format!(" {} ", body.len()),
                4 => format!("{0}, {0}", body.len()),
                5 => (body.len() + rng.below(5)).to_string(),
                6 => body.len().saturating_sub(rng.below(5)).to_string(),
                _ => body.len().to_string(),
            };
            out.push_str(&format!("content-length: {length}\r\n"));
            if rng.one_in(4) {
                out.push_str(&format!("Content-Length: {}\r\n", rng.pick(&[length.as_str(), "0", "7"])));
            }
            if rng.one_in(6) {
                out.push_str("transfer-encoding: chunked\r\n");
            }
            out.push_str(rng.word(&[
                "",
                "connection: close\r\n",
                "connection: keep-alive\r\n",
                "Connection: Keep-Alive, Upgrade\r\n",
            ]));
            out.push_str("\r\n");
            out.push_str(&body);
        }
        2 | 3 => {
            out.push_str(rng.word(&[
                "transfer-encoding: chunked\r\n",
                "Transfer-Encoding: gzip, chunked\r\n",
                "transfer-encoding: chunked, chunked\r\n",
            ]));
            out.push_str("\r\n");
            out.push_str(&chunked_body(rng));
        }
        4 => {
            // Delimited by the close.
            out.push_str("\r\n");
            out.push_str(&body);
        }
        _ => out.push_str("\r\n"),
    }
    out
}

/// The input: a control byte (bit 0: a `HEAD` request, bit 1: keep the body, bit 2: keep every
/// header, bits 3–7: the server's piece size, 0 for all at once), then the server's bytes.
fn generate(rng: &mut Rng) -> Vec<u8> {
    let mut control = rng.u64() as u8;
    if rng.one_in(2) {
        control &= 0b111; // whole
    }
    let mut answer = String::new();
    for _ in 0..rng.below(3) {
        answer.push_str(rng.word(&[
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n",
            "HTTP/1.1 102 Processing\r\ncontent-length: 3\r\n\r\n",
        ]));
    }
    for _ in 0..rng.between(1, 3) {
        answer.push_str(&response(rng));
    }
    let bytes = match rng.below(8) {
        0 => (0..rng.size(10)).map(|_| rng.u64() as u8).collect(),
        1..=4 => {
            let corpus = vec![answer.clone().into_bytes()];
            support::mutate(
                rng,
                answer.as_bytes(),
                &corpus,
                &["\r\n", "\r\n\r\n", ";", ":", "0\r\n", "chunked", "content-length: "],
                16 << 10,
            )
        }
        _ => answer.into_bytes(),
    };
    let mut input = vec![control];
    input.extend(bytes);
    input
}

/// Serves `answer` to the one connection `listener` takes (in pieces of `piece` bytes, all at
/// once when 0), then closes its side and reads until the client goes.
async fn serve(listener: &TcpListener, answer: &[u8], piece: usize) {
    let Ok((mut s, _)) = listener.accept().await else { return };
    let _ = s.set_nodelay(true);
    let mut request = [0u8; 1024];
    let _ = s.read(&mut request).await;
    if piece == 0 {
        let _ = s.write_all(answer).await;
    } else {
        for part in answer.chunks(piece) {
            if s.write_all(part).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    let _ = s.shutdown().await;
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Answers (not errors) the exchanges gave in this process.
static ANSWERS: AtomicU64 = AtomicU64::new(0);

/// Up to three exchanges on one connection to `target`; checks what each answer reports.
async fn exchanges(target: &HttpUrl, control: u8, sent: usize) {
    let stream = TcpStream::connect((target.host.as_str(), target.port)).await.unwrap();
    let mut c = Connection::new(Io::Tcp(stream), target);
    let mut received = 0u64;
    for _ in 0..3 {
        let mut body = Vec::new();
        let mut headers = Headers { all: control & 4 != 0, ..Headers::default() };
        let kept = (control & 2 != 0).then_some(&mut body);
        let Ok(answer) = c.exchange(GET, control & 1 != 0, kept, Some(&mut headers)).await else { break };
        ANSWERS.fetch_add(1, Ordering::Relaxed);
        if control & 2 != 0 {
            assert_eq!(body.len() as u64, answer.body_len, "the body kept is the length reported");
        }
        received += answer.bytes_received;
        assert!(received <= sent as u64, "{received} bytes counted received of {sent} sent");
        if !answer.keep_alive {
            break;
        }
    }
}

fn check(listener: &TcpListener, target: &HttpUrl, runtime: &tokio::runtime::Runtime, input: &[u8]) {
    let Some((&control, answer)) = input.split_first() else { return };
    let piece = usize::from(control >> 3);
    runtime.block_on(async {
        let case = async { tokio::join!(serve(listener, answer, piece), exchanges(target, control, answer.len())) };
        if tokio::time::timeout(HANG, case).await.is_err() {
            panic!("no answer nor error within {HANG:?}: a hang");
        }
    });
}

/// Whatever a server sends, an HTTP/1.1 exchange gives an answer or an error, without a panic
/// or a hang, and the answers' lengths and byte counts add up.
#[test]
fn no_response_makes_the_http1_client_panic_or_hang() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
    let cases = support::run("http1", generate, |input| check(&listener, &target, &runtime, input));
    // The generators reach whole answers, not only the parser's errors.
    let answers = ANSWERS.load(Ordering::Relaxed);
    println!("{answers} answers in {cases} cases");
    assert!(answers * 10 >= cases, "only {answers} answers in {cases} cases");
}
