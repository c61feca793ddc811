//! The CPU time the calling thread has used: what a plugin call's
//! `cpu_time` is counted in (`own_time`), read around each poll of the
//! call. A thread's own clock counts only the time it ran, so a busy or
//! slow machine does not shrink a budget, and other threads' work is never
//! charged to the plugin. One read is one system call (see
//! docs/plugins.md for what it costs a call).

use std::time::Duration;

/// The calling thread's CPU time so far (user and system), from an
/// arbitrary origin: only differences mean anything.
#[cfg(unix)]
pub fn now() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the struct it is given.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    if status != 0 {
        return busy::now();
    }
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}

/// The calling thread's CPU time so far (kernel and user), from an
/// arbitrary origin: only differences mean anything.
#[cfg(windows)]
pub fn now() -> Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentThread, GetThreadTimes};
    let zero = || FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero(), zero(), zero(), zero());
    // SAFETY: GetCurrentThread is a pseudo-handle valid on this thread;
    // GetThreadTimes writes four FILETIMEs into the structs it is given.
    let ok = unsafe {
        GetThreadTimes(
            GetCurrentThread(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    if ok == 0 {
        return busy::now();
    }
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    // FILETIME counts 100 ns ticks.
    Duration::from_nanos((ticks(kernel) + ticks(user)).saturating_mul(100))
}

#[cfg(not(any(unix, windows)))]
pub fn now() -> Duration {
    busy::now()
}

/// Where no thread clock can be read: wall-clock time, which counts the
/// time spent in a poll, so the budget is the time the plugin held a
/// thread (a loaded machine shortens it).
mod busy {
    use std::sync::LazyLock;
    use std::time::{Duration, Instant};

    static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

    #[allow(dead_code)]
    pub fn now() -> Duration {
        ORIGIN.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_works_sees_its_clock_move_and_one_that_sleeps_does_not() {
        // However loaded the machine, a spinning thread's clock moves.
        let start = now();
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        let mut x: u64 = 1;
        while now() - start < Duration::from_millis(20) && std::time::Instant::now() < give_up {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(now() - start >= Duration::from_millis(20));
        let before = now();
        std::thread::sleep(Duration::from_millis(100));
        let slept = now() - before;
        assert!(slept < Duration::from_millis(20), "{slept:?}");
    }
}
