use super::*;

#[test]
fn money_prints_without_float_noise() {
    let noisy = 0.0002 + 0.0004;
    assert_ne!(noisy, 0.0006, "the float noise this guards against");
    assert_eq!(round_usd(noisy), 0.0006);
    assert_eq!(serde_json::to_string(&round_usd(noisy)).unwrap(), "0.0006");
    assert_eq!(show_usd(noisy), "$0.0006");
    assert_eq!(show_usd(1.5), "$1.50");
    assert_eq!(show_usd(0.1), "$0.10");
    assert_eq!(show_usd(0.123456789), "$0.123457");
    assert_eq!(show_usd(0.0), "$0");
}

#[test]
fn first_lines_are_cut_and_marked() {
    assert_eq!(first_line("  Why?\nBecause.", 40), "Why? …");
    assert_eq!(first_line("short", 40), "short");
    assert_eq!(first_line("ééééé", 3), "ééé…");
    assert_eq!(first_line("", 3), "");
}

#[test]
fn a_stored_call_shows_its_reply_and_request() {
    let call = CallRecord {
        id: 2,
        stage: "fan-out".into(),
        label: "panel".into(),
        model: "m".into(),
        status: "ok".into(),
        latency_ms: 5,
        attempts: 1,
        reply: Some(Arc::new("the answer".into())),
        ..CallRecord::default()
    };
    assert!(serde_json::to_value(&call).unwrap().get("reply").is_none());
    let stored = StoredCall {
        call,
        request: Some(serde_json::json!({"model": "m"})),
    };
    let value = serde_json::to_value(&stored).unwrap();
    assert_eq!(value["reply"], "the answer");
    assert_eq!(value["request"]["model"], "m");
    assert_eq!(value["id"], 2);
    assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
}
