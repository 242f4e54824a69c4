//! A reader binary that reports a complete lock-down without having one (a compromised or
//! replaced agent) is refused: the broker reads the lock-down from `/proc/<pid>/status`, and the
//! process is killed. The real reader, started the same way, is accepted with the kernel's view
//! in its report.

use std::path::PathBuf;
use std::sync::Arc;

use nish_agenthost::agents::{Agent, Hooks};
use nish_agenthost::handover::{Endpoints, Opener};
use nish_proto::wire::Role;
use nish_proto::wire::reader::{BrokerToReader, ReaderToBroker};

/// target/debug, from this test's own path (target/debug/deps/forged_lockdown-...).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf()
}

/// No violation is looked at; nothing is opened for the agent.
fn hooks() -> Hooks {
    Hooks {
        on_violation: Arc::new(|_| {}),
        opener: Arc::new(Opener::new(Endpoints::from_env())),
    }
}

#[tokio::test]
async fn a_forged_lockdown_report_is_refused_and_the_real_one_accepted() {
    let target = target_dir();
    let forged = target.join("examples").join("forged_lockdown");
    assert!(
        forged.exists(),
        "build the example first: {}",
        forged.display()
    );
    let r = Agent::<BrokerToReader, ReaderToBroker>::spawn_at(
        "nish-reader",
        &forged,
        Role::Reader,
        false,
        hooks(),
    )
    .await;
    let Err(err) = r else {
        panic!("a forged lock-down must be refused");
    };
    assert_eq!(err.error.code.as_str(), "backend_unavailable", "{err:?}");
    assert!(
        err.error
            .message
            .contains("the kernel shows no no_new_privs, seccomp"),
        "{}",
        err.error.message
    );
    // The supervisor audits it as refused at its start.
    assert_eq!(err.refused, Some("not_locked_down"), "{err:?}");
    assert!(err.pid > 0, "{err:?}");

    // The real reader: accepted, and its report is the kernel's.
    let (agent, _events) = Agent::<BrokerToReader, ReaderToBroker>::spawn_at(
        "nish-reader",
        &target.join("nish-reader"),
        Role::Reader,
        false,
        hooks(),
    )
    .await
    .expect("the real reader locks down");
    assert!(agent.lockdown.no_new_privs && agent.lockdown.seccomp && agent.lockdown.caps_empty);
    drop(agent);
}
