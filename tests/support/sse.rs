//! A raw Server-Sent Events stream read off the wire, every byte counted: what a page
//! costs to keep open. Plain or, as browsers ask, gzip (de-chunked and decoded here).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw event stream: every byte counted as it came over the wire.
pub struct EventStream {
    tcp: tokio::net::TcpStream,
    buffered: String,
    pub bytes: usize,
    /// Asked for with `Accept-Encoding: gzip`: the wire's bytes not yet decoded, the
    /// one gzip stream's decoder, and whether the header block is behind.
    gzip: Option<(Vec<u8>, flate2::write::GzDecoder<Vec<u8>>, bool)>,
}

impl EventStream {
    pub async fn open(addr: SocketAddr, path: &str) -> EventStream {
        Self::open_with(addr, path, "").await
    }

    pub async fn open_gzip(addr: SocketAddr, path: &str) -> EventStream {
        let mut stream = Self::open_with(addr, path, "Accept-Encoding: gzip\r\n").await;
        stream.gzip = Some((Vec::new(), flate2::write::GzDecoder::new(Vec::new()), false));
        stream
    }

    async fn open_with(addr: SocketAddr, path: &str, headers: &str) -> EventStream {
        super::http(addr, "GET", "/healthz", &[], b"").await;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{headers}\r\n"
        );
        tcp.write_all(req.as_bytes()).await.unwrap();
        EventStream {
            tcp,
            buffered: String::new(),
            bytes: 0,
            gzip: None,
        }
    }

    /// The gzip stream's text so far, from the chunked body's whole chunks.
    fn decode(&mut self, wire: &[u8]) {
        use std::io::Write as _;
        let Some((pending, decoder, in_body)) = &mut self.gzip else {
            return;
        };
        pending.extend_from_slice(wire);
        if !*in_body {
            let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            let head = String::from_utf8_lossy(&pending[..end]).to_lowercase();
            assert!(head.contains("content-encoding: gzip"), "{head}");
            assert!(head.contains("transfer-encoding: chunked"), "{head}");
            *in_body = true;
            pending.drain(..end + 4);
        }
        loop {
            let Some(eol) = pending.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&pending[..eol]).unwrap(), 16).unwrap();
            if pending.len() < eol + 2 + size + 2 {
                return;
            }
            decoder
                .write_all(&pending[eol + 2..eol + 2 + size])
                .unwrap();
            decoder.flush().unwrap();
            pending.drain(..eol + 2 + size + 2);
            let text = std::mem::take(decoder.get_mut());
            self.buffered.push_str(&String::from_utf8(text).unwrap());
        }
    }

    /// The next event: (name, data as JSON).
    pub async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(at) = self.buffered.find("event: ") {
                let rest = &self.buffered[at + 7..];
                if let (Some(eol), Some(data_at)) = (rest.find('\n'), rest.find("\ndata: ")) {
                    let name = rest[..eol].trim().to_string();
                    let data = &rest[data_at + 7..];
                    if let Some(end) = data.find('\n') {
                        let value = serde_json::from_str(&data[..end]).unwrap();
                        let consumed = at + 7 + data_at + 7 + end;
                        self.buffered = self.buffered[consumed..].to_string();
                        return (name, value);
                    }
                }
            }
            self.read(super::WAIT).await;
        }
    }

    /// Reads what comes within `limit`; false when nothing did.
    pub async fn read(&mut self, limit: Duration) -> bool {
        let mut chunk = vec![0u8; 65536];
        match tokio::time::timeout(limit, self.tcp.read(&mut chunk)).await {
            Ok(Ok(n)) => {
                assert!(n > 0, "the event stream closed");
                self.bytes += n;
                if self.gzip.is_some() {
                    self.decode(&chunk[..n]);
                } else {
                    self.buffered
                        .push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
                true
            }
            Ok(Err(e)) => panic!("reading the event stream: {e}"),
            Err(_) => false,
        }
    }

    /// Bytes received during `span`, from now.
    pub async fn bytes_during(&mut self, span: Duration) -> usize {
        let before = self.bytes;
        let end = tokio::time::Instant::now() + span;
        while let Some(left) = end.checked_duration_since(tokio::time::Instant::now()) {
            self.read(left).await;
        }
        self.bytes - before
    }
}
