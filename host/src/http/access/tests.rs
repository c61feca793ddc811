use super::*;
use crate::http::Token;

#[test]
fn a_token_matches_itself_only() {
    let token = Token::new("s3cret-token").unwrap();
    assert!(token.matches("s3cret-token"));
    for wrong in [
        "",
        "s3cret-toke",
        "s3cret-token2",
        "S3CRET-TOKEN",
        " s3cret-token",
    ] {
        assert!(!token.matches(wrong), "{wrong:?}");
    }
    assert!(Token::new("").is_err());
    assert!(Token::new("  ").is_err());
    assert!(Token::new("abc\n").is_err());
    assert!(!format!("{token:?}").contains("s3cret"));
}

#[test]
fn hosts_match_by_name_and_by_port_when_one_is_given() {
    let hosts = Hosts::new(["localhost", "127.0.0.1", "::1", "chorus.example.com:8443"]).unwrap();
    for ok in [
        "localhost",
        "localhost:8080",
        "LOCALHOST:1",
        "127.0.0.1:9",
        "[::1]:8080",
        "chorus.example.com:8443",
    ] {
        assert!(hosts.allows(ok), "{ok}");
    }
    for refused in [
        "evil.example",
        "localhost.evil.example",
        "chorus.example.com",
        "chorus.example.com:80",
        "127.0.0.2",
        "user@localhost",
        "",
    ] {
        assert!(!hosts.allows(refused), "{refused}");
    }
    assert!(Hosts::new(["*"]).unwrap().allows("anything:1"));
    assert!(Hosts::new(["not a host"]).is_err());
}

#[test]
fn origins_match_as_browsers_write_them() {
    let origins = Origins::new(["https://App.Example.com", "http://localhost:6274"]).unwrap();
    assert!(origins.allows("https://app.example.com"));
    assert!(origins.allows("https://app.example.com:443"));
    assert!(origins.allows("http://localhost:6274"));
    for refused in [
        "http://app.example.com",
        "https://app.example.com:8443",
        "http://localhost:6275",
        "https://evil.example",
        "null",
        "",
    ] {
        assert!(!origins.allows(refused), "{refused}");
    }
    assert!(!Origins::default().allows("http://localhost"));
    for bad in [
        "app.example.com",
        "https://app.example.com/path",
        "null",
        "file:///x",
    ] {
        assert!(Origins::new([bad]).is_err(), "{bad}");
    }
}

#[test]
fn only_this_server_is_its_own_origin_and_only_by_a_name_given() {
    let access = |hosts: &[&str]| Access {
        clients: Clients::new(&[], None, |_| None).unwrap(),
        hosts: Hosts::new(hosts.iter().copied()).unwrap(),
        origins: Origins::default(),
        open: Client::local(),
    };
    let local = access(&["127.0.0.1", "localhost", "::1"]);
    for (origin, host) in [
        ("http://127.0.0.1:8080", "127.0.0.1:8080"),
        ("http://LOCALHOST:8080", "localhost:8080"),
        ("http://[::1]:8080", "[::1]:8080"),
        ("http://localhost", "localhost"),
        ("https://localhost", "localhost"),
    ] {
        assert!(local.allows_origin(origin, host), "{origin} at {host}");
    }
    for (origin, host) in [
        ("http://127.0.0.1:8081", "127.0.0.1:8080"),
        ("http://localhost:8080", "127.0.0.1:8080"),
        ("http://evil.example.com", "127.0.0.1:8080"),
        ("http://evil.example.com:8080", "evil.example.com:8080"),
        ("http://127.0.0.1:8080/path", "127.0.0.1:8080"),
        ("null", "127.0.0.1:8080"),
    ] {
        assert!(!local.allows_origin(origin, host), "{origin} at {host}");
    }
    // With every Host let in, a rebound name would pass the Host
    // check: its pages are not taken for ours.
    let any = access(&["*", "127.0.0.1"]);
    assert!(!any.allows_origin("http://evil.example.com:8080", "evil.example.com:8080"));
    assert!(any.allows_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
}

#[test]
fn refusals_are_json_rpc_errors_to_mcp_clients_and_text_to_others() {
    let read = |response: Response| {
        let content_type = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let body =
            futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                .unwrap();
        (content_type, String::from_utf8(body.to_vec()).unwrap())
    };
    let mut mcp = HeaderMap::new();
    mcp.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream, Application/JSON;q=0.9"),
    );
    let response = refuse(&mcp, StatusCode::UNAUTHORIZED, "send the token\n".into());
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let (content_type, body) = read(response);
    assert_eq!(content_type, "application/json");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["id"], serde_json::Value::Null);
    assert_eq!(error["error"]["message"], "send the token");
    assert_eq!(error["error"]["data"]["http_status"], 401);

    let mut curl = HeaderMap::new();
    curl.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    for headers in [curl, HeaderMap::new()] {
        let (content_type, body) = read(refuse(&headers, StatusCode::FORBIDDEN, "no\n".into()));
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        assert_eq!(body, "no\n");
    }
}
