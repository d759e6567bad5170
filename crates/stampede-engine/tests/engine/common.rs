//! Test servers shared by the engine's integration tests.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::sync::Arc;

/// A raw HTTP/1.1 server on 127.0.0.1 (a thread per connection) that calls `on_request` with
/// each request target (requests without bodies), then answers `200 ok`. `on_request` may
/// block to delay the answer.
pub(crate) fn raw_http_server(on_request: impl Fn(&str) + Send + Sync + 'static) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let on_request = Arc::new(on_request);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let on_request = on_request.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    on_request(line.split_whitespace().nth(1).unwrap_or(""));
                    if writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}
