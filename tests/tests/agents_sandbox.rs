//! Each agent binary, as the broker starts it, cannot open a network socket, create or write a
//! file, exec, trace or signal another process, or reach the kernel's larger surfaces
//! (perf_event_open, user namespaces, keyrings, BPF, userfaultfd): `<agent> --self-test` locks
//! down exactly as in service and tries each of these for real; every one must be refused,
//! while Unix socket pairs and reads of its own /proc entry still work.
//!
//! Every agent (the reader, the input agent and the indicator), whose connections the broker
//! hands in, must also fail to connect anywhere by itself (the session bus socket, X by path and
//! by abstract name, a socket standing for the broker's) and to read a file in `$HOME/.ssh/`,
//! while connections handed to it (X, the session bus) still answer. The paths are handed to the
//! test, not to the agent: the agent runs with none of them in its environment. The reader also
//! gets a bus link through the broker's filter, as in service: a read through it is answered,
//! an action and a setter are refused by the filter. A peer-to-peer link to a real app, sent
//! to the reader and the input agent only once they run locked down (as the broker's links
//! arrive in service), still serves reads, and through their filters refuses acts.

use std::os::fd::AsRawFd as _;
use std::os::unix::net::{UnixListener, UnixStream};

use nish_testdesk::Desktop;
use nish_testdesk::session::workspace_bin;
use serde_json::Value;

/// nish_sandbox::attempts::OUTSIDE_ALLOW_LIST.
const OUTSIDE_ALLOW_LIST: &str = "personality(query): a call outside the allow-list";

fn self_test(agent: &str, args: &[String], home: Option<&std::path::Path>) -> Value {
    self_test_and_log(agent, args, home).0
}

/// The self-test's report and its standard error (the refused-system-call lines).
fn self_test_and_log(
    agent: &str,
    args: &[String],
    home: Option<&std::path::Path>,
) -> (Value, String) {
    let bin = workspace_bin(agent).expect("the agent is built");
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("--self-test").args(args).env_clear();
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{agent} --self-test failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).expect("one JSON line"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn refused(agent: &str, v: &Value) -> Vec<String> {
    let forbidden = v["forbidden"].as_array().unwrap();
    for a in forbidden {
        let errno = a["errno"].as_i64();
        assert!(
            errno == Some(13) || errno == Some(1),
            "{agent}: {} was not refused (errno {errno:?})",
            a["what"]
        );
    }
    forbidden
        .iter()
        .map(|a| a["what"].as_str().unwrap().to_string())
        .collect()
}

fn all_work(agent: &str, v: &Value) -> Vec<String> {
    let allowed = v["allowed"].as_array().unwrap();
    for a in allowed {
        assert!(
            a["errno"].is_null(),
            "{agent}: {} should still work (errno {})",
            a["what"],
            a["errno"]
        );
    }
    allowed
        .iter()
        .map(|a| a["what"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn agents_refuse_network_files_exec_and_the_kernels_surfaces() {
    // The self-test runs in this test's process group (the broker starts agents in a group of
    // their own): signalling the group reaches this process unless the filter refuses it.
    let reference = nix::sys::signal::killpg(nix::unistd::getpgrp(), None);
    assert!(reference.is_ok(), "this test can signal its own group");
    for agent in ["nish-reader", "nish-input", "nish-indicator"] {
        let (v, log) = self_test_and_log(agent, &[], None);
        let l = &v["lockdown"];
        assert_eq!(l["no_new_privs"], true, "{agent}");
        assert_eq!(l["caps_empty"], true, "{agent}");
        assert_eq!(l["seccomp"], true, "{agent}");
        assert_eq!(l["landlock"], "full", "{agent} (this kernel has Landlock)");
        let what = refused(agent, &v);
        assert!(what.len() >= 20);
        for must in [
            "socket(AF_INET, SOCK_STREAM)",
            "socket(AF_INET6, SOCK_STREAM)",
            "create a file in the temporary directory",
            "exec /bin/true",
            "ptrace(PTRACE_ATTACH) the parent process",
            "kill(parent, 0): signal another process",
            "kill(0, 0): signal the process group",
            "kill(-(the parent's process group), 0)",
            "tkill(parent, 0)",
            "tgkill(parent, parent, 0)",
            "fcntl(F_SETOWN, parent): aim a socket's SIGIO at another process",
            "perf_event_open",
            "unshare(CLONE_NEWUSER)",
            "keyctl(KEYCTL_GET_KEYRING_ID)",
            "bpf(BPF_PROG_LOAD)",
            "userfaultfd",
            OUTSIDE_ALLOW_LIST,
            "prlimit64(parent): another process's resource limits",
        ] {
            assert!(
                what.iter().any(|w| w == must),
                "{agent}: {must} was not tried"
            );
        }
        // `personality` is refused only by the agent's allow-list (it traps to the SIGSYS
        // handler, which logs the call's number and makes it fail with EPERM; unconfined the
        // query works: nish-sandbox's attempts unit test).
        let a = v["forbidden"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["what"] == OUTSIDE_ALLOW_LIST)
            .unwrap();
        assert_eq!(a["errno"], 1, "{agent}: {a}");
        let line = format!(
            "nish-sandbox: refused system call {}",
            nix::libc::SYS_personality
        );
        assert!(
            log.lines().any(|l| l == line),
            "{agent}: no {line:?} on standard error: {log}"
        );
        // So do the attempts the other filters refuse too (ptrace: trapped before them).
        let ptrace = format!(
            "nish-sandbox: refused system call {}",
            nix::libc::SYS_ptrace
        );
        assert!(log.lines().any(|l| l == ptrace), "{agent}: {log}");
        // An x32 system call (x86_64 only) is in no allow-list: refused and logged, also for
        // `kill`, whose x86_64 number the surface filter checks by its arguments.
        #[cfg(target_arch = "x86_64")]
        {
            assert!(
                what.iter().any(|w| w == "x32 kill(parent, 0)"),
                "{agent}: the x32 call was not tried"
            );
            let x32 = format!(
                "nish-sandbox: refused system call {}",
                0x4000_0000 | nix::libc::SYS_kill
            );
            assert!(log.lines().any(|l| l == x32), "{agent}: {log}");
        }
        let works = all_work(agent, &v);
        for must in [
            "kill(self, 0)",
            "tgkill(self, this thread, 0)",
            "fcntl(F_SETOWN, self)",
            "prlimit64(self)",
        ] {
            assert!(
                works.iter().any(|w| w == must),
                "{agent}: {must} was not tried"
            );
        }
    }
}

/// Clears close-on-exec so the self-test inherits the descriptor under the same number.
fn inheritable(s: &UnixStream) -> String {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(s, FcntlArg::F_SETFD(FdFlag::empty())).expect("clear cloexec");
    s.as_raw_fd().to_string()
}

#[test]
fn agents_connect_nowhere_read_no_secrets_and_use_what_is_handed_in() {
    let desk = Desktop::builder()
        .atspi(false)
        .window_manager(false)
        .start()
        .expect("a desktop");
    let bus = desk
        .session_bus_address()
        .strip_prefix("unix:path=")
        .and_then(|a| a.split(',').next())
        .expect("a session bus socket path")
        .to_string();
    let x = format!("/tmp/.X11-unix/X{}", desk.display_number());
    let dir = desk.dir().join("self-test");
    let ssh = dir.join("home/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let secret = ssh.join("id_test");
    std::fs::write(&secret, "not a real key").unwrap();
    // A listening socket standing for the broker's, by path and by abstract name.
    let broker = dir.join("broker.sock");
    let _listen = UnixListener::bind(&broker).unwrap();
    let abstract_name = format!("nish-self-test-broker-{}", std::process::id());
    let _listen_abstract = {
        use std::os::linux::net::SocketAddrExt as _;
        let a =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        UnixListener::bind_addr(&a).unwrap()
    };
    // The reference: without the lock-down each of these works from here.
    UnixStream::connect(&bus).expect("the session bus accepts this test");
    UnixStream::connect(&x).expect("X accepts this test");
    std::fs::read(&secret).expect("the test reads the file");

    // The reader's and the input agent's links go through the broker's filter: one such link
    // for each one's probe.
    let rt = tokio::runtime::Runtime::new().expect("a runtime for the filter");
    for agent in ["nish-reader", "nish-input", "nish-indicator"] {
        let handed_x = UnixStream::connect(&x).unwrap();
        let handed_bus = UnixStream::connect(&bus).unwrap();
        // The input agent's, with no act granted: its actions and setters are refused too.
        let policy = match agent {
            "nish-reader" => Some(nish_agenthost::busfilter::Policy::Reader),
            "nish-input" => Some(nish_agenthost::busfilter::Policy::Input {
                link: nish_agenthost::busfilter::Link::Bus,
                grants: nish_agenthost::busfilter::Grants::new(),
            }),
            _ => None,
        };
        let filtered_bus: Option<UnixStream> = policy.map(|policy| {
            let _in_rt = rt.enter();
            let real = UnixStream::connect(&bus).unwrap();
            UnixStream::from(
                nish_agenthost::busfilter::filtered_with(real.into(), policy).expect("the filter"),
            )
        });
        let mut args: Vec<String> = [
            "--probe-connect",
            &bus,
            "--probe-connect",
            &x,
            "--probe-connect",
            broker.to_str().unwrap(),
            // Xvfb listens on the abstract name too.
            "--probe-abstract",
            x.as_str(),
            "--probe-abstract",
            &abstract_name,
            "--probe-read",
            secret.to_str().unwrap(),
            "--handed-x",
            &inheritable(&handed_x),
            "--handed-dbus",
            &inheritable(&handed_bus),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(f) = &filtered_bus {
            args.extend(["--filtered-dbus".to_string(), inheritable(f)]);
        }
        let v = self_test(agent, &args, Some(&dir.join("home")));
        let what = refused(agent, &v);
        if filtered_bus.is_some() {
            // Refused by the filter's answer (AccessDenied, errno 13 in the report), not by
            // the bus daemon, which would answer with an error of its own.
            for must in [
                "DoAction through the filtered D-Bus connection",
                "SetTextContents through the filtered D-Bus connection",
            ] {
                let a = v["forbidden"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["what"] == must)
                    .unwrap_or_else(|| panic!("{agent}: {must} was not tried"));
                assert_eq!(a["errno"], 13, "{agent}: {must}: {a}");
            }
            assert!(
                all_work(agent, &v)
                    .iter()
                    .any(|w| w
                        == "a read (Peer.Ping) through the filtered D-Bus connection is answered"),
                "{agent}: the read through the filter was not tried"
            );
        }
        for must in [
            format!("connect to {bus}"),
            format!("connect to {x}"),
            format!("connect to {}", broker.display()),
            format!("connect to abstract {x}"),
            format!("connect to abstract {abstract_name}"),
            format!("read {}", secret.display()),
        ] {
            assert!(what.contains(&must), "{agent}: {must} was not tried");
        }
        let works = all_work(agent, &v);
        for must in [
            "the handed-in X connection answers",
            "the handed-in D-Bus connection answers",
        ] {
            assert!(
                works.iter().any(|w| w == must),
                "{agent}: {must} was not tried"
            );
        }
    }
}

/// The links the broker opens for an agent in service arrive after its lock-down, over its
/// broker socket: here a real peer-to-peer link to gtk3-widget-factory, opened by the broker's
/// own opener, is sent to `<agent> --self-test --link-later FD` once the agent runs. The agent
/// takes it after locking down and a read over it is answered. Each link goes through its
/// agent's filter, as in service (the input agent's with no act granted): an action and a
/// setter on it get the filter's refusal.
#[test]
fn a_peer_to_peer_link_handed_in_after_the_lock_down_works() {
    use nish_agenthost::handover::{Endpoints, Filter, Opener};
    use nish_proto::wire::{ConnectTarget, Handed};
    use nish_testdesk::App;

    let desk = Desktop::start().expect("a desktop");
    let app = desk.spawn(App::Gtk3WidgetFactory).expect("the app");
    desk.wait_atspi_app(app.pid, std::time::Duration::from_secs(45))
        .expect("the app on the registry");
    let rt = nish_testdesk::runtime().expect("a runtime");
    let opener = Opener::new(Endpoints::from_vars(
        desk.env().into_iter().map(|(k, v)| (k.into(), v.into())),
    ));
    let bus_name = rt.block_on(async {
        let (_, fd) = opener
            .open_maybe_filtered(&ConnectTarget::A11yBus, &|_| true, false)
            .await
            .expect("the bus");
        let s = std::os::unix::net::UnixStream::from(fd.unwrap());
        s.set_nonblocking(true).unwrap();
        let bus =
            zbus::connection::Builder::unix_stream(tokio::net::UnixStream::from_std(s).unwrap())
                .build()
                .await
                .unwrap();
        let names: Vec<String> = bus
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "ListNames",
                &(),
            )
            .await
            .unwrap()
            .body()
            .deserialize()
            .unwrap();
        for n in names.into_iter().filter(|n| n.starts_with(':')) {
            let pid: Option<u32> = bus
                .call_method(
                    Some("org.freedesktop.DBus"),
                    "/org/freedesktop/DBus",
                    Some("org.freedesktop.DBus"),
                    "GetConnectionUnixProcessID",
                    &(n.as_str(),),
                )
                .await
                .ok()
                .and_then(|m| m.body().deserialize().ok());
            if pid == Some(app.pid) {
                return n;
            }
        }
        panic!("the app has no name on the accessibility bus");
    });
    for agent in ["nish-reader", "nish-input"] {
        // Each agent's own filter, as the broker relays its links (the input agent's with no
        // act granted).
        let filter = match agent {
            "nish-reader" => Filter::Reader,
            _ => Filter::Input(nish_agenthost::busfilter::Grants::new()),
        };
        let (handed, link) = rt
            .block_on(opener.open_filtered(
                &ConnectTarget::App {
                    bus_name: bus_name.clone(),
                },
                &|pid| pid == app.pid,
                &filter,
            ))
            .expect("a link to the app");
        assert_eq!(handed, Handed::App, "gtk3-widget-factory offers a link");
        let (ours, theirs) = UnixStream::pair().unwrap();
        // Queued now, taken by the agent only once it runs locked down.
        nish_agenthost::handover::send_with_fd(&ours, &[0], link.as_ref()).expect("sent");
        drop(link);
        let args = vec!["--link-later".to_string(), inheritable(&theirs)];
        let v = self_test(agent, &args, None);
        let works = all_work(agent, &v);
        assert!(
            works.iter().any(|w| w
                == "a read (Peer.Ping) on the peer-to-peer link handed in after the lock-down is answered"),
            "{agent}: the read on the later link was not tried"
        );
        for member in ["DoAction", "SetTextContents"] {
            let want = format!("{member} on the peer-to-peer link handed in after the lock-down");
            let a = v["forbidden"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["what"] == want.as_str())
                .unwrap_or_else(|| panic!("{agent}: {want} was not tried"));
            assert_eq!(a["errno"], 13, "{agent}: {want}: {a}");
        }
    }
}

/// The reader and the input agent start alike (`nish_atspi::agent::run`): `--version` answers
/// on standard output; without `--fd N`, or with a descriptor that is a standard stream or not
/// a socket, they stop with status 2 and serve nothing; with a socket they send their hello on
/// it, and stop with status 0 once the other end closes it.
#[test]
fn the_agents_start_up_checks_their_descriptor_and_serves_the_socket_it_names() {
    use nish_proto::wire::{Hello, MAX_FRAME_BYTES, Role, codec};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    for (agent, role) in [("nish-reader", Role::Reader), ("nish-input", Role::Input)] {
        let bin = workspace_bin(agent).expect("the agent is built");
        let run = |args: &[&str]| {
            Command::new(&bin)
                .args(args)
                .env_clear()
                .stdin(Stdio::null())
                .output()
                .expect("runs")
        };

        let out = run(&["--version"]);
        assert!(out.status.success(), "{agent} --version");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{agent} {}\n", nish_proto::DRIVER_VERSION)
        );

        let out = run(&[]);
        assert_eq!(out.status.code(), Some(2), "{agent} without --fd");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("usage: {agent} --fd <N>")),
            "{agent}: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        // Standard input, and a pipe: neither is adopted as the broker's socket.
        let out = run(&["--fd", "0"]);
        assert_eq!(out.status.code(), Some(2), "{agent} --fd 0");
        assert!(out.stdout.is_empty(), "{agent} --fd 0 wrote on stdout");
        let (pipe_r, _pipe_w) = nix::unistd::pipe().expect("a pipe");
        nix::fcntl::fcntl(
            &pipe_r,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .expect("clear cloexec");
        let n = pipe_r.as_raw_fd().to_string();
        let out = run(&["--fd", &n]);
        assert_eq!(out.status.code(), Some(2), "{agent} --fd <a pipe>");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not a socket"),
            "{agent}: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        // A socket: the hello comes on it, and closing it ends the agent cleanly.
        let (mut ours, theirs) = UnixStream::pair().expect("a socketpair");
        let fd = inheritable(&theirs);
        let mut child = Command::new(&bin)
            .args(["--fd", &fd])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts");
        drop(theirs);
        ours.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let hello: Hello = codec::read_frame(&mut ours, MAX_FRAME_BYTES).expect("a hello");
        assert_eq!(hello.role, role, "{agent}");
        // The lock-down report follows; the agent then waits for requests.
        codec::read_body(&mut ours, MAX_FRAME_BYTES).expect("the lock-down report");
        drop(ours);
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().expect("waits") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{agent} did not stop once its socket was closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut log = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut log);
        }
        assert_eq!(status.code(), Some(0), "{agent}: {status}: {log}");
    }
}
