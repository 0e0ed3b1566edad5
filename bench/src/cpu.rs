//! CPU time a row costs: the harness process (its callers and, for the
//! in-process targets, the engine's own threads) plus the target's server
//! processes, divided by the row's calls.
//!
//! Throughput on a 2-core machine is often a matter of CPU, not of the
//! disk: a durable call that costs 100 µs of CPU in all caps the machine
//! near 20,000 calls per second whatever group commit does. Reporting the
//! CPU per call beside the throughput says which system does more work for
//! the same call, also when the disk or the load changes the throughput.
//!
//! The harness's own time comes from `CLOCK_PROCESS_CPUTIME_ID` (every
//! thread, nanoseconds). A server's comes from `/proc`: the user and system
//! time of its main process, of the children it has reaped (PostgreSQL's
//! backends of closed connections) and of its live children (its backends
//! and background workers), in clock ticks (10 ms on Linux), which a row of
//! a second or more of CPU resolves to about 1%.

use std::time::Duration;

/// CPU time consumed so far by this process and by the server process
/// tree rooted at `server` (if any). `None` off Linux or when `/proc`
/// cannot be read.
pub(crate) fn consumed(server: Option<u32>) -> Option<Duration> {
    let own = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let own = Duration::new(
        u64::try_from(own.tv_sec).ok()?,
        u32::try_from(own.tv_nsec).ok()?,
    );
    match server {
        None => Some(own),
        Some(pid) => Some(own + tree(pid)?),
    }
}

/// CPU per call, µs, between two [`consumed`] readings.
pub(crate) fn per_call_us(
    before: Option<Duration>,
    after: Option<Duration>,
    calls: u64,
) -> Option<f64> {
    let spent = after?.checked_sub(before?)?;
    (calls > 0).then(|| spent.as_secs_f64() * 1e6 / calls as f64)
}

/// The user and system time of `root`, of the children it reaped and of its
/// live children.
fn tree(root: u32) -> Option<Duration> {
    let (main, _) = stat(root)?;
    let mut ticks = main.own + main.reaped;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if let Some((child, parent)) = stat(pid)
            && parent == root
        {
            ticks += child.own;
        }
    }
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Some(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000) / hz,
    ))
}

/// A process's times in clock ticks.
struct Ticks {
    /// utime + stime.
    own: u64,
    /// cutime + cstime: children it has waited for.
    reaped: u64,
}

/// `/proc/PID/stat`: the process's ticks and its parent's pid.
fn stat(pid: u32) -> Option<(Ticks, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The fields after the command name (which may hold spaces and parentheses,
/// so the last `)` ends it): state, ppid, …, utime (14th field of the whole
/// line), stime, cutime, cstime.
fn parse_stat(text: &str) -> Option<(Ticks, u32)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is the 3rd field of the line (state).
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let parent = u32::try_from(field(4)?).ok()?;
    let ticks = Ticks {
        own: field(14)? + field(15)?,
        reaped: field(16)? + field(17)?,
    };
    Some((ticks, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = "4242 (postgres: a (b) c) S 4000 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 12 3 20 0 1 0 123 456789 100 18446744073709551615";
        let (ticks, parent) = parse_stat(line).unwrap();
        assert_eq!(parent, 4000);
        assert_eq!(ticks.own, 325);
        assert_eq!(ticks.reaped, 15);
        assert!(parse_stat("12 (cut short) S 1").is_none());
    }

    #[test]
    fn this_process_has_cpu_time_alone_and_as_a_tree_root() {
        let before = consumed(None).unwrap();
        // Spin until the clock moves (at least one tick of work).
        let mut x = 0u64;
        while consumed(None).unwrap() == before {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(consumed(None).unwrap() > before);
        // This process as a "server": its own ticks count.
        assert!(tree(std::process::id()).is_some());
        assert_eq!(
            per_call_us(Some(before), Some(before + Duration::from_millis(3)), 1000),
            Some(3.0)
        );
        assert_eq!(per_call_us(Some(before), None, 1000), None);
        assert_eq!(per_call_us(Some(before), Some(before), 0), None);
    }
}
