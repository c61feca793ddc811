//! URL attachments for a provider that cannot fetch URLs (`fetch_urls =
//! false`): chorus fetches each once per run from a real HTTPS server on
//! 127.0.0.1 (its CA trusted through `[tls] ca_files`) and the models get
//! the bytes, typed from them; an over-size body, a redirect off the
//! origin, an address inside the network (without `[limits]
//! fetch_private_urls`) and an untrusted certificate are refused before
//! any model is called. A provider that fetches URLs (the default) gets
//! the URL untouched, and nothing is fetched.

use serde_json::json;

use crate::attachments::sent::{
    BLIND, GIF, SEES, b64, catalog, config, image_parts, last_user, script,
};
use crate::support::https::{Https, Reply};
use crate::support::*;

/// The attachments e2e config, its provider not fetching URLs, with
/// `limits` and `tls` added.
fn not_fetching(mock: &Mock, limits: &str, tls: &str) -> String {
    let text = config(mock, "", limits).replace(
        "[providers.mock.retry]",
        "fetch_urls = false\n\n[providers.mock.retry]",
    );
    format!("{text}\n{tls}")
}

fn ask(url: &str) -> serde_json::Value {
    json!({"prompt": "What shape is this?", "attachments": [{"url": url}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_url_is_fetched_once_for_a_provider_that_cannot_and_typed_from_its_bytes() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let https = Https::start().await;
    https.route("/x.png", Reply::Bytes(GIF.to_vec()));
    let server = Server::start(&not_fetching(
        &mock,
        "fetch_private_urls = true",
        &https.tls_section(),
    ))
    .await;
    let result = server
        .call("ask", ask(&format!("{}/x.png", https.origin)))
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));

    let data_url = json!({"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{}", b64(GIF))}});
    let sees = mock.requests_for(SEES);
    assert_eq!(image_parts(last_user(&sees[0].body)), [&data_url]);
    assert!(
        !mock
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains(&https.origin)),
        "no model was sent the URL"
    );
    assert_eq!(https.hits(), 1, "fetched once for the whole run");

    let record = structured(&result);
    let attachment = &record["attachments"][0];
    assert_eq!(attachment["name"], "x.png", "{record:#}");
    assert_eq!(attachment["mime"], "image/gif");
    assert_eq!(attachment["bytes"], GIF.len());
    let notes = record["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "was fetched by chorus from localhost:{} (providers.mock.fetch_urls = false)",
            https.port
        )),
        "{notes}"
    );
    // The text-only member read the description, as for any image.
    assert!(
        !mock.requests_for(BLIND)[0]
            .body
            .to_string()
            .contains("image_url")
    );

    // The store kept the fetched bytes: a follow-up sends them again
    // without fetching.
    let run_id = record["run_id"].as_str().unwrap();
    let follow_up = server
        .call(
            "ask",
            json!({"prompt": "And its colour?", "follow_up_of": run_id}),
        )
        .await;
    assert_eq!(follow_up.is_error, Some(false), "{}", text(&follow_up));
    let sees = mock.requests_for(SEES);
    assert_eq!(image_parts(last_user(&sees[1].body)), [&data_url]);
    assert_eq!(https.hits(), 1, "not fetched again");
}

#[tokio::test(flavor = "multi_thread")]
async fn too_big_and_redirected_urls_are_refused_before_any_model_is_called() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let https = Https::start().await;
    let mut big = GIF.to_vec();
    big.resize(100, 0);
    https
        .route("/big.gif", Reply::Bytes(big))
        .route("/x.gif", Reply::Bytes(GIF.to_vec()))
        .route(
            "/to-http",
            Reply::Redirect(format!("http://localhost:{}/x.gif", https.port)),
        )
        .route(
            "/to-other-host",
            Reply::Redirect(format!("https://127.0.0.1:{}/x.gif", https.port)),
        )
        .route("/same-origin", Reply::Redirect("/x.gif".to_owned()));
    let server = Server::start(&not_fetching(
        &mock,
        "fetch_private_urls = true\nmax_attachment_bytes = 64",
        &https.tls_section(),
    ))
    .await;
    let refused = |path: &str| {
        let call = server.call("ask", ask(&format!("{}{path}", https.origin)));
        async move {
            let result = call.await;
            assert_eq!(result.is_error, Some(true), "{}", text(&result));
            text(&result)
        }
    };

    let said = refused("/big.gif").await;
    assert!(
        said.contains("attachment 1 (big.gif)")
            && said.contains("over the limit of 64 bytes (limits.max_attachment_bytes)"),
        "{said}"
    );
    let said = refused("/to-http").await;
    assert!(
        said.contains(&format!("redirects to http://localhost:{}", https.port))
            && said.contains("within its origin"),
        "{said}"
    );
    let said = refused("/to-other-host").await;
    assert!(
        said.contains(&format!("redirects to https://127.0.0.1:{}", https.port)),
        "{said}"
    );
    assert!(mock.requests().is_empty(), "nothing was sent, nothing paid");

    // A redirect within the origin is followed.
    let result = server
        .call("ask", ask(&format!("{}/same-origin", https.origin)))
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let sees = mock.requests_for(SEES);
    assert!(
        sees[0].body.to_string().contains(&b64(GIF)),
        "the redirect's target was sent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_address_and_an_untrusted_certificate_are_refused() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let https = Https::start().await;
    https.route("/x.png", Reply::Bytes(GIF.to_vec()));
    let url = format!("{}/x.png", https.origin);

    // Trusted, but `localhost` is a loopback address.
    let server = Server::start(&not_fetching(&mock, "", &https.tls_section())).await;
    let result = server.call("ask", ask(&url)).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let said = text(&result);
    assert!(
        said.contains("a loopback address")
            && said.contains("set limits.fetch_private_urls = true"),
        "{said}"
    );
    drop(server);

    // Allowed, but nobody told chorus to trust the test CA.
    let server = Server::start(&not_fetching(&mock, "fetch_private_urls = true", "")).await;
    let result = server.call("ask", ask(&url)).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let said = text(&result);
    assert!(
        said.contains(&format!("cannot fetch from localhost:{}", https.port))
            && said.contains("certificate")
            && said.contains("[tls] ca_files"),
        "{said}"
    );
    assert_eq!(https.hits(), 0, "no request got past the checks");
    assert!(mock.requests().is_empty(), "nothing was sent, nothing paid");
}

/// Through a proxy the proxy would resolve the name, and the check of the
/// address would never see it: while private addresses are refused, the
/// fetcher goes to no proxy (issue 37, defect 15).
#[tokio::test(flavor = "multi_thread")]
async fn the_private_address_check_is_not_bypassed_through_https_proxy() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let https = Https::start().await;
    https.route("/x.png", Reply::Bytes(GIF.to_vec()));
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = reached.clone();
    tokio::spawn(async move {
        while let Ok((connection, _)) = proxy.accept().await {
            counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(connection);
        }
    });
    let server = Server::start_with_env(
        &not_fetching(&mock, "", &https.tls_section()),
        &[
            ("HTTPS_PROXY", proxy_url.as_str()),
            ("ALL_PROXY", proxy_url.as_str()),
        ],
    )
    .await;
    let result = server
        .call("ask", ask(&format!("{}/x.png", https.origin)))
        .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let said = text(&result);
    assert!(said.contains("a loopback address"), "{said}");
    assert_eq!(
        reached.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing went through the proxy"
    );
    assert_eq!(https.hits(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_fetches_urls_gets_the_url_untouched() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let https = Https::start().await;
    https.route("/x.png", Reply::Bytes(GIF.to_vec()));
    let config = format!(
        "{}\n{}",
        config(&mock, "", "fetch_private_urls = true"),
        https.tls_section()
    );
    let server = Server::start(&config).await;
    let url = format!("{}/x.png", https.origin);
    let result = server.call("ask", ask(&url)).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let sees = mock.requests_for(SEES);
    assert_eq!(
        image_parts(last_user(&sees[0].body)),
        [&json!({"type": "image_url", "image_url": {"url": url}})]
    );
    assert_eq!(https.hits(), 0, "chorus fetched nothing");
}

/// The provider here is on 127.0.0.1, inside a network, as a company's own
/// model server would be: a tenant's URL to an address beside it (cloud
/// metadata, a private service) must not reach it to be fetched there.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_inside_a_network_is_not_passed_to_a_provider_inside_one() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let server = Server::start(&config(&mock, "", "")).await;
    for url in [
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.5/x.png",
        "https://[::1]/x.png",
        "https://localhost/x.png",
    ] {
        let result = server.call("ask", ask(url)).await;
        let said = text(&result);
        assert_eq!(result.is_error, Some(true), "{url}: {said}");
        assert!(
            said.contains("inside a network") && said.contains("limits.fetch_private_urls"),
            "{url}: {said}"
        );
    }
    assert!(mock.requests().is_empty(), "no model was asked");
    // A host name is the provider's to resolve: passed on untouched.
    let url = "https://example.com/x.png";
    let result = server.call("ask", ask(url)).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let sees = mock.requests_for(SEES);
    assert_eq!(
        image_parts(last_user(&sees[0].body)),
        [&json!({"type": "image_url", "image_url": {"url": url}})]
    );
}
