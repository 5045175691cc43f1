use super::*;

fn run(input: &[u8]) -> (Vec<u8>, Filter) {
    let mut filter = Filter::new(Limits::default());
    let mut out = Vec::new();
    filter.feed(input, &mut out);
    (out, filter)
}

/// Feeds the input one byte at a time: the framing must not depend on how reads split it.
fn run_bytewise(input: &[u8]) -> Vec<u8> {
    let mut filter = Filter::new(Limits::default());
    let mut out = Vec::new();
    for b in input {
        filter.feed(std::slice::from_ref(b), &mut out);
    }
    out
}

fn rejection_of(out: &[u8]) -> Option<Rejection> {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .find(|l| l.starts_with(REJECTION_HEADER))?
        .to_string();
    Rejection::from_header(line.split_once(": ")?.1)
}

#[test]
fn query_quotes_and_angle_brackets_are_percent_encoded() {
    let (out, _) = run(b"GET /_search?q=title:\"fox\"&x=<a> HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        out,
        b"GET /_search?q=title:%22fox%22&x=%3Ca%3E HTTP/1.1\r\nHost: x\r\n\r\n"
    );
}

#[test]
fn utf8_target_is_percent_encoded_to_the_same_text() {
    let input = "GET /idx/_doc/é?q=\"ü\"{} HTTP/1.1\r\n\r\n".as_bytes();
    let (out, _) = run(input);
    assert_eq!(
        out,
        b"GET /idx/_doc/%C3%A9?q=%22%C3%BC%22{} HTTP/1.1\r\n\r\n"
    );
}

#[test]
fn invalid_utf8_in_the_path_becomes_replacement_characters() {
    let replaced = b"GET /%EF%BF%BD%EF%BF%BDa%2F/_doc/%C3%A9 HTTP/1.1\r\n\r\n";
    assert_eq!(
        run(b"GET /\xff\xfea%2F/_doc/\xc3\xa9 HTTP/1.1\r\n\r\n").0,
        replaced
    );
    assert_eq!(
        run(b"GET /%ff%FEa%2F/_doc/%c3%a9 HTTP/1.1\r\n\r\n").0,
        replaced
    );
}

#[test]
fn too_long_request_line_is_rejected_before_it_ends() {
    let mut input = b"GET /".to_vec();
    input.extend(std::iter::repeat_n(b'a', 5000));
    let (out, filter) = run(&input);
    let rejection = rejection_of(&out).expect("rejected");
    assert_eq!(rejection.status, 400);
    assert_eq!(rejection.error_type, "too_long_http_line_exception");
    assert_eq!(rejection.reason, "An HTTP line is larger than 4096 bytes.");
    assert!(filter.is_closed());
}

#[test]
fn too_large_headers_are_rejected() {
    let mut input = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..1000 {
        input.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    let rejection = rejection_of(&run(&input).0).expect("rejected");
    assert_eq!(rejection.error_type, "too_long_http_header_exception");
    assert_eq!(rejection.reason, "HTTP header is larger than 8192 bytes.");
}

#[test]
fn many_small_headers_within_the_size_limit_pass() {
    let mut input = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..300 {
        input.extend_from_slice(format!("x{i}: v\r\n").as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    let (out, _) = run(&input);
    assert_eq!(out, input);
}

#[test]
fn garbage_request_line_is_rejected_with_a_reason() {
    let rejection = rejection_of(&run(b"G(T / HTTP/1.1\r\n\r\n").0).expect("rejected");
    assert_eq!(rejection.status, 400);
    assert_eq!(rejection.error_type, "illegal_argument_exception");
    assert!(rejection.reason.starts_with("invalid HTTP request"));
}

#[test]
fn fixed_length_bodies_are_skipped_and_the_next_head_is_checked() {
    let input =
        b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\n<\"x\">GET /b?q=\"y\" HTTP/1.1\r\n\r\n";
    let expected =
        b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\n<\"x\">GET /b?q=%22y%22 HTTP/1.1\r\n\r\n";
    assert_eq!(run(input).0, expected);
    assert_eq!(run_bytewise(input), expected);
}

#[test]
fn chunked_bodies_are_followed_to_their_end() {
    let input = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n<\"x\">\r\n0\r\nTrailer: t\r\n\r\nGET /b?q=\"y\" HTTP/1.1\r\n\r\n";
    let expected = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n<\"x\">\r\n0\r\nTrailer: t\r\n\r\nGET /b?q=%22y%22 HTTP/1.1\r\n\r\n";
    assert_eq!(run(input).0, expected);
    assert_eq!(run_bytewise(input), expected);
}

#[test]
fn malformed_chunked_body_stops_rewriting() {
    let input =
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /b?q=\"y\" HTTP/1.1\r\n\r\n";
    assert_eq!(run(input).0, input.to_vec());
}

#[test]
fn conflicting_content_lengths_are_rejected() {
    let input = b"POST /a HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello";
    let rejection = rejection_of(&run(input).0).expect("rejected");
    assert_eq!(rejection.error_type, "illegal_argument_exception");
    let input = b"POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n";
    assert!(rejection_of(&run(input).0).is_some());
    let input = b"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert!(rejection_of(&run(input).0).is_some());
}

#[test]
fn leading_blank_lines_are_ignored() {
    let (out, _) = run(b"\r\n\r\nGET / HTTP/1.1\r\n\r\n");
    assert_eq!(out, b"GET / HTTP/1.1\r\n\r\n");
}

#[test]
fn nothing_is_forwarded_after_a_rejection() {
    let mut input = b"GET /".to_vec();
    input.extend(std::iter::repeat_n(b'a', 5000));
    input.extend_from_slice(b" HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
    let out = run(&input).0;
    assert_eq!(out.windows(4).filter(|w| w == b"GET ").count(), 1);
}

#[test]
fn rejection_round_trips_through_its_header() {
    let rejection = Rejection::bad_request("too_long_http_line_exception", "line too long");
    let out = rejection.synthetic_request();
    assert_eq!(rejection_of(&out), Some(rejection));
}
