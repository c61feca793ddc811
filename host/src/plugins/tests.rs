use super::*;

#[test]
fn bounded_cuts_at_a_char_boundary() {
    assert_eq!(bounded("héllo".into(), 2), "h…");
    assert_eq!(bounded("short".into(), 10), "short");
}
