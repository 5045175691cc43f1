//! A filter on the bytes a client sends, in front of hyper's HTTP/1 parser.
//!
//! hyper answers a request head it cannot parse itself, with an empty body and no way to change
//! it (an empty 400 for `"`, `<` or `>` in a query string, 414, 431). OpenSearch (Netty) accepts
//! those characters, and answers a head that is too long with its JSON error. So this filter
//! follows the message framing (head, then a Content-Length or chunked body), checks every head
//! against `http.max_initial_line_length` and `http.max_header_size`, percent-encodes the target
//! bytes the `http` crate refuses, and replaces a head it rejects with a request to
//! [`REJECTION_PATH`] that the router renders as OpenSearch's JSON error; the connection then
//! closes, as after any malformed request.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The path of the request that replaces a rejected head.
pub const REJECTION_PATH: &str = "/_shoal/http_rejection";
/// The header carrying the rejection: `<status> <error type> <reason>`.
pub const REJECTION_HEADER: &str = "x-shoal-http-rejection";

/// OpenSearch's `http.max_initial_line_length` and `http.max_header_size`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_initial_line_length: usize,
    pub max_header_size: usize,
}

impl Limits {
    /// The most header lines a head within `max_header_size` can hold (`a:` and LF each):
    /// hyper must accept at least that many, or it answers 431 itself.
    pub fn max_header_count(&self) -> usize {
        self.max_header_size / 3 + 8
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_initial_line_length: 4096,
            max_header_size: 8192,
        }
    }
}

/// Where the filter is in the byte stream.
#[derive(Debug)]
enum State {
    /// Collecting a request head.
    Head(Vec<u8>),
    /// Inside a body of known length: this many bytes still belong to it.
    Fixed(u64),
    Chunked(Chunk),
    /// The framing could not be followed (a malformed chunked body): bytes go to hyper as they
    /// are, which fails the request and closes the connection.
    Passthrough,
    /// A head was rejected: nothing more is read from this connection.
    Closed,
}

#[derive(Debug)]
enum Chunk {
    /// Reading a chunk-size line (its length so far).
    Size(Vec<u8>),
    Data(u64),
    /// The CRLF after a chunk's data (whether its CR was seen).
    DataEnd(bool),
    /// Trailer lines after the last chunk: the current line's length and whether it is a lone CR.
    Trailer(usize, bool),
}

/// Why a head is refused: OpenSearch's status, error type and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: u16,
    pub error_type: &'static str,
    pub reason: String,
}

impl Rejection {
    fn bad_request(error_type: &'static str, reason: impl Into<String>) -> Self {
        Rejection {
            status: 400,
            error_type,
            reason: reason.into(),
        }
    }

    /// The request hyper parses instead of the rejected one.
    fn synthetic_request(&self) -> Vec<u8> {
        let reason: String = self
            .reason
            .chars()
            .take(512)
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        format!(
            "GET {REJECTION_PATH} HTTP/1.1\r\nhost: shoal\r\nconnection: close\r\n{REJECTION_HEADER}: {} {} {reason}\r\n\r\n",
            self.status, self.error_type
        )
        .into_bytes()
    }

    /// Reads a rejection back from the synthetic request's header.
    pub fn from_header(value: &str) -> Option<Rejection> {
        let (status, rest) = value.split_once(' ')?;
        let (error_type, reason) = rest.split_once(' ').unwrap_or((rest, ""));
        let error_type = match error_type {
            "too_long_http_line_exception" => "too_long_http_line_exception",
            "too_long_http_header_exception" => "too_long_http_header_exception",
            _ => "illegal_argument_exception",
        };
        Some(Rejection {
            status: status.parse().ok()?,
            error_type,
            reason: reason.to_string(),
        })
    }
}

/// The framing state machine, independent of any socket.
#[derive(Debug)]
pub struct Filter {
    limits: Limits,
    state: State,
}

impl Filter {
    pub fn new(limits: Limits) -> Self {
        Filter {
            limits,
            state: State::Head(Vec::new()),
        }
    }

    /// The longest a head may grow before it is refused without waiting for its end.
    fn max_head_len(&self) -> usize {
        self.limits.max_initial_line_length + self.limits.max_header_size + 4
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// How many of the next bytes go to hyper untouched (inside a fixed-length body or after
    /// the framing was lost), so the caller may read them straight into hyper's buffer.
    pub fn untouched_prefix(&self) -> Option<u64> {
        match self.state {
            State::Fixed(n) => Some(n),
            State::Passthrough => Some(u64::MAX),
            _ => None,
        }
    }

    /// Marks `n` bytes as passed untouched (`n` at most `untouched_prefix()`).
    pub fn consume_untouched(&mut self, n: u64) {
        if let State::Fixed(left) = &mut self.state {
            debug_assert!(n <= *left);
            *left -= n;
            if *left == 0 {
                self.state = State::Head(Vec::new());
            }
        }
    }

    /// Feeds bytes read from the client; what hyper should read is appended to `out`.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            let used = match &mut self.state {
                State::Closed => return,
                State::Passthrough => {
                    out.extend_from_slice(input);
                    input.len()
                }
                State::Fixed(left) => {
                    let n = (*left).min(input.len() as u64) as usize;
                    out.extend_from_slice(&input[..n]);
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::Head(Vec::new());
                    }
                    n
                }
                State::Chunked(_) => self.feed_chunked(input, out),
                State::Head(_) => self.feed_head(input, out),
            };
            input = &input[used..];
        }
    }

    /// Collects head bytes; at the blank line that ends the head, checks and forwards it.
    fn feed_head(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        let max = self.max_head_len();
        let limits = self.limits;
        let State::Head(head) = &mut self.state else {
            unreachable!()
        };
        let mut used = 0;
        // Empty lines before a request line are ignored (RFC 9112 2.2), as httparse does.
        if head.is_empty() {
            used = input
                .iter()
                .position(|b| *b != b'\r' && *b != b'\n')
                .unwrap_or(input.len());
        }
        let start = head.len();
        head.extend_from_slice(&input[used..]);
        let end = head_end(head, start.saturating_sub(3));
        let head_len = end.unwrap_or(head.len());
        let rejection = first_line_too_long(&head[..head_len], limits)
            .or_else(|| (end.is_none() && head.len() > max).then(|| too_long_header(limits)));
        if let Some(rejection) = rejection {
            self.reject(&rejection, out);
            return input.len();
        }
        let Some(end) = end else {
            return input.len();
        };
        let rest = head.len() - end;
        let head = std::mem::take(head);
        match check_head(&head[..end], limits) {
            Ok((rewritten, framing)) => {
                out.extend_from_slice(&rewritten);
                self.state = framing;
            }
            Err(rejection) => self.reject(&rejection, out),
        }
        input.len() - rest
    }

    fn reject(&mut self, rejection: &Rejection, out: &mut Vec<u8>) {
        out.extend_from_slice(&rejection.synthetic_request());
        self.state = State::Closed;
    }

    /// Follows a chunked body (RFC 9112 7.1); bytes are forwarded as they are.
    fn feed_chunked(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        let State::Chunked(chunk) = &mut self.state else {
            unreachable!()
        };
        let (used, next) = match chunk {
            Chunk::Data(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                *left -= n as u64;
                let next = (*left == 0).then_some(Chunk::DataEnd(false));
                (n, next.map(State::Chunked))
            }
            Chunk::DataEnd(seen_cr) => match input[0] {
                b'\n' => (1, Some(State::Chunked(Chunk::Size(Vec::new())))),
                b'\r' if !*seen_cr => (1, Some(State::Chunked(Chunk::DataEnd(true)))),
                _ => (0, Some(State::Passthrough)),
            },
            Chunk::Size(line) => match input.iter().position(|b| *b == b'\n') {
                None => {
                    line.extend_from_slice(input);
                    let next = (line.len() > 1024).then_some(State::Passthrough);
                    (input.len(), next)
                }
                Some(i) => {
                    line.extend_from_slice(&input[..i]);
                    let next = match chunk_size(line) {
                        Some(0) => State::Chunked(Chunk::Trailer(0, false)),
                        Some(n) => State::Chunked(Chunk::Data(n)),
                        None => State::Passthrough,
                    };
                    (i + 1, Some(next))
                }
            },
            Chunk::Trailer(len, lone_cr) => match input.iter().position(|b| *b == b'\n') {
                None => {
                    *lone_cr = *len == 0 && input == b"\r";
                    *len += input.len();
                    let next = (*len > 64 * 1024).then_some(State::Passthrough);
                    (input.len(), next)
                }
                Some(i) => {
                    let line = &input[..i];
                    let blank = (*len == 0 && (line.is_empty() || line == b"\r"))
                        || (*lone_cr && line.is_empty());
                    let next = if blank {
                        State::Head(Vec::new())
                    } else {
                        State::Chunked(Chunk::Trailer(0, false))
                    };
                    (i + 1, Some(next))
                }
            },
        };
        out.extend_from_slice(&input[..used]);
        if let Some(next) = next {
            self.state = next;
        }
        used
    }
}

/// The end of the head (after its blank line), searching from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(pos) = memchr::memchr(b'\n', &buf[i..]) {
        let nl = i + pos;
        if buf[nl + 1..].starts_with(b"\n") {
            return Some(nl + 2);
        }
        if buf[nl + 1..].starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// Netty's `An HTTP line is larger than 4096 bytes.`, checked before the line even ends.
fn first_line_too_long(head: &[u8], limits: Limits) -> Option<Rejection> {
    let line_len = match memchr::memchr(b'\n', head) {
        Some(i) => i - usize::from(i > 0 && head[i - 1] == b'\r'),
        None => head.len(),
    };
    (line_len > limits.max_initial_line_length).then(|| {
        Rejection::bad_request(
            "too_long_http_line_exception",
            format!(
                "An HTTP line is larger than {} bytes.",
                limits.max_initial_line_length
            ),
        )
    })
}

fn too_long_header(limits: Limits) -> Rejection {
    Rejection::bad_request(
        "too_long_http_header_exception",
        format!(
            "HTTP header is larger than {} bytes.",
            limits.max_header_size
        ),
    )
}

/// Parses a complete head like hyper will; returns it with its target made acceptable to the
/// `http` crate, and the framing of the body that follows.
fn check_head(head: &[u8], limits: Limits) -> Result<(Vec<u8>, State), Rejection> {
    let line_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    if head.len() - line_end > limits.max_header_size + 4 {
        return Err(too_long_header(limits));
    }
    // httparse (and hyper after it) refuses some target bytes Netty takes: encode them first.
    let rewritten = encode_request_line(head);
    let mut few = [httparse::EMPTY_HEADER; 64];
    let mut many;
    let mut request = httparse::Request::new(&mut few);
    let parsed = match request.parse(&rewritten) {
        Err(httparse::Error::TooManyHeaders) => {
            many = vec![httparse::EMPTY_HEADER; limits.max_header_count()];
            request = httparse::Request::new(&mut many);
            request.parse(&rewritten)
        }
        other => other,
    };
    match parsed {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(Rejection::bad_request(
                "illegal_argument_exception",
                "invalid HTTP request: incomplete head",
            ))
        }
        Err(httparse::Error::TooManyHeaders) => return Err(too_long_header(limits)),
        Err(e) => {
            return Err(Rejection::bad_request(
                "illegal_argument_exception",
                format!("invalid HTTP request: {e}"),
            ))
        }
    }
    let target = request.path.unwrap_or("");
    if axum::http::Uri::try_from(target).is_err() {
        return Err(Rejection::bad_request(
            "illegal_argument_exception",
            format!("invalid uri [{target}]"),
        ));
    }
    let framing = body_framing(request.headers, request.version == Some(1))?;
    Ok((rewritten, framing))
}

/// The body's framing by hyper's rules: Transfer-Encoding (HTTP/1.1 only, `chunked` last) wins
/// over Content-Length; several Content-Lengths must agree.
fn body_framing(headers: &[httparse::Header<'_>], is_http_11: bool) -> Result<State, Rejection> {
    let mut chunked = None;
    let mut length: Option<u64> = None;
    for header in headers {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if !is_http_11 {
                return Err(Rejection::bad_request(
                    "illegal_argument_exception",
                    "Transfer-Encoding is not allowed in an HTTP/1.0 request",
                ));
            }
            let last = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.rsplit(',').next())
                .map(str::trim);
            chunked = Some(last.is_some_and(|v| v.eq_ignore_ascii_case("chunked")));
        } else if header.name.eq_ignore_ascii_case("content-length") && chunked.is_none() {
            let value = parse_digits(header.value).ok_or_else(|| {
                Rejection::bad_request(
                    "illegal_argument_exception",
                    format!(
                        "invalid Content-Length [{}]",
                        String::from_utf8_lossy(header.value)
                    ),
                )
            })?;
            if length.is_some_and(|prev| prev != value) {
                return Err(Rejection::bad_request(
                    "illegal_argument_exception",
                    "multiple Content-Length headers with different values",
                ));
            }
            length = Some(value);
        }
    }
    match (chunked, length) {
        (Some(true), _) => Ok(State::Chunked(Chunk::Size(Vec::new()))),
        (Some(false), _) => Err(Rejection::bad_request(
            "illegal_argument_exception",
            "unsupported Transfer-Encoding: chunked must be the last encoding",
        )),
        (None, Some(n)) if n > 0 => Ok(State::Fixed(n)),
        (None, _) => Ok(State::Head(Vec::new())),
    }
}

fn parse_digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// A chunk-size line: hex digits, then optional `;extensions`.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let rest = &line[end..];
    let rest_ok = rest.is_empty() || rest[0] == b';' || rest[0] == b' ' || rest[0] == b'\t';
    if end == 0 || end > 15 || !rest_ok {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&line[..end]).ok()?, 16).ok()
}

/// The head with its request target (between the first two spaces) percent-encoded.
fn encode_request_line(head: &[u8]) -> Vec<u8> {
    let line_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    let Some(method_end) = memchr::memchr(b' ', &head[..line_end]) else {
        return head.to_vec();
    };
    let target_end = memchr::memchr(b' ', &head[method_end + 1..line_end])
        .map_or(line_end, |i| method_end + 1 + i);
    let target = &head[method_end + 1..target_end];
    let encoded = encode_target(target);
    let mut out = Vec::with_capacity(head.len() + encoded.len() - target.len());
    out.extend_from_slice(&head[..method_end + 1]);
    out.extend_from_slice(&encoded);
    out.extend_from_slice(&head[target_end..]);
    out
}

/// Percent-encodes the target bytes the `http` crate refuses but Netty takes as they are:
/// `<`, `>` and `` ` `` anywhere, `"` in the query, and bytes above 0x7f.
fn encode_target(target: &[u8]) -> Vec<u8> {
    let path_end = memchr::memchr(b'?', target).unwrap_or(target.len());
    let mut out = encode_path(&target[..path_end]);
    for &b in &target[path_end..] {
        if matches!(b, b'<' | b'>' | b'`' | b'"') || b >= 0x80 {
            push_escaped(&mut out, b);
        } else {
            out.push(b);
        }
    }
    out
}

/// The path with its non-ASCII bytes, raw or escaped, percent-encoded as UTF-8; a sequence that
/// is not UTF-8 becomes U+FFFD, as OpenSearch's path decoding (Java's `new String(bytes, UTF_8)`)
/// makes it. ASCII escapes stay as sent (`%2F` must not become a separator).
fn encode_path(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut run = Vec::new();
    let mut i = 0;
    while i < path.len() {
        let escaped = (path[i] == b'%')
            .then(|| path.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .filter(|b| *b >= 0x80);
        if let Some(b) = escaped {
            run.push(b);
            i += 3;
            continue;
        }
        if path[i] >= 0x80 {
            run.push(path[i]);
            i += 1;
            continue;
        }
        flush_non_ascii(&mut run, &mut out);
        if matches!(path[i], b'<' | b'>' | b'`') {
            push_escaped(&mut out, path[i]);
        } else {
            out.push(path[i]);
        }
        i += 1;
    }
    flush_non_ascii(&mut run, &mut out);
    out
}

fn flush_non_ascii(run: &mut Vec<u8>, out: &mut Vec<u8>) {
    for &b in String::from_utf8_lossy(run).as_bytes() {
        push_escaped(out, b);
    }
    run.clear();
}

fn push_escaped(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
}

/// A client connection seen through a [`Filter`].
pub struct GuardedIo<T> {
    inner: T,
    filter: Filter,
    /// Bytes the filter produced that hyper has not read yet.
    ready: Vec<u8>,
    ready_pos: usize,
    scratch: Box<[u8]>,
}

impl<T> GuardedIo<T> {
    pub fn new(inner: T, limits: Limits) -> Self {
        GuardedIo {
            inner,
            filter: Filter::new(limits),
            ready: Vec::new(),
            ready_pos: 0,
            scratch: vec![0; 16 * 1024].into_boxed_slice(),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for GuardedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.ready_pos < this.ready.len() {
                let n = (this.ready.len() - this.ready_pos).min(buf.remaining());
                buf.put_slice(&this.ready[this.ready_pos..this.ready_pos + n]);
                this.ready_pos += n;
                if this.ready_pos == this.ready.len() {
                    this.ready.clear();
                    this.ready_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.filter.is_closed() {
                // The synthetic request says `connection: close`: hyper answers it and closes
                // without reading more; an end of stream here could cut that answer short.
                return Poll::Pending;
            }
            if let Some(untouched) = this.filter.untouched_prefix() {
                // Body bytes go straight into hyper's buffer, without a copy.
                let limit = untouched.min(buf.remaining() as u64) as usize;
                let mut direct = ReadBuf::new(buf.initialize_unfilled_to(limit));
                std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut direct))?;
                let n = direct.filled().len();
                buf.advance(n);
                this.filter.consume_untouched(n as u64);
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            this.filter.feed(&this.scratch[..n], &mut this.ready);
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for GuardedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "http_guard_tests.rs"]
mod tests;
