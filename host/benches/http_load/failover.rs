//! The failover measure: under load through nginx, one of the instances is
//! killed with SIGKILL. Reported: how long until the runs it had in flight
//! read `interrupted` through the balancer (another instance answering from
//! the store), how many client calls failed (those in flight on it, and
//! any started after the kill), how soon nginx stopped sending requests to
//! it (its access log: the instances each request tried), and runs/s
//! before and after.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::deploy::Deployment;
use crate::{PANEL_MS, SYNTH_MS, ask, rpc};

/// One client call: when it started and ended, and whether it answered.
struct Call {
    started: Instant,
    ended: Instant,
    ok: bool,
}

/// Reads run `id` through the balancer: its status, or why not.
async fn status(client: &reqwest::Client, url: &str, id: &str) -> Result<String, String> {
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                      "params": {"uri": format!("chorus://runs/{id}")}});
    let reply = rpc(client, url, &read).await?;
    let text = reply["result"]["contents"][0]["text"].as_str();
    let run: Value = text
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| format!("not a run: {reply}"))?;
    Ok(run["status"].as_str().unwrap_or("none").to_owned())
}

/// Seconds since the epoch, as nginx's `$msec`.
fn epoch(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

pub async fn measure(deployment: &mut Deployment, client: &reqwest::Client, clients: usize) {
    let url = deployment.url.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..clients)
        .map(|worker| {
            let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
            tokio::spawn(async move {
                let mut calls = Vec::new();
                let mut id = (1 << 40) + ((worker as u64) << 32);
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let started = Instant::now();
                    let ok = ask(&client, &url, id).await.is_ok();
                    let ended = Instant::now();
                    calls.push(Call { started, ended, ok });
                }
                calls
            })
        })
        .collect();
    // Ramp up, then a steady stretch to compare with after the kill.
    tokio::time::sleep(Duration::from_millis(3 * (PANEL_MS + SYNTH_MS) + 5000)).await;

    let victim = &deployment.instances[0];
    let (pid, addr) = (victim.pid, victim.addr.clone());
    let lease = deployment.psql(&format!(
        "SELECT id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint - heartbeat_at
         FROM instances WHERE host LIKE '%/{pid}'"
    ));
    let (instance, heartbeat_age) = lease.split_once('|').expect("the instance's lease");
    let heartbeat_age: f64 = heartbeat_age.trim().parse::<f64>().unwrap() / 1000.0;
    let wall = SystemTime::now();
    let killed = Instant::now();
    let victim = &mut deployment.instances[0];
    victim.child.start_kill().unwrap();
    victim.child.wait().await.unwrap();
    // Its rows no longer change: the runs it had on record as running.
    let running = deployment.psql(&format!(
        "SELECT id FROM runs WHERE owner = '{instance}' AND status = 'running'"
    ));
    let mut pending: Vec<String> = running.lines().map(str::to_owned).collect();
    let on_record = pending.len();
    let (mut first, mut last) = (None, None);
    let (mut other, mut errors) = (Vec::new(), 0);
    while !pending.is_empty() && killed.elapsed() < Duration::from_secs(60) {
        let mut still = Vec::new();
        for id in pending {
            match status(client, &url, &id).await.as_deref() {
                Ok("interrupted") => {
                    let at = killed.elapsed();
                    first.get_or_insert(at);
                    last = Some(at);
                }
                Ok("running") => still.push(id),
                Ok(seen) => other.push(format!("{id}: {seen}")),
                Err(_) => {
                    errors += 1;
                    still.push(id);
                }
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Load goes on a little, over the two that are left.
    let after_from = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let mut calls = Vec::new();
    for worker in workers {
        calls.extend(worker.await.unwrap());
    }

    let failed_before = calls.iter().filter(|c| !c.ok && c.started < killed).count();
    let started_after: Vec<&Call> = calls.iter().filter(|c| c.started >= killed).collect();
    let failed_after = started_after.iter().filter(|c| !c.ok).count();
    let rate = |from: Instant, to: Instant| {
        let done = calls
            .iter()
            .filter(|c| c.ok && c.ended >= from && c.ended < to)
            .count();
        done as f64 / (to - from).as_secs_f64()
    };
    let before = rate(killed - Duration::from_secs(5), killed);
    let after = rate(after_from, after_from + Duration::from_secs(5));
    // nginx: requests that started after the kill and tried the dead one.
    let kill_at = epoch(wall);
    let tried: Vec<(f64, String)> = deployment
        .nginx
        .as_ref()
        .map(|n| n.access_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, ' ');
            let end: f64 = fields.next()?.parse().ok()?;
            let took: f64 = fields.next()?.parse().ok()?;
            let status = fields.next()?.to_owned();
            let upstreams = fields.next()?;
            let start = end - took - kill_at;
            (start >= 0.0 && upstreams.contains(&addr)).then_some((start, status))
        })
        .collect();
    let passed_on = tried.iter().filter(|(_, s)| s == "200").count();

    println!(
        "failover: {} instances behind nginx, {clients} clients; kill -9 of one (pid {pid}), its last heartbeat {heartbeat_age:.1} s before",
        deployment.instances.len()
    );
    let secs = |d: Option<Duration>| {
        d.map_or("never (60 s)".to_owned(), |d| {
            format!("{:.1} s", d.as_secs_f64())
        })
    };
    println!(
        "  its runs on record as running: {on_record}; read `interrupted` through the balancer {} (first) to {} (last) after the kill{}",
        secs(first),
        secs(last),
        if other.is_empty() {
            String::new()
        } else {
            format!("; otherwise: {other:?}")
        }
    );
    if errors > 0 {
        println!("  reads of them that failed while polling: {errors}");
    }
    println!(
        "  client calls failed: {failed_before} of those in flight at the kill; {failed_after} of the {} started after it",
        started_after.len()
    );
    println!(
        "  nginx: {} requests started after the kill tried it ({passed_on} answered by the next instance){}",
        tried.len(),
        tried.last().map_or(String::new(), |(at, _)| format!(
            ", the last {at:.2} s after"
        ))
    );
    println!(
        "  runs/s: {before:.1} in the 5 s before the kill, {after:.1} in 5 s once its runs read interrupted"
    );
}
