//! What every agent's `main` does right after [`crate::lock_down`]: answer `--self-test`, and
//! read the `--fd N` the broker started it with.

use nish_proto::wire::LockdownReport;

use crate::attempts;

/// With `--self-test` among the arguments: prints the lock-down in force and the outcome of
/// real attempts at what it forbids and allows (one JSON line), and returns true; the agent
/// then exits. Agents cannot write files, so the output must be a pipe.
pub fn self_test_if_asked(report: &LockdownReport) -> bool {
    if !std::env::args().any(|a| a == "--self-test") {
        return false;
    }
    let args: Vec<String> = std::env::args().collect();
    let probes = attempts::Probes::from_args(&args);
    let line = attempts::report_json(
        report,
        &attempts::forbidden(&probes),
        &attempts::allowed(&probes),
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{line}\n").as_bytes());
    true
}

/// The descriptor of `--fd N` or `--fd=N`.
pub fn fd_arg(args: &[String]) -> Option<i32> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--fd" {
            return it.next()?.parse().ok();
        }
        if let Some(v) = a.strip_prefix("--fd=") {
            return v.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::fd_arg;

    #[test]
    fn fd_argument() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(fd_arg(&a(&["agent", "--fd", "3"])), Some(3));
        assert_eq!(fd_arg(&a(&["agent", "--fd=7"])), Some(7));
        assert_eq!(fd_arg(&a(&["agent"])), None);
        assert_eq!(fd_arg(&a(&["agent", "--fd", "x"])), None);
    }
}

/// Standard error that never fails: a locked-down agent cannot write files (RLIMIT_FSIZE 0), so
/// when its standard error is a regular file every write fails with EFBIG; the log is then lost
/// but the agent goes on (a failing writer would make the log library panic). The broker gives
/// its agents a pipe, which works.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSink;

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Prints one line on standard error, ignoring failures.
pub fn say(line: &str) {
    let _ = std::io::Write::write_all(&mut LogSink, format!("{line}\n").as_bytes());
}
