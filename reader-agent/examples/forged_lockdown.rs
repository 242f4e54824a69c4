//! A stand-in for a compromised or replaced reader binary: it adopts the broker's socket, says
//! hello as the reader and reports a complete lock-down without locking anything down. The
//! broker must believe the kernel (`/proc/<pid>/status`), not this report
//! (reader-agent/tests/forged_lockdown.rs).

use nish_proto::wire::codec::write_frame;
use nish_proto::wire::reader::ReaderToBroker;
use nish_proto::wire::{AGENT_FD, Hello, LockdownReport, MAX_FRAME_BYTES, Role};

fn main() -> std::io::Result<()> {
    let mut sock = nish_reader::sys::adopt_socket(AGENT_FD)?;
    write_frame(&mut sock, &Hello::new(Role::Reader), MAX_FRAME_BYTES)
        .map_err(std::io::Error::other)?;
    let forged = ReaderToBroker::Lockdown(LockdownReport {
        no_new_privs: true,
        caps_empty: true,
        seccomp: true,
        landlock: "full".into(),
        detail: String::new(),
    });
    write_frame(&mut sock, &forged, MAX_FRAME_BYTES).map_err(std::io::Error::other)?;
    // Wait for the broker's verdict (it kills this process or closes the socket).
    std::thread::sleep(std::time::Duration::from_secs(30));
    Ok(())
}
