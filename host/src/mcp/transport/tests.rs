//! The layer on in-memory pipes: what it answers itself, what it hands rmcp,
//! and how the session ends.

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, EmptyResult, GetMeta, RequestId,
    ServerNotification, ServerResult, SubscriptionsListenResult,
};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

use super::*;

struct Pipes {
    transport: LineTransport<DuplexStream>,
    client_in: DuplexStream,
    client_out: Lines<BufReader<DuplexStream>>,
    session: Session,
}

fn pipes() -> Pipes {
    let (client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let session = Session::new();
    Pipes {
        transport: LineTransport::new(server_in, server_out, session.clone()),
        client_in,
        client_out: BufReader::new(client_out).lines(),
        session,
    }
}

async fn write(pipes: &mut Pipes, line: Value) {
    pipes
        .client_in
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
}

async fn read(pipes: &mut Pipes) -> Value {
    let line = pipes.client_out.next_line().await.unwrap().unwrap();
    serde_json::from_str(&line).unwrap()
}

fn request(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

#[tokio::test]
async fn a_reused_id_in_flight_is_refused_and_the_first_is_answered_under_its_own_id() {
    let mut pipes = pipes();
    write(&mut pipes, request(json!("a"))).await;
    let Some(JsonRpcMessage::Request(first)) = pipes.transport.receive().await else {
        panic!("the first request reaches rmcp");
    };
    write(&mut pipes, request(json!("a"))).await;
    write(&mut pipes, request(json!("b"))).await;
    let Some(JsonRpcMessage::Request(second)) = pipes.transport.receive().await else {
        panic!("the next request reaches rmcp");
    };
    let refusal = read(&mut pipes).await;
    assert_eq!(refusal["id"], "a");
    assert_eq!(refusal["error"]["code"], -32600);

    let answer =
        ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), first.id);
    pipes.transport.send(answer).await.unwrap();
    assert_eq!(
        read(&mut pipes).await,
        json!({"jsonrpc": "2.0", "id": "a", "result": {}})
    );
    assert_ne!(
        second.id,
        RequestId::String("b".into()),
        "rmcp sees our ids"
    );
}

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn cancelled(id: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::notification(ServerNotification::CancelledNotification(
        CancelledNotification::new(CancelledNotificationParam::new(Some(id), None)),
    ))
}

/// rmcp names a subscription by the id it saw — ours — in everything it
/// sends on it; a client matches them by its own (Claude Code waited out
/// its timeout for an acknowledgement it could not match).
#[tokio::test]
async fn a_subscription_goes_out_under_the_clients_own_id() {
    let mut pipes = pipes();
    write(&mut pipes, request(json!("listen:0"))).await;
    let Some(JsonRpcMessage::Request(listen)) = pipes.transport.receive().await else {
        panic!("the request reaches rmcp");
    };
    let mut changed = ServerNotification::ToolListChangedNotification(Default::default());
    changed
        .get_meta_mut()
        .set_subscription_id(listen.id.clone());
    let changed = ServerJsonRpcMessage::notification(changed);
    pipes.transport.send(changed.clone()).await.unwrap();
    let sent = read(&mut pipes).await;
    assert_eq!(
        sent["params"]["_meta"][SUBSCRIPTION_ID], "listen:0",
        "{sent}"
    );

    // rmcp's cancellation of a request of the client's, and of its own
    // request 0 to the client (ids from another count: left alone).
    pipes
        .transport
        .send(cancelled(listen.id.clone()))
        .await
        .unwrap();
    assert_eq!(read(&mut pipes).await["params"]["requestId"], "listen:0");
    pipes
        .transport
        .send(cancelled(RequestId::Number(0)))
        .await
        .unwrap();
    assert_eq!(read(&mut pipes).await["params"]["requestId"], 0);

    let last = ServerResult::SubscriptionsListenResult(SubscriptionsListenResult::complete(
        listen.id.clone(),
    ));
    let last = ServerJsonRpcMessage::response(last, listen.id);
    pipes.transport.send(last).await.unwrap();
    let sent = read(&mut pipes).await;
    assert_eq!(sent["id"], "listen:0", "{sent}");
    assert_eq!(
        sent["result"]["_meta"][SUBSCRIPTION_ID], "listen:0",
        "{sent}"
    );

    // Over: the client may use the id again, so nothing names it any more.
    pipes.transport.send(changed).await.unwrap();
    let plain = ServerJsonRpcMessage::notification(
        ServerNotification::ToolListChangedNotification(Default::default()),
    );
    pipes.transport.send(plain).await.unwrap();
    let sent = read(&mut pipes).await;
    assert!(sent["params"].get("_meta").is_none(), "{sent}");
}

#[tokio::test]
async fn the_response_to_a_cancelled_request_is_never_written() {
    let mut pipes = pipes();
    write(&mut pipes, request(json!(1))).await;
    let Some(JsonRpcMessage::Request(first)) = pipes.transport.receive().await else {
        panic!()
    };
    write(
        &mut pipes,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    let Some(JsonRpcMessage::Notification(cancel)) = pipes.transport.receive().await else {
        panic!("the cancellation reaches rmcp")
    };
    let ClientNotification::CancelledNotification(cancel) = cancel.notification else {
        panic!()
    };
    assert_eq!(cancel.params.request_id, Some(first.id.clone()));
    let late = ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), first.id);
    pipes.transport.send(late).await.unwrap();
    write(&mut pipes, json!("not a message")).await;
    let waiting = std::time::Duration::from_millis(50);
    assert!(
        tokio::time::timeout(waiting, pipes.transport.receive())
            .await
            .is_err(),
        "the garbage is answered here, and nothing reaches rmcp"
    );
    assert_eq!(
        read(&mut pipes).await["error"]["code"],
        -32600,
        "only the refusal"
    );
}

#[tokio::test]
async fn closing_stdin_ends_the_session() {
    let mut pipes = pipes();
    drop(std::mem::replace(
        &mut pipes.client_in,
        tokio::io::duplex(1).0,
    ));
    assert!(pipes.transport.receive().await.is_none());
    assert!(pipes.session.is_over());
}

#[tokio::test]
async fn a_failed_write_ends_the_session_and_the_send() {
    let mut pipes = pipes();
    drop(pipes.client_out);
    let message = ServerJsonRpcMessage::notification(
        rmcp::model::ServerNotification::ToolListChangedNotification(Default::default()),
    );
    assert!(pipes.transport.send(message).await.is_err());
    assert!(pipes.session.is_over());
    assert!(pipes.transport.receive().await.is_none());
}

/// rmcp drops `receive` whenever another event is ready first; a line read
/// in part must survive that.
#[tokio::test]
async fn a_line_read_in_part_survives_a_dropped_receive() {
    let mut pipes = pipes();
    let line = request(json!("long")).to_string();
    let (head, tail) = line.split_at(line.len() / 2);
    pipes.client_in.write_all(head.as_bytes()).await.unwrap();
    let waiting = std::time::Duration::from_millis(50);
    assert!(
        tokio::time::timeout(waiting, pipes.transport.receive())
            .await
            .is_err()
    );
    pipes
        .client_in
        .write_all(format!("{tail}\n").as_bytes())
        .await
        .unwrap();
    let received =
        tokio::time::timeout(std::time::Duration::from_secs(5), pipes.transport.receive())
            .await
            .expect("the line completes");
    let Some(JsonRpcMessage::Request(request)) = received else {
        panic!("the whole line arrives");
    };
    assert_eq!(request.request.method(), "ping");
}

/// A client that floods malformed lines and reads none of the answers is
/// read no further once the answers queue up: the queue is bounded.
#[tokio::test(start_paused = true)]
async fn a_client_that_does_not_read_its_answers_is_not_read_further() {
    let mut pipes = pipes();
    for _ in 0..4000 {
        pipes.client_in.write_all(b"garbage\n").await.unwrap();
    }
    write(&mut pipes, request(json!(1))).await;
    // Paused time advances only when every task waits: the timeout fires
    // only if `receive` is stuck behind the full queue.
    let stuck = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        pipes.transport.receive(),
    )
    .await;
    assert!(stuck.is_err(), "every refusal was queued without bound");
    // Once the client reads, the request gets through.
    let drain =
        tokio::spawn(async move { while let Ok(Some(_)) = pipes.client_out.next_line().await {} });
    let next = pipes.transport.receive().await;
    assert!(matches!(next, Some(JsonRpcMessage::Request(_))), "{next:?}");
    drain.abort();
}
