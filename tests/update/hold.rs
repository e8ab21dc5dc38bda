//! A relay in front of the DynamoDB-compatible server that lets every call
//! through but `UpdateItem` calls past the first `pass`: those it holds,
//! neither forwarded nor answered, for as long as it runs. A job writing
//! through it stops at a known point in the middle of a page — exactly
//! `pass` items changed — and stays there until the test kills it: a crash
//! at a chosen moment, without a race.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::common::PATIENCE;

#[derive(Default)]
struct Counts {
    /// `UpdateItem` calls received.
    seen: AtomicUsize,
    /// `UpdateItem` calls the server answered.
    forwarded: AtomicUsize,
    /// `UpdateItem` calls held.
    held: AtomicUsize,
}

/// The running relay on 127.0.0.1; stops, with every call it holds, when dropped.
pub(crate) struct HoldingRelay {
    url: String,
    pass: usize,
    counts: Arc<Counts>,
    accept: tokio::task::JoinHandle<()>,
}

impl HoldingRelay {
    /// Starts a relay to `upstream` (`http://host:port`) that forwards the
    /// first `pass` `UpdateItem` calls.
    pub(crate) async fn start(upstream: &str, pass: usize) -> HoldingRelay {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Counts::default());
        let shared = counts.clone();
        let accept = tokio::spawn(async move {
            // Dropped with the accept loop: every connection, held calls too.
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, counts) = (upstream.clone(), shared.clone());
                connections.spawn(async move {
                    let _ = serve(client, &upstream, pass, &counts).await;
                });
            }
        });
        HoldingRelay {
            url,
            pass,
            counts,
            accept,
        }
    }

    /// The relay's URL, to use as the DynamoDB endpoint.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Waits until the `pass` calls let through were answered and one more
    /// is held: the job now sits in the middle of its writes.
    pub(crate) async fn wait_until_holding(&self) {
        let start = Instant::now();
        loop {
            let forwarded = self.counts.forwarded.load(Ordering::SeqCst);
            let held = self.counts.held.load(Ordering::SeqCst);
            if forwarded == self.pass && held > 0 {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the relay never held a call: {forwarded} UpdateItem calls answered, {held} held"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for HoldingRelay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Relays one client connection, one request at a time, each on a fresh
/// connection to the server.
async fn serve(
    client: TcpStream,
    upstream: &str,
    pass: usize,
    counts: &Counts,
) -> std::io::Result<()> {
    let (read, mut write) = client.into_split();
    let mut read = BufReader::new(read);
    while let Some(request) = read_message(&mut read, true).await? {
        let update = request
            .header("x-amz-target")
            .is_some_and(|t| t.ends_with(".UpdateItem"));
        if update && counts.seen.fetch_add(1, Ordering::SeqCst) >= pass {
            counts.held.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        let mut server = TcpStream::connect(upstream).await?;
        server.write_all(&request.raw).await?;
        let mut answer = BufReader::new(server);
        let Some(response) = read_message(&mut answer, false).await? else {
            return Ok(());
        };
        if update {
            counts.forwarded.fetch_add(1, Ordering::SeqCst);
        }
        write.write_all(&response.raw).await?;
    }
    Ok(())
}

/// One HTTP/1.1 message as it travelled, and its head parsed.
struct Message {
    raw: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one message (head and body: by `Content-Length`, chunked, or for a
/// response without either, up to the end); `None` at the end of the stream.
async fn read_message<R: AsyncRead + Unpin>(
    from: &mut BufReader<R>,
    request: bool,
) -> std::io::Result<Option<Message>> {
    let mut raw = Vec::new();
    let mut headers = Vec::new();
    let mut first = true;
    loop {
        let mut line = String::new();
        if from.read_line(&mut line).await? == 0 {
            return match first {
                true => Ok(None),
                false => Err(std::io::ErrorKind::UnexpectedEof.into()),
            };
        }
        raw.extend_from_slice(line.as_bytes());
        if line == "\r\n" {
            break;
        }
        if !first {
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        first = false;
    }
    let mut message = Message { raw, headers };
    let chunked = message
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    if let Some(length) = message.header("content-length") {
        let mut body = vec![0u8; length.parse().expect("a Content-Length")];
        from.read_exact(&mut body).await?;
        message.raw.extend_from_slice(&body);
    } else if chunked {
        loop {
            let mut size = String::new();
            from.read_line(&mut size).await?;
            message.raw.extend_from_slice(size.as_bytes());
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16)
                .expect("a chunk size");
            if n == 0 {
                // The trailers, up to the empty line that ends the message.
                loop {
                    let mut line = String::new();
                    let read = from.read_line(&mut line).await?;
                    message.raw.extend_from_slice(line.as_bytes());
                    if read == 0 || line == "\r\n" {
                        break;
                    }
                }
                break;
            }
            // The chunk and its CRLF.
            let mut chunk = vec![0u8; n + 2];
            from.read_exact(&mut chunk).await?;
            message.raw.extend_from_slice(&chunk);
        }
    } else if !request {
        from.read_to_end(&mut message.raw).await?;
    }
    Ok(Some(message))
}
