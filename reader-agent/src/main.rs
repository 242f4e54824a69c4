//! `nish-reader`: the read-only reader agent. The broker starts it as `nish-reader --fd 3`
//! with its end of a socketpair on descriptor 3; see the library documentation. The start-up
//! (lock-down first, `--self-test`, the descriptor) is the agents' shared one,
//! `nish_atspi::agent::run` over `nish_sandbox::start::start`.

use std::process::ExitCode;

use nish_atspi::agent::{Agent, Runtime};
use nish_proto::wire::Role;
use nish_proto::wire::reader::ReaderToBroker;

fn main() -> ExitCode {
    nish_atspi::agent::run(
        &Agent {
            profile: "reader",
            binary: "nish-reader",
            role: Role::Reader,
            stopped: "reader",
            // Walks of different applications run in parallel.
            runtime: Runtime::MultiThread(2),
        },
        ReaderToBroker::Lockdown,
        nish_reader::server::serve,
    )
}
