use super::*;

/// The relay itself, with a fake bus on the other end: the refused call never reaches it,
/// the agent gets the filter's error, and what passes arrives whole and in order.
#[tokio::test]
async fn the_relay_keeps_a_refused_act_from_the_app() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let g = Grants::new();
    let (mut agent, mut bus, _) = relayed(Policy::Input {
        link: Link::Bus,
        grants: g.clone(),
    });
    let _guard = g.grant(grant(ActMethod::DoAction, EL));
    let auth = [AUTH_LINE, b"BEGIN\r\n"].concat();
    let outside = call_with(
        Some(APP),
        "/org/a11y/atspi/accessible/99",
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    let read = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Accessible",
        "GetRole",
        "",
        &[],
    );
    let inside = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    agent
        .write_all(&[auth.clone(), outside.clone(), read.clone(), inside.clone()].concat())
        .await
        .unwrap();
    bus_says_ok(&mut bus).await;
    let want = [b"BEGIN\r\n".to_vec(), read, inside].concat();
    assert_eq!(
        read_n(&mut bus, want.len()).await,
        want,
        "the bus got the read and the granted act, and nothing else"
    );
    let line = read_n(&mut agent, OK_LINE.len()).await;
    assert_eq!(&line, OK_LINE, "the bus's OK comes first");
    let mut e = read_n(&mut agent, 16).await;
    let len = message_len(&e).unwrap().unwrap();
    e.extend(read_n(&mut agent, len - 16).await);
    let h = parse_header(&e).unwrap();
    assert_eq!(h.msg_type, ERROR);
    let mut extra = [0u8; 1];
    let more =
        tokio::time::timeout(std::time::Duration::from_millis(200), bus.read(&mut extra)).await;
    assert!(more.is_err(), "nothing more reached the bus");
}

/// A relay under `policy` between a fake agent and a fake bus: the agent's end, the bus's
/// end and the relay's task.
fn relayed(policy: Policy) -> (UnixStream, UnixStream, tokio::task::JoinHandle<()>) {
    let (agent_ours, agent) = UnixStream::pair().unwrap();
    let (bus_ours, bus) = UnixStream::pair().unwrap();
    (
        agent,
        bus,
        tokio::spawn(relay(agent_ours, bus_ours, policy)),
    )
}

/// The reader's policy and the input agent's (granting nothing).
fn both_policies() -> [Policy; 2] {
    [
        Policy::Reader,
        Policy::Input {
            link: Link::Bus,
            grants: Grants::new(),
        },
    ]
}

/// Reads `n` bytes (failing after 5 s).
async fn read_n(s: &mut UnixStream, n: usize) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut got = vec![0u8; n];
    tokio::time::timeout(std::time::Duration::from_secs(5), s.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    got
}

/// The fake bus reads the agent's `AUTH` line.
async fn bus_reads_auth(bus: &mut UnixStream) {
    assert_eq!(read_n(bus, AUTH_LINE.len()).await, AUTH_LINE);
}

/// The fake bus reads the agent's `AUTH` line and answers `OK`.
async fn bus_says_ok(bus: &mut UnixStream) {
    use tokio::io::AsyncWriteExt as _;
    bus_reads_auth(bus).await;
    bus.write_all(OK_LINE).await.unwrap();
}

/// Reads what reaches the fake bus until the relay closes it (or 2 s pass).
async fn rest_of(bus: &mut UnixStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut all = Vec::new();
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(2), bus.read_to_end(&mut all)).await;
    all
}

/// A compromised agent cannot end the authentication on its side and not on the bus's:
/// a `BEGIN` the bus would not take (`BEGINX`, `BEGIN x`), a `BEGIN` before the bus said
/// `OK` to it (rejected credentials), a NUL byte anywhere but first, an unknown command,
/// each ends the link, and nothing after it reaches the bus; the messages that would ride
/// in a passing message's body as lines never reach a bus still authenticating.
#[tokio::test]
async fn the_authentication_cannot_be_desynchronised() {
    use tokio::io::AsyncWriteExt as _;
    let smuggled = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    let reply = {
        // A method return (always passed) whose body carries `\r\nBEGIN\r\n` and a call.
        let mut r = call_with(None, EL, "x.y", "Z", "", &[]);
        r[1] = METHOD_RETURN;
        r
    };
    for (what, lines, bus_answer) in [
        ("BEGINX", b"BEGINX\r\n".to_vec(), OK_LINE.to_vec()),
        (
            "BEGIN with a word",
            b"BEGIN x\r\n".to_vec(),
            OK_LINE.to_vec(),
        ),
        (
            "BEGIN after REJECTED",
            b"BEGIN\r\n".to_vec(),
            b"REJECTED EXTERNAL\r\n".to_vec(),
        ),
        (
            "an unknown command",
            b"STARTTLS\r\nBEGIN\r\n".to_vec(),
            OK_LINE.to_vec(),
        ),
        (
            "a NUL byte later",
            b"\0BEGIN\r\n".to_vec(),
            OK_LINE.to_vec(),
        ),
    ] {
        for policy in both_policies() {
            let (mut agent, mut bus, _) = relayed(policy);
            let _ = agent
                .write_all(
                    &[
                        AUTH_LINE.to_vec(),
                        lines.clone(),
                        reply.clone(),
                        b"\r\nBEGIN\r\n".to_vec(),
                        smuggled.clone(),
                    ]
                    .concat(),
                )
                .await;
            bus_reads_auth(&mut bus).await;
            let _ = bus.write_all(&bus_answer).await;
            let rest = rest_of(&mut bus).await;
            assert!(
                !rest.windows(8).any(|w| w == b"DoAction"),
                "{what}: the smuggled call reached the bus: {:?}",
                String::from_utf8_lossy(&rest)
            );
            assert!(
                !rest.windows(5).any(|w| w == b"BEGIN"),
                "{what}: a BEGIN reached the bus: {:?}",
                String::from_utf8_lossy(&rest)
            );
        }
    }
}

/// An agent's message longer than [`MAX_AGENT_MESSAGE`] ends the link before the relay holds
/// it (the relay would keep up to 64 MiB a link otherwise).
#[tokio::test]
async fn an_agents_huge_message_ends_the_link() {
    use tokio::io::AsyncWriteExt as _;
    let (mut agent, mut bus, relay) = relayed(Policy::Reader);
    agent.write_all(AUTH_LINE).await.unwrap();
    agent.write_all(b"BEGIN\r\n").await.unwrap();
    bus_says_ok(&mut bus).await;
    assert_eq!(read_n(&mut bus, 7).await, b"BEGIN\r\n");
    let mut big = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Text",
        "GetText",
        "ii",
        &[0; 8],
    );
    // Claim a 2 MiB body.
    big[4..8].copy_from_slice(&(2u32 << 20).to_le_bytes());
    let _ = agent.write_all(&big).await;
    tokio::time::timeout(std::time::Duration::from_secs(5), relay)
        .await
        .expect("the relay ended")
        .unwrap();
    assert!(rest_of(&mut bus).await.is_empty());
}

/// zbus sends its whole handshake and its first message in one write, before the bus has
/// answered: the filter's `ERROR` to `NEGOTIATE_UNIX_FD` still comes after the bus's `OK`,
/// and the `OK` line is not read as a message (a run once failed the handshake so).
#[tokio::test]
async fn a_pipelined_handshake_gets_its_answers_in_order() {
    use tokio::io::AsyncWriteExt as _;
    for policy in both_policies() {
        let (mut agent, mut bus, _) = relayed(policy);
        let read = call_with(
            Some(APP),
            EL,
            "org.a11y.atspi.Accessible",
            "GetRole",
            "",
            &[],
        );
        let lines = [AUTH_LINE, b"NEGOTIATE_UNIX_FD\r\nBEGIN\r\n"].concat();
        agent
            .write_all(&[lines, read.clone()].concat())
            .await
            .unwrap();
        // The bus answers late.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        bus_says_ok(&mut bus).await;
        let want = [b"BEGIN\r\n".to_vec(), read.clone()].concat();
        assert_eq!(
            read_n(&mut bus, want.len()).await,
            want,
            "the bus never sees NEGOTIATE_UNIX_FD"
        );
        let reply = call_with(None, EL, "x.y", "Z", "", &[]);
        bus.write_all(&reply).await.unwrap();
        let want = [OK_LINE.to_vec(), b"ERROR\r\n".to_vec(), reply].concat();
        let got = read_n(&mut agent, want.len()).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "OK, then the filter's ERROR, then the bus's message"
        );
    }
}

/// A method return of serial `serial` answering call `to` (little endian, no body).
fn reply(serial: u32, to: u32) -> Vec<u8> {
    let mut f = vec![5, 1, b'u', 0];
    f.extend_from_slice(&to.to_le_bytes());
    let mut m = vec![b'l', METHOD_RETURN, NO_REPLY_EXPECTED, 1];
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&serial.to_le_bytes());
    m.extend_from_slice(&(f.len() as u32).to_le_bytes());
    m.extend_from_slice(&f);
    m
}

/// An agent's reply passes only to a call the other side made to it on this link, and once:
/// on a peer-to-peer link no bus daemon checks that, and a forged reply would answer a call
/// the app made to someone else with what the agent chose.
#[tokio::test]
async fn a_reply_passes_only_to_a_call_made_to_the_agent_and_once() {
    use tokio::io::AsyncWriteExt as _;
    for policy in both_policies() {
        let (mut agent, mut bus, _) = relayed(policy);
        let read = call_with(
            Some(APP),
            EL,
            "org.a11y.atspi.Accessible",
            "GetRole",
            "",
            &[],
        );
        // A reply to a call nobody made, then a read: only the read goes.
        let auth = [AUTH_LINE, b"BEGIN\r\n"].concat();
        agent
            .write_all(&[auth, reply(5, 7), read.clone()].concat())
            .await
            .unwrap();
        bus_says_ok(&mut bus).await;
        let want = [b"BEGIN\r\n".to_vec(), read].concat();
        assert_eq!(read_n(&mut bus, want.len()).await, want);
        let _ = read_n(&mut agent, OK_LINE.len()).await;
        // The other side calls the agent (serial 9); its reply passes, a second one does not.
        let asked = call(9, "/", "org.freedesktop.DBus.Peer", "Ping", 0);
        bus.write_all(&asked).await.unwrap();
        assert_eq!(read_n(&mut agent, asked.len()).await, asked);
        agent
            .write_all(&[reply(6, 9), reply(7, 9), reply(8, 10)].concat())
            .await
            .unwrap();
        assert_eq!(read_n(&mut bus, reply(6, 9).len()).await, reply(6, 9));
        drop(agent);
        assert!(rest_of(&mut bus).await.is_empty(), "only the one reply");
    }
}
