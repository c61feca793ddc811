//! Cancellation reaches the network: a cancelled call, or a client that
//! goes away, closes the run's in-flight upstream connections.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_call_closes_its_in_flight_upstream_connections() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let server = Server::start(&config(&mock, "")).await;

    let arguments = json!({"prompt": "a question nobody will answer"})
        .as_object()
        .cloned()
        .unwrap();
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("ask").with_arguments(arguments),
    ));
    let handle = server
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 5)
            .await,
        "the panel was asked"
    );

    handle
        .cancel(Some("the user gave up".into()))
        .await
        .unwrap();
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open after cancel",
        mock.in_flight()
    );

    // The server carries on serving.
    for model in PANEL {
        mock.script(model, [Step::answer("back")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    assert_eq!(server.ask("ask", "q").await.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_disconnects_mid_run_leaves_nothing_running() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let server = Server::start(&config(&mock, "")).await;
    let peer = server.client.peer().clone();
    let arguments = json!({"prompt": "q"}).as_object().cloned().unwrap();
    let call = tokio::spawn(async move {
        let _ = peer
            .call_tool(CallToolRequestParams::new("ask").with_arguments(arguments))
            .await;
    });
    assert!(
        mock.wait_until(Duration::from_secs(10), |m| m.in_flight() == 5)
            .await
    );

    server.client.cancel().await.unwrap();
    call.abort();
    assert!(
        mock.wait_until(Duration::from_secs(15), |m| m.in_flight() == 0)
            .await,
        "{} upstream requests still open after the client left",
        mock.in_flight()
    );
}
