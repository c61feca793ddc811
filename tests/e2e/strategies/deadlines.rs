//! Plugin budgets that mean what they say: a plugin still computing at the
//! run's deadline is stopped there (no fixed wrap-up past `run_timeout`),
//! and `cpu_time` buys that much CPU of a tight loop, measured by the
//! operating system, on any machine (the plugin's threads' CPU clocks).

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

/// A pipeline `spin` whose selector loops, with `cpu_time` and the
/// pipeline's `run_timeout` as given.
fn spinning(cpu_time: &str, run_timeout: &str) -> String {
    chaos_pipeline("spin", "loop", "")
        .replace("cpu_time = \"2s\"", &format!("cpu_time = \"{cpu_time}\""))
        .replace(
            "selector = \"chaos-spin\"",
            &format!("selector = \"chaos-spin\"\nrun_timeout = \"{run_timeout}\""),
        )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_computing_past_the_run_deadline_is_stopped_at_it() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&config(&mock, &spinning("60s", "3s"))).await;
    let started = Instant::now();
    let result = server.ask("spin", "q").await;
    let took = started.elapsed();
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("plugin `chaos-spin` was still working at the run's deadline")
            && message.contains("run_timeout (3s)"),
        "{message}"
    );
    // It used to be answered after the deadline plus a fixed 5 s wrap-up
    // (8 s); the margin here is for a loaded machine.
    assert!(
        took < Duration::from_secs(7),
        "answered {took:?} after a 3 s run_timeout"
    );
    assert!(mock.requests().is_empty(), "no model was asked");
}

/// `chorus ask` on `config`: its stderr and the CPU seconds (user and
/// system) the process used, from `wait4`.
fn ask_measuring_cpu(config: &Path) -> (String, f64) {
    // Waited for by `wait4` below, which also says what it spent.
    #[allow(clippy::zombie_processes)]
    let mut child = std::process::Command::new(chorus_bin())
        .args([
            "--config",
            config.to_str().unwrap(),
            "ask",
            "--pipeline",
            "spin",
            "q",
        ])
        .env(KEY_VAR, CANARY)
        .env(
            "XDG_CACHE_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"),
        )
        .env(
            "XDG_DATA_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("data"),
        )
        .env("CHORUS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chorus ask");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; both pointers
    // are to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (stderr, seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

#[test]
fn cpu_time_buys_about_that_much_cpu_of_a_tight_loop() {
    let mock_url = "http://127.0.0.1:9/v1"; // never asked: the selector loops
    let file = |cpu_time: &str| {
        write_config(&format!(
            r#"
[store]
enabled = false
[providers.mock]
base_url = "{mock_url}"
api_key_env = "{KEY_VAR}"
catalog = false
[models.m1]
[models.{SYNTH}]
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
{}"#,
            spinning(cpu_time, "5m")
        ))
    };
    // The same run with (almost) no budget: starting, compiling or loading
    // the plugin from the cache, and stopping. Twice, so the plugin is
    // cached for the measured run as for the second.
    let baseline = file("10ms");
    let _ = ask_measuring_cpu(&baseline.path);
    let (_, base) = ask_measuring_cpu(&baseline.path);
    let spent = file("2s");
    let (stderr, cpu) = ask_measuring_cpu(&spent.path);
    assert!(
        stderr.contains("plugin `chaos-spin` used up its CPU time (2s)"),
        "{stderr}"
    );
    let looped = cpu - base;
    // The CPU clock decides: 2 s and a stretch between yields, on a fast
    // machine or a slow one (fuel, calibrated on one machine, bought 1 to
    // 5 s depending on the core). The margin is the process's own work
    // around the loop, which the baseline does not repeat exactly.
    assert!(
        (1.8..2.8).contains(&looped),
        "cpu_time = \"2s\" bought {looped:.2} s of CPU ({cpu:.2} s, {base:.2} s without the loop)"
    );
}
