//! A stand-in for a compromised or replaced reader binary, for the broker's tests.
//!
//! Plain: it adopts the broker's socket, says hello as the reader and reports a complete
//! lock-down without locking anything down; the broker must believe the kernel
//! (`/proc/<pid>/status`), not this report (reader-agent/tests/forged_lockdown.rs).
//!
//! `--locked --twice`: it locks down for real (so the kernel's view passes), then breaks the
//! protocol with a second lock-down report; the broker must cut it off and audit it
//! (testd/tests/hostile.rs).
//!
//! `--locked --as input` (or `indicator`, `reader`): a locked-down stand-in of that agent that
//! says its hello and lock-down and then answers nothing, for the broker's supervision tests
//! (broker/tests/supervise.rs).

use nish_proto::wire::codec::write_frame;
use nish_proto::wire::indicator::IndicatorToBroker;
use nish_proto::wire::input::InputToBroker;
use nish_proto::wire::reader::ReaderToBroker;
use nish_proto::wire::{AGENT_FD, Hello, LockdownReport, MAX_FRAME_BYTES, Role};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let locked = args.iter().any(|a| a == "--locked");
    let twice = args.iter().any(|a| a == "--twice");
    let role = match args
        .iter()
        .position(|a| a == "--as")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        Some("input") => Role::Input,
        Some("indicator") => Role::Indicator,
        _ => Role::Reader,
    };
    let mut sock = nish_sandbox::sys::adopt_unix_stream(AGENT_FD)?;
    let report = if locked {
        nish_sandbox::lock_down(&nish_sandbox::Profile { name: "reader" })
    } else {
        LockdownReport {
            no_new_privs: true,
            caps_empty: true,
            seccomp: true,
            landlock: "full".into(),
            detail: String::new(),
        }
    };
    write_frame(&mut sock, &Hello::new(role), MAX_FRAME_BYTES).map_err(std::io::Error::other)?;
    let send = |sock: &mut std::os::unix::net::UnixStream| match role {
        Role::Input => write_frame(
            sock,
            &InputToBroker::Lockdown(report.clone()),
            MAX_FRAME_BYTES,
        ),
        Role::Indicator => write_frame(
            sock,
            &IndicatorToBroker::Lockdown(report.clone()),
            MAX_FRAME_BYTES,
        ),
        _ => write_frame(
            sock,
            &ReaderToBroker::Lockdown(report.clone()),
            MAX_FRAME_BYTES,
        ),
    };
    send(&mut sock).map_err(std::io::Error::other)?;
    if twice {
        send(&mut sock).map_err(std::io::Error::other)?;
    }
    // Wait for the broker's verdict (it kills this process or closes the socket).
    std::thread::sleep(std::time::Duration::from_secs(30));
    Ok(())
}
