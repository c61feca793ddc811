use sha2::{Digest, Sha256};

use super::component::serving;
use super::*;

#[test]
fn every_known_contract_version_is_served_by_its_own_bindings() {
    assert_eq!(serving("0.1.0"), Ok("0.1.0"));
    assert_eq!(serving("0.2.0"), Ok("0.2.0"));
    assert_eq!(serving("0.3.0"), Ok("0.3.0"));
    assert_eq!(serving("0.4.0"), Ok("0.4.0"));
    assert_eq!(serving("0.5.0"), Ok("0.5.0"));
    assert_eq!(serving("0.6.0"), Ok("0.6.0"));
}

#[test]
fn newer_or_unknown_contract_versions_are_refused_naming_both() {
    let newer = serving("0.7.0").unwrap_err();
    assert!(
        newer.contains(
            "built for chorus:strategy@0.7.0, but this chorus speaks chorus:strategy@0.6.0"
        ),
        "{newer}"
    );
    let patch = serving("0.6.1").unwrap_err();
    assert!(patch.contains("built for chorus:strategy@0.6.1"), "{patch}");
    assert!(serving("1.0.0").is_err());
    let old = serving("0.0.9").unwrap_err();
    assert!(old.contains("no longer serves"), "{old}");
    for nonsense in ["", "banana", "0.2", "0.2.0.1"] {
        assert!(serving(nonsense).is_err(), "{nonsense:?}");
    }
}

#[test]
fn every_builtin_plugin_is_embedded_and_no_test_plugin_is() {
    let names: Vec<_> = builtin_names().collect();
    for expected in [
        "static-panel",
        "passthrough",
        "synthesize",
        "heavy-planner",
        "council",
        "analysis",
    ] {
        assert!(names.contains(&expected), "{expected} is built in");
    }
    for test_only in [
        "chaos",
        "chaos-synthesizer",
        "future-contract",
        "legacy-longest",
        "placing",
        "contract-0-3",
        "contract-0-2",
    ] {
        assert!(!names.contains(&test_only), "{test_only} is not shipped");
    }
    for b in builtin::BUILTINS {
        assert!(b.component.starts_with(b"\0asm"), "a WebAssembly binary");
    }
}

#[test]
fn each_builtin_carries_the_digest_of_its_component() {
    for b in builtin::BUILTINS {
        let digest: [u8; 32] = Sha256::digest(b.component).into();
        assert_eq!(b.digest, digest, "{}: the build's digest", b.name);
    }
}

#[test]
fn a_components_exports_say_its_kind_without_compiling_it() {
    let kind = |name: &str| {
        let b = builtin::BUILTINS.iter().find(|b| b.name == name).unwrap();
        component::declared_kind(b.component)
    };
    assert_eq!(kind("static-panel"), Some(Kind::Selector));
    assert_eq!(kind("passthrough"), Some(Kind::Prompter));
    for synthesizer in ["synthesize", "vote"] {
        assert_eq!(kind(synthesizer), Some(Kind::Synthesizer), "{synthesizer}");
    }
    for b in builtin::BUILTINS {
        assert_eq!(
            component::declared_kind(b.component),
            Some(b.kind),
            "{}: the kind the build read is the one its exports declare",
            b.name
        );
    }
    // Not a component, a truncated one, a core module: no kind to declare.
    let synthesize = builtin::BUILTINS
        .iter()
        .find(|b| b.name == "synthesize")
        .unwrap();
    for bytes in [
        &b"not wasm at all"[..],
        &synthesize.component[..synthesize.component.len() / 2],
        b"\0asm\x01\0\0\0",
    ] {
        assert_eq!(component::declared_kind(bytes), None);
    }
}

/// In `serve`, a built-in with its shipped settings is not loaded until it
/// is first needed, and a reload shares that one load rather than making
/// its own; one with settings of its own loads at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_shipped_builtin_loads_on_first_use_once_for_a_reload_too() {
    let cache = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[cache]\ndir = {:?}\n",
        crate::config::tests::MINIMAL,
        cache.path()
    );
    // MINIMAL's static-panel has no panel: refused, at a start of `serve`
    // too — settings of its own are checked at start.
    let unset = Loaded::parse(&text, "test.toml", ".".into()).unwrap();
    let first = unset.clone();
    let refused = tokio::task::spawn_blocking(move || Registry::load(&first).err())
        .await
        .unwrap()
        .expect("a static-panel without a panel is refused");
    assert!(
        refused.to_string().contains("missing field `panel`"),
        "{refused}"
    );
    let refused = Registry::load_deferred(&unset)
        .err()
        .expect("refused at start");
    assert!(
        refused.to_string().contains("missing field `panel`"),
        "{refused}"
    );

    // With one: what a first start left is everything compiled and cached.
    let text = text.replace(
        "builtin = \"static-panel\"",
        "builtin = \"static-panel\"\nsettings = { panel = [\"m\"] }",
    );
    let loaded = Loaded::parse(&text, "test.toml", ".".into()).unwrap();
    let serving = Registry::load_deferred(&loaded).unwrap();
    // `s` is a static-panel with a panel of its own: checked at start.
    assert!(matches!(
        serving.availability("s"),
        Some(Availability::Ready(_))
    ));
    for shipped in ["r", "y"] {
        assert!(
            matches!(serving.availability(shipped), Some(Availability::Unloaded)),
            "{shipped}"
        );
    }
    assert_eq!(serving.kind("r"), Some(Kind::Prompter));
    assert_eq!(serving.kind("y"), Some(Kind::Synthesizer));
    assert_eq!(serving.iter().count(), 1);

    let reloaded = Registry::load_reusing(&loaded, Some(&serving)).unwrap();
    for name in ["s", "r", "y"] {
        assert!(reloaded.kept(&serving, name), "{name}");
    }
    reloaded.settled(&["y"]).await;
    let synthesizer = reloaded.get("y").expect("loaded on first use");
    assert!(
        Arc::ptr_eq(synthesizer, serving.get("y").unwrap()),
        "one load, for both"
    );
    assert!(reloaded.kept(&serving, "y"));
    assert!(
        matches!(serving.availability("r"), Some(Availability::Unloaded)),
        "only what was asked for"
    );
}
