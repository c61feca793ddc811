//! The run viewer on a team's server (`[[http.clients]]`): each client signs
//! in with its own token and sees only its own runs — list, run page,
//! export, re-synthesis — while another's run reads as not found; an admin
//! sees every run and may filter by client. The list's filters (pipeline,
//! kind, client, text, date) narrow the server-made HTML. In a real
//! browser (tests/browser/viewer_clients.py): a client signs in through
//! the form and sees its run but not another's.

use sha2::{Digest, Sha256};

use super::{CHROMIUM, browser_script, browser_tools, viewer_config};
use crate::support::http::{HttpServer, tool_call};
use crate::support::*;

const ALICE: &str = "alice-token-8e41b0c2d9";
const BOB: &str = "bob-token-5a7f3c91e0";
const ROOT: &str = "root-token-2c6d8e4f1a";

fn client(name: &str, token: &str, admin: bool) -> String {
    format!(
        "[[http.clients]]\nname = \"{name}\"\ntoken_sha256 = \"{:x}\"\nadmin = {admin}\n",
        Sha256::digest(token.as_bytes())
    )
}

/// A server whose clients are alice and bob (each sees its own runs) and
/// root (an admin), with a second pipeline `cheap`; alice asked about
/// apples, bob about bananas (`ask`), cherries (`cheap`) and a dud every
/// model failed.
async fn team(mock: &Mock) -> (ConfigFile, HttpServer) {
    let config = viewer_config(mock);
    let text = std::fs::read_to_string(&config.path).unwrap();
    let text = format!(
        "{text}\n[pipelines.cheap]\ndescription = \"The same panel, a second name.\"\n\
         selector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"synthesize\"\n\n{}{}{}",
        client("alice", ALICE, false),
        client("bob", BOB, false),
        client("root", ROOT, true),
    );
    std::fs::write(&config.path, text).unwrap();
    for model in PANEL {
        mock.script(model, [Step::answer("an answer")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = HttpServer::start(&config.path, None, &[]).await;
    for (id, token, tool, prompt) in [
        (1, ALICE, "ask", "alpha apples"),
        (2, BOB, "ask", "bravo bananas"),
        (3, BOB, "cheap", "bravo cherries"),
    ] {
        let response = server
            .post(Some(token), &tool_call(id, tool, prompt))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let _ = response.text().await;
    }
    for model in PANEL {
        mock.script(model, [Step::status(400, "this model is not available")]);
    }
    let response = server
        .post(Some(BOB), &tool_call(4, "ask", "bravo dud"))
        .send()
        .await
        .unwrap();
    let _ = response.text().await;
    (config, server)
}

/// The runs list as `token`'s client sees it, with the query `filters`.
async fn list(server: &HttpServer, token: &str, filters: &str) -> String {
    let page = reqwest::Client::new()
        .get(format!("{}/?{filters}", server.origin()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "/?{filters}");
    page.text().await.unwrap()
}

/// The id of the run whose prompt has `marker`, as the admin lists it
/// (waiting for the store to have written it).
async fn id_of(server: &HttpServer, marker: &str) -> String {
    for _ in 0..200 {
        let html = list(server, ROOT, &format!("text={marker}")).await;
        if let Some(at) = html.find("href=\"/runs/") {
            let rest = &html[at + "href=\"/runs/".len()..];
            return rest[..rest.find('"').unwrap()].to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no run with `{marker}` in the runs list");
}

async fn get(server: &HttpServer, token: &str, path: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.origin()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn each_client_sees_its_own_runs_and_the_filters_narrow_the_list() {
    let mock = Mock::start().await;
    let (_config, server) = team(&mock).await;
    let apples = id_of(&server, "apples").await;
    let bananas = id_of(&server, "bananas").await;
    id_of(&server, "dud").await;

    // Bob lists his runs and no one else's, and is not offered the client
    // filter; asking for alice's runs still lists his own.
    let bob = list(&server, BOB, "").await;
    assert!(
        bob.contains("bravo bananas")
            && bob.contains("bravo cherries")
            && bob.contains("bravo dud"),
        "{bob}"
    );
    assert!(
        !bob.contains("alpha apples") && bob.contains("Signed in as"),
        "{bob}"
    );
    assert!(!bob.contains("name=\"client\""), "{bob}");
    let asking = list(&server, BOB, "client=alice").await;
    assert!(
        !asking.contains("alpha apples") && asking.contains("bravo bananas"),
        "{asking}"
    );

    // Alice's run is not found for bob — page, export, live events and
    // re-synthesis — said as for a run that does not exist.
    let (status, page) = get(&server, BOB, &format!("/runs/{apples}")).await;
    let (missing, nothing) = get(&server, BOB, "/runs/0123456789abcdef").await;
    assert_eq!((status, missing), (404, 404), "{page}");
    assert!(
        page.contains("No such run") && nothing.contains("No such run"),
        "{page}"
    );
    assert!(!page.contains("alpha apples"), "{page}");
    let (status, export) = get(&server, BOB, &format!("/runs/{apples}/export.json")).await;
    assert_eq!(status, 404, "{export}");
    let (status, events) = get(&server, BOB, &format!("/runs/{apples}/events")).await;
    assert!(status == 200 && !events.contains("event:"), "{events}");
    let synthesized = mock.requests_for(SYNTH).len();
    let resynthesis = reqwest::Client::new()
        .post(format!("{}/runs/{apples}/resynthesize", server.origin()))
        .bearer_auth(BOB)
        .form(&[("merger", "as-before")])
        .send()
        .await
        .unwrap();
    assert_eq!(resynthesis.status(), 404);
    assert_eq!(
        mock.requests_for(SYNTH).len(),
        synthesized,
        "nothing merged"
    );
    // His own run is there, by id and as `last`.
    let (status, own) = get(&server, BOB, &format!("/runs/{bananas}")).await;
    assert!(status == 200 && own.contains("bravo bananas"), "{own}");
    let (status, last) = get(&server, BOB, "/runs/last").await;
    assert!(status == 200 && last.contains("bravo dud"), "{last}");
    let (status, _) = get(&server, ALICE, &format!("/runs/{bananas}")).await;
    assert_eq!(status, 404);

    // The admin sees every run, whose each is, and may filter by client.
    let root = list(&server, ROOT, "").await;
    assert!(
        root.contains("alpha apples")
            && root.contains("bravo bananas")
            && root.contains("name=\"client\""),
        "{root}"
    );
    assert!(!root.contains("Signed in as"), "{root}");
    let (status, _) = get(&server, ROOT, &format!("/runs/{apples}")).await;
    assert_eq!(status, 200);
    let alices = list(&server, ROOT, "client=alice").await;
    assert!(
        alices.contains("alpha apples") && !alices.contains("bravo"),
        "{alices}"
    );

    // The filters, as GET parameters.
    let cheap = list(&server, ROOT, "pipeline=cheap").await;
    assert!(
        cheap.contains("bravo cherries") && !cheap.contains("bravo bananas"),
        "{cheap}"
    );
    let merged = list(&server, ROOT, "kind=synthesis").await;
    assert!(
        merged.contains("alpha apples")
            && merged.contains("bravo cherries")
            && !merged.contains("bravo dud"),
        "{merged}"
    );
    assert!(
        merged.contains("<option value=\"synthesis\" selected>"),
        "{merged}"
    );
    let none = list(&server, ROOT, "kind=none").await;
    assert!(
        none.contains("bravo dud") && !none.contains("alpha apples"),
        "{none}"
    );
    let text = list(&server, BOB, "text=cherries").await;
    assert!(
        text.contains("bravo cherries") && !text.contains("bravo bananas"),
        "{text}"
    );
    let since = list(&server, ROOT, "since=2000-01-01").await;
    assert!(
        since.contains("alpha apples") && since.contains("bravo dud"),
        "{since}"
    );
    let later = list(&server, ROOT, "since=2999-01-01").await;
    assert!(
        later.contains("No runs match") && !later.contains("alpha apples"),
        "{later}"
    );
    let (status, bad) = get(&server, ROOT, "/?kind=great").await;
    assert!(
        status == 400 && bad.contains("is not a kind of run"),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_signs_in_in_a_real_browser_and_sees_only_its_runs() {
    let Some(_tools) = browser_tools() else {
        return;
    };
    let mock = Mock::start().await;
    let (_config, server) = team(&mock).await;
    let apples = id_of(&server, "apples").await;
    let bananas = id_of(&server, "bananas").await;
    let arguments = serde_json::json!({
        "origin": server.origin(),
        "chromium": CHROMIUM,
        "bob": BOB,
        "root": ROOT,
        "alices_run": apples,
        "bobs_run": bananas,
    });
    browser_script("viewer_clients.py", &arguments, &server, |_| {}).await;
}
