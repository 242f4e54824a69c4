//! `nish-input`: the input agent. The broker starts it as `nish-input --fd 3` with its end of a
//! socketpair on descriptor 3; see the library documentation. The start-up (lock-down first,
//! `--self-test`, the descriptor) is the agents' shared one, `nish_atspi::agent::run` over `nish_sandbox::start::start`.

use std::process::ExitCode;

use nish_atspi::agent::{Agent, Runtime};
use nish_proto::wire::Role;
use nish_proto::wire::input::InputToBroker;

fn main() -> ExitCode {
    nish_atspi::agent::run(
        &Agent {
            profile: "input",
            binary: "nish-input",
            role: Role::Input,
            stopped: "input agent",
            // One thread: acts are served one at a time; blocking X11 calls go to the blocking
            // pool.
            runtime: Runtime::CurrentThread,
        },
        InputToBroker::Lockdown,
        nish_input::server::serve,
    )
}
