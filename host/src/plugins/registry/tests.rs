use super::*;

#[test]
fn contract_versions_are_compatible_by_semver() {
    assert!(compatible("0.1.0", "0.1.0"));
    assert!(
        compatible("0.1.3", "0.1.0"),
        "patch releases of the contract are compatible"
    );
    assert!(!compatible("0.2.0", "0.1.0"), "a newer 0.x minor is not");
    assert!(!compatible("0.0.9", "0.1.0"), "an older 0.x minor is not");
    assert!(
        compatible("1.0.0", "1.2.0"),
        "from 1.0, older minors keep working"
    );
    assert!(!compatible("1.3.0", "1.2.0"), "but not newer ones");
    assert!(!compatible("2.0.0", "1.2.0"));
    assert!(!compatible("", "0.1.0"));
    assert!(!compatible("banana", "0.1.0"));
}

#[test]
fn every_builtin_plugin_is_embedded() {
    let names: Vec<_> = builtin_names().collect();
    for expected in [
        "static-panel",
        "passthrough",
        "synthesize",
        "heavy-planner",
        "council",
    ] {
        assert!(names.contains(&expected), "{expected} is built in");
    }
    for (_, bytes) in builtin::BUILTINS {
        assert!(bytes.starts_with(b"\0asm"), "a WebAssembly binary");
    }
}
