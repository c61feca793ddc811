//! The worker protocol against real child processes, played by `sh`:
//! replies, the limits, and every way a child can fail.

use super::*;
use tokio::sync::Semaphore;

static TURNS: Semaphore = Semaphore::const_new(64);

/// A worker that runs `script` (the job's arguments are its `$1…`).
fn sh(script: &str) -> Worker {
    Worker {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into(), "sh".into()],
    }
}

async fn ask(worker: &Worker, job: Job, within: Duration) -> Result<Reply, Failure> {
    let turn = TURNS.acquire().await.unwrap();
    let pdf = base64::engine::general_purpose::STANDARD.encode(b"%PDF-1.7\n");
    in_child(Some(worker), turn, pdf.into(), job, Instant::now() + within).await
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn pid_in(file: &std::path::Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_job_is_the_arguments_the_child_parses() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        job: Job,
    }
    for job in [Job::Pages, Job::text(Bounds::DEFAULT)] {
        let args = std::iter::once("__pdf".to_owned()).chain(job.args());
        assert_eq!(<Cli as clap::Parser>::parse_from(args).job, job);
    }
}

#[tokio::test]
async fn a_reply_comes_back_on_stdout() {
    let got = ask(
        &sh(r#"cat >/dev/null; printf '{"pages":7}'"#),
        Job::Pages,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(got.unwrap(), Reply::Pages(Some(7)));
    let got = ask(
        &sh(r#"printf '{"text":{"Err":"it has no pages"}}'"#),
        Job::text(Bounds::DEFAULT),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(got.unwrap(), Reply::Text(Err("it has no pages".into())));
}

#[tokio::test]
async fn the_child_runs_under_the_limits() {
    for (limit, expected) in [("-v", ADDRESS_SPACE >> 10), ("-t", CPU_SECONDS), ("-c", 0)] {
        let script = format!(r#"printf '{{"pages":%s}}' "$(ulimit {limit})""#);
        let got = ask(&sh(&script), Job::Pages, Duration::from_secs(10)).await;
        assert_eq!(
            got.unwrap(),
            Reply::Pages(Some(expected as u32)),
            "ulimit {limit}"
        );
    }
}

#[tokio::test]
async fn garbage_a_crash_or_a_kill_is_a_clear_reason() {
    let cases = [
        ("echo garbage", "gave no readable answer"),
        ("head -c 5000000 /dev/zero", "gave no readable answer"),
        (
            r#"printf '{"pages":7}'; exit 3"#,
            "the PDF parser failed on it",
        ),
        ("kill -ABRT $$", "needs more than 256 MB of memory"),
        ("kill -XCPU $$", "needs more than 15 s of CPU"),
        ("kill -KILL $$", "the parser was killed"),
    ];
    for (script, said) in cases {
        let why = ask(&sh(script), Job::Pages, Duration::from_secs(10))
            .await
            .unwrap_err()
            .to_string();
        assert!(why.starts_with("it could not be read: "), "{script}: {why}");
        assert!(why.contains(said), "{script}: {why}");
    }
    let missing = Worker {
        program: "/nonexistent/chorus".into(),
        args: Vec::new(),
    };
    let why = ask(&missing, Job::Pages, Duration::from_secs(10)).await;
    assert!(matches!(why, Err(Failure::Spawn(_))), "{why:?}");
    let why = in_child(
        None,
        TURNS.acquire().await.unwrap(),
        "".into(),
        Job::Pages,
        Instant::now(),
    )
    .await
    .unwrap_err();
    assert!(why.to_string().contains("use_worker"), "{why}");
}

#[tokio::test]
async fn a_child_past_its_deadline_is_killed_and_gone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", file.display());
    let started = std::time::Instant::now();
    let got = ask(&sh(&script), Job::Pages, Duration::from_millis(500)).await;
    assert!(matches!(got, Err(Failure::TooLong)), "{got:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!alive(pid_in(&file)), "killed and reaped when it returns");
}

#[tokio::test]
async fn a_caller_that_stops_waiting_gets_its_child_gone_before_its_turn_is_back() {
    static ONE: Semaphore = Semaphore::const_new(1);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pid");
    let worker = sh(&format!("echo $$ > {}; exec sleep 30", file.display()));
    let turn = ONE.acquire().await.unwrap();
    let far = Instant::now() + Duration::from_secs(60);
    let call = in_child(Some(&worker), turn, "".into(), Job::Pages, far);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    let _again = tokio::time::timeout(Duration::from_secs(5), ONE.acquire())
        .await
        .expect("the turn is given back once the child is gone")
        .unwrap();
    assert!(!alive(pid_in(&file)));
}
