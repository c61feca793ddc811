use std::path::PathBuf;
use std::time::Duration;

use super::*;

fn llm(catalog: bool) -> Llm {
    let text = crate::config::tests::MINIMAL
        .replace("[models.m]", &format!("catalog = {catalog}\n[models.m]"));
    let text = format!("[cache]\nenabled = false\n{text}");
    let loaded = crate::config::Loaded::parse(&text, "test.toml", PathBuf::from(".")).unwrap();
    Llm::new(&loaded).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_run_skips_loading_while_every_catalog_is_kept_and_loads_after() {
    let llm = llm(true);
    assert!(!llm.catalogs_fresh(), "nothing is loaded yet");
    // Port 9 refuses: the failure is kept for a minute, then asked again.
    llm.load_catalogs(false).await;
    assert!(llm.catalogs_fresh());
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(!llm.catalogs_fresh(), "a kept failure expires");
}

#[tokio::test]
async fn without_a_catalog_nothing_ever_needs_loading() {
    let llm = llm(false);
    llm.load_catalogs(false).await;
    assert!(llm.catalogs_fresh());
}
