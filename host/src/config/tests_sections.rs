//! The sections' own tests: `[fan_out]`, `[store]`, and a pipeline's run
//! against `[limits] task_ttl`.

use super::tests::{MINIMAL, parse};
use super::*;

#[test]
fn the_fan_out_policy_has_defaults_and_per_pipeline_overrides() {
    let loaded = parse(&format!(
        "[fan_out]\nquorum = 2\nstraggler_grace = \"3s\"\n{MINIMAL}\nfan_out = {{ quorum = \"all\", merge_reserve = \"5s\" }}\n"
    ))
    .unwrap();
    let policy = loaded
        .config
        .fan_out
        .with(&loaded.config.pipelines["ask"].fan_out);
    assert_eq!(policy.quorum, Quorum::All);
    assert_eq!(policy.straggler_grace, std::time::Duration::from_secs(3));
    assert_eq!(
        policy.merge_reserve,
        MergeReserve::Fixed(std::time::Duration::from_secs(5))
    );
    assert_eq!(Quorum::Majority.of(5), 3);
    assert_eq!(Quorum::Majority.of(1), 1);
    assert_eq!(Quorum::Count(9).of(4), 4);
    assert_eq!(
        parse(MINIMAL).unwrap().config.fan_out.merge_reserve,
        MergeReserve::Share(25)
    );

    for (bad, says) in [
        ("quorum = 0", "\"majority\", \"all\", or a number"),
        ("quorum = \"most\"", "\"majority\", \"all\", or a number"),
        ("merge_reserve = \"95%\"", "a share of the deadline"),
    ] {
        let error = parse(&format!("[fan_out]\n{bad}\n{MINIMAL}")).unwrap_err();
        assert!(error.key.starts_with("fan_out."), "{error}");
        assert!(error.message.contains(says), "{error}");
    }
    let error = parse(&format!("[fan_out]\nmerge_reserve = \"20m\"\n{MINIMAL}")).unwrap_err();
    assert_eq!(error.key, "fan_out.merge_reserve");
    assert!(error.message.contains("no time for its fan-out"), "{error}");
}

#[test]
fn the_store_section_has_defaults_and_checked_bounds() {
    let store = &parse(MINIMAL).unwrap().config.store;
    assert!(store.enabled);
    assert_eq!(store.path, None);
    assert_eq!((store.max_runs, store.max_age), (10_000, None));

    let text = format!(
        "{MINIMAL}\n[store]\npath = \"runs.db\"\nmax_runs = 5\nmax_age = \"30days\"\nmax_bytes = 1000\n"
    );
    let store = parse(&text).unwrap().config.store;
    assert_eq!(store.path.as_deref(), Some(std::path::Path::new("runs.db")));
    let text = format!(
        "{MINIMAL}\n[store]\nurl = \"postgres://chorus@db:5432/runs\"\npassword_env = \"DB_PASSWORD\"\n"
    );
    let database = parse(&text).unwrap().config.store;
    assert_eq!(
        database.url.as_deref(),
        Some("postgres://chorus@db:5432/runs")
    );
    assert_eq!(database.password_env.as_deref(), Some("DB_PASSWORD"));
    assert_eq!(
        store.max_age,
        Some(std::time::Duration::from_secs(30 * 86400))
    );

    let cases = [
        (
            "[store]\nmax_runs = 0",
            "store.max_runs",
            "greater than zero",
        ),
        (
            "[store]\nmax_age = \"0s\"",
            "store.max_age",
            "greater than zero",
        ),
        ("[store]\npath = \"\"", "store.path", "must name a file"),
        ("[store]\nkeep = 3", "store.keep", "unknown field"),
        (
            "[store]\nurl = \"postgres://chorus:s3cret@db/runs\"",
            "store.url",
            "holds a password: keep it out of the config file",
        ),
        (
            "[store]\nurl = \"mysql://chorus@db/runs\"",
            "store.url",
            "must start with postgres://",
        ),
        ("[store]\nurl = \"db:5432\"", "store.url", "postgres://"),
        (
            "[store]\npassword_env = \"\"",
            "store.password_env",
            "must name an environment variable",
        ),
        (
            "[pipelines.resynthesize]\ndescription = \"d\"\nselector = \"s\"\nprompter = \"r\"\nsynthesizer = \"y\"",
            "pipelines.resynthesize",
            "a tool chorus provides itself",
        ),
        (
            "[pipelines.ask.options.follow_up_of]\ntype = \"string\"\ndescription = \"d\"",
            "pipelines.ask.options.follow_up_of",
            "every pipeline takes already",
        ),
    ];
    for (extra, key, message) in cases {
        let error = parse(&format!("{MINIMAL}\n{extra}\n")).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(message), "{error}");
    }
}

#[test]
fn a_task_ttl_shorter_than_a_run_is_refused_naming_both_keys() {
    let limits = |text: &str| format!("[limits]\n{text}\n{MINIMAL}");
    let error = parse(&limits("run_timeout = \"1h\"")).unwrap_err();
    assert_eq!(error.key, "limits.task_ttl");
    let shown = error.to_string();
    assert!(shown.contains("limits.run_timeout"), "{shown}");
    let error = parse(&MINIMAL.replace(
        "synthesizer = \"y\"",
        "synthesizer = \"y\"\nrun_timeout = \"2h\"",
    ))
    .unwrap_err();
    assert_eq!(error.key, "limits.task_ttl");
    assert!(
        error.to_string().contains("pipelines.ask.run_timeout"),
        "{error}"
    );
    assert!(parse(&limits("run_timeout = \"1h\"\ntask_ttl = \"61m\"")).is_ok());
    assert!(parse(MINIMAL).is_ok(), "the defaults fit");
}
