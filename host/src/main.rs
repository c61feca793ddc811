//! The `chorus` command: `serve` (the default) speaks MCP on stdio, `ask`
//! runs a pipeline from the terminal, `check` validates a configuration.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Process-wide allocator tuning belongs to the process, not to a
    // library call: set once, here, before anything allocates big.
    big_buffers_go_back_to_the_system();
    chorus::cli::main()
}

/// Responses make the process's largest buffers (an 8 MB body, the answer
/// assembled from a stream). glibc raises its mmap threshold after the first
/// big free, so later big buffers land in the heap, where freeing them does
/// not return the memory and growing them copies. A fixed threshold of
/// 1 MiB keeps them mmapped: growth is a remap, and a freed buffer goes
/// back to the system when the run ends (measured: `cargo bench --bench
/// memory`, which runs this binary).
fn big_buffers_go_back_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of the allocator;
    // M_MMAP_THRESHOLD with a value below its 32 MiB maximum is valid at
    // any time, before or after other allocations.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
