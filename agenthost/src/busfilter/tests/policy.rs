use super::*;
use nish_proto::atspi_calls::Senders;

#[test]
fn without_a_grant_the_input_agent_only_reads() {
    let g = Grants::new();
    let do_action = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    assert_eq!(verdict(&Link::Bus, &g, &do_action), Verdict::Refuse);
    for row in CALLS.iter().filter(|r| r.senders != Senders::GrantedInput) {
        let (iface, member, sig) = (row.interface, row.member, &row.signature);
        let m = call_with(Some(APP), EL, iface, member, sig, &args_of(sig));
        let want = |agent| {
            if row.senders.any_time(agent) {
                Verdict::Pass
            } else {
                Verdict::Refuse
            }
        };
        assert_eq!(
            verdict(&Link::Bus, &g, &m),
            want(Agent::Input),
            "{iface}.{member}"
        );
        let h = parse_header(&m).unwrap();
        assert_eq!(judge(&h, &m), want(Agent::Reader), "{iface}.{member}");
        // With fewer or other arguments, neither agent's read passes: Qt 5 reads a
        // `Properties.Get` with one string, or a `GetName` with none, past its arguments.
        for other in ["", "s", "i", "u", "ss", "ii", "sss", "v"] {
            if other == *sig {
                continue;
            }
            let m = call_with(Some(APP), EL, iface, member, other, &args_of(other));
            assert_eq!(
                verdict(&Link::Bus, &g, &m),
                Verdict::Refuse,
                "{iface}.{member}({other})"
            );
            let h = parse_header(&m).unwrap();
            assert_eq!(judge(&h, &m), Verdict::Refuse, "{iface}.{member}({other})");
        }
        // The right signature with a body that is not its values: short, long, a string
        // without its NUL or not UTF-8, padding that is not zero.
        if !sig.is_empty() {
            let good = args_of(sig);
            let mut bad = vec![
                good[..good.len() - 1].to_vec(),
                [&good[..], &[0; 4]].concat(),
            ];
            if sig.starts_with('s') {
                let mut no_nul = good.clone();
                no_nul[6] = b'!';
                bad.push(no_nul);
                let mut nul_inside = good.clone();
                nul_inside[4] = 0;
                bad.push(nul_inside);
                let mut not_utf8 = good.clone();
                not_utf8[4] = 0xff;
                bad.push(not_utf8);
            }
            if *sig == "ss" {
                let mut pad = good.clone();
                pad[7] = 1;
                bad.push(pad);
            }
            for body in bad {
                let m = call_with(Some(APP), EL, iface, member, sig, &body);
                assert_eq!(
                    verdict(&Link::Bus, &g, &m),
                    Verdict::Refuse,
                    "{iface}.{member}({sig}) {body:?}"
                );
                let h = parse_header(&m).unwrap();
                assert_eq!(judge(&h, &m), Verdict::Refuse, "{iface}.{member}({sig})");
            }
        }
    }
    // Not even under a grant, nor on a peer-to-peer link.
    let get_all = call_with(
        Some(APP),
        EL,
        "org.freedesktop.DBus.Properties",
        "GetAll",
        "s",
        &args_of("s"),
    );
    let _guard = g.grant(grant(ActMethod::DoAction, EL));
    assert_eq!(verdict(&Link::Bus, &g, &get_all), Verdict::Refuse);
    let p2p = Link::App {
        bus_name: APP.into(),
        pid: 4242,
    };
    assert_eq!(verdict(&p2p, &g, &get_all), Verdict::Refuse);
    // The reader may: its walk of GTK and Chromium reads each object with it.
    let h = parse_header(&get_all).unwrap();
    assert_eq!(judge(&h, &get_all), Verdict::Pass);
    for m in ActMethod::ALL {
        let (iface, member) = m.spec();
        let c = call_with(Some(APP), EL, iface, member, "", &[]);
        assert_eq!(
            verdict(&Link::Bus, &g, &c),
            Verdict::Refuse,
            "{iface}.{member}"
        );
    }
    let focus = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Component",
        "GrabFocus",
        "",
        &[],
    );
    assert_eq!(verdict(&Link::Bus, &g, &focus), Verdict::Refuse);
}

#[test]
fn a_grant_lets_exactly_its_one_call_through() {
    let g = Grants::new();
    let guard = g.grant(grant(ActMethod::DoAction, EL));
    let act = |dest: Option<&str>, path: &str, iface: &str, member: &str| {
        call_with(dest, path, iface, member, "i", &[0; 4])
    };
    let ok = act(Some(APP), EL, "org.a11y.atspi.Action", "DoAction");
    assert_eq!(verdict(&Link::Bus, &g, &ok), Verdict::Pass);
    for (what, m) in [
        (
            "another path",
            act(
                Some(APP),
                "/org/a11y/atspi/accessible/13",
                "org.a11y.atspi.Action",
                "DoAction",
            ),
        ),
        (
            "another app",
            act(Some(":1.8"), EL, "org.a11y.atspi.Action", "DoAction"),
        ),
        (
            "no destination on the bus",
            act(None, EL, "org.a11y.atspi.Action", "DoAction"),
        ),
        (
            "another method",
            act(
                Some(APP),
                EL,
                "org.a11y.atspi.EditableText",
                "SetTextContents",
            ),
        ),
        (
            "another interface",
            act(Some(APP), EL, "org.a11y.atspi.Selection", "DoAction"),
        ),
        (
            "a method off every list",
            act(Some(APP), EL, "org.a11y.atspi.Component", "GrabFocus"),
        ),
        (
            // The grant is of action 0: another action of the same element is not.
            "another action index",
            call_with(
                Some(APP),
                EL,
                "org.a11y.atspi.Action",
                "DoAction",
                "i",
                &1u32.to_le_bytes(),
            ),
        ),
        (
            "an index and more",
            call_with(
                Some(APP),
                EL,
                "org.a11y.atspi.Action",
                "DoAction",
                "ii",
                &[0; 8],
            ),
        ),
    ] {
        assert_eq!(verdict(&Link::Bus, &g, &m), Verdict::Refuse, "{what}");
    }
    // Action 3 granted: index 3 passes, read in the message's byte order.
    drop(guard);
    let guard = g.grant(Grant {
        args: Args::Action(3),
        ..grant(ActMethod::DoAction, EL)
    });
    for big in [false, true] {
        let action = |index: i32| {
            let args = body(big, &[Part::I(index)]);
            let m = call_in(
                big,
                Some(APP),
                EL,
                "org.a11y.atspi.Action",
                "DoAction",
                "i",
                &args,
            );
            verdict(&Link::Bus, &g, &m)
        };
        assert_eq!(action(3), Verdict::Pass, "big {big}");
        assert_eq!(action(0), Verdict::Refuse, "big {big}");
    }
    // The reader's filter lets no act through, grant or not.
    assert_eq!(
        Policy::Reader.judge(&parse_header(&ok).unwrap(), &ok),
        Verdict::Refuse
    );
    drop(guard);
    assert_eq!(g.current(), None);
    assert_eq!(
        verdict(&Link::Bus, &g, &ok),
        Verdict::Refuse,
        "the grant ended"
    );
}

#[test]
fn properties_set_passes_only_for_the_value() {
    let g = Grants::new();
    let _guard = g.grant(grant(ActMethod::SetCurrentValue, EL));
    let set = |iface: &str, prop: &str| {
        call_with(
            Some(APP),
            EL,
            "org.freedesktop.DBus.Properties",
            "Set",
            "ssv",
            &set_body(iface, prop),
        )
    };
    assert_eq!(
        verdict(&Link::Bus, &g, &set("org.a11y.atspi.Value", "CurrentValue")),
        Verdict::Pass
    );
    for (iface, prop) in [
        ("org.a11y.atspi.Value", "MinimumValue"),
        ("org.a11y.atspi.Text", "CurrentValue"),
        ("org.a11y.atspi.Component", "Extents"),
        ("org.a11y.atspi.Value", "CurrentValu"),
    ] {
        assert_eq!(
            verdict(&Link::Bus, &g, &set(iface, prop)),
            Verdict::Refuse,
            "{iface}.{prop}"
        );
    }
    // No body, or a body that is not two strings first.
    let bare = call_with(
        Some(APP),
        EL,
        "org.freedesktop.DBus.Properties",
        "Set",
        "",
        &[],
    );
    assert_eq!(verdict(&Link::Bus, &g, &bare), Verdict::Refuse);
    let odd = call_with(
        Some(APP),
        EL,
        "org.freedesktop.DBus.Properties",
        "Set",
        "iiv",
        &set_body("org.a11y.atspi.Value", "CurrentValue"),
    );
    assert_eq!(verdict(&Link::Bus, &g, &odd), Verdict::Refuse);
}

/// A compromised input agent, granted one text or number, sends another: refused, whatever
/// the byte order; the granted one passes.
#[test]
fn text_and_number_acts_pass_only_with_the_granted_arguments() {
    use Part::*;
    let g = Grants::new();
    let on = |big: bool, m: ActMethod, sig: &str, parts: &[Part]| {
        let (iface, member) = m.spec();
        let msg = call_in(big, Some(APP), EL, iface, member, sig, &body(big, parts));
        let _guard = g.grant(grant(m, EL));
        verdict(&Link::Bus, &g, &msg)
    };
    let (ins, set_text, num) = (
        ActMethod::InsertText,
        ActMethod::SetTextContents,
        ActMethod::SetCurrentValue,
    );
    let value = |v: Part<'static>| [S("org.a11y.atspi.Value"), S("CurrentValue"), v];
    for big in [false, true] {
        // The granted text at any position, the granted text, the granted number.
        for position in [0, 7, -1] {
            assert_eq!(
                on(big, ins, "isi", &[I(position), S("hi"), I(2)]),
                Verdict::Pass,
                "big endian {big}: typed at {position}"
            );
        }
        assert_eq!(on(big, set_text, "s", &[S("hi")]), Verdict::Pass);
        // Text beyond ASCII: its length in the one unit the grant names (UTF-16 units for
        // Qt, UTF-8 bytes for the others), not in the other, nor in characters.
        let typed = |t: &str, utf16: bool, n: i32| {
            let (iface, member) = ins.spec();
            let body = body(big, &[I(0), S(t), I(n)]);
            let msg = call_in(big, Some(APP), EL, iface, member, "isi", &body);
            let _guard = g.grant(Grant {
                args: Args::Typed {
                    text: t.into(),
                    utf16,
                },
                ..grant(ins, EL)
            });
            verdict(&Link::Bus, &g, &msg)
        };
        // "a😀": 5 bytes, 3 UTF-16 units, 2 characters.
        for (utf16, n, v) in [
            (false, 5, Verdict::Pass),
            (false, 3, Verdict::Refuse),
            (true, 3, Verdict::Pass),
            (true, 5, Verdict::Refuse),
            (false, 2, Verdict::Refuse),
            (true, 2, Verdict::Refuse),
            (true, 4, Verdict::Refuse),
            (false, 6, Verdict::Refuse),
            (true, -1, Verdict::Refuse),
        ] {
            assert_eq!(
                typed("a😀", utf16, n),
                v,
                "big endian {big}: length {n} (utf16 {utf16})"
            );
        }
        assert_eq!(on(big, num, "ssv", &value(D(1.5))), Verdict::Pass);
        for (what, v) in [
            (
                "other text",
                on(big, ins, "isi", &[I(0), S("rm -rf ~"), I(8)]),
            ),
            (
                "other text, as long",
                on(big, ins, "isi", &[I(0), S("ho"), I(2)]),
            ),
            ("more text", on(big, ins, "isi", &[I(0), S("hi\n"), I(3)])),
            ("less text", on(big, ins, "isi", &[I(0), S("h"), I(1)])),
            (
                "a longer length",
                on(big, ins, "isi", &[I(0), S("hi"), I(9)]),
            ),
            (
                "a shorter length",
                on(big, ins, "isi", &[I(0), S("hi"), I(1)]),
            ),
            ("no length", on(big, ins, "is", &[I(0), S("hi")])),
            (
                "more after",
                on(big, ins, "isii", &[I(0), S("hi"), I(2), I(0)]),
            ),
            ("other text set", on(big, set_text, "s", &[S("hx")])),
            ("text and more", on(big, set_text, "ss", &[S("hi"), S("x")])),
            ("an empty text", on(big, set_text, "s", &[S("")])),
            ("another number", on(big, num, "ssv", &value(D(100.0)))),
            ("the number negated", on(big, num, "ssv", &value(D(-1.5)))),
            ("an integer", on(big, num, "ssv", &value(VI(1)))),
            ("an index for a text", on(big, set_text, "i", &[I(0)])),
        ] {
            assert_eq!(v, Verdict::Refuse, "big endian {big}: {what}");
        }
    }
    // Bytes after the body's values, a body cut short, a string without its NUL.
    let (iface, member) = set_text.spec();
    let mut extra = call_with(Some(APP), EL, iface, member, "s", &body(false, &[S("hi")]));
    extra.extend_from_slice(&[0; 4]);
    let len = extra.len() - parse_header(&extra).unwrap().body_at;
    extra[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    let whole = call_with(Some(APP), EL, iface, member, "s", &body(false, &[S("hi")]));
    let _guard = g.grant(grant(set_text, EL));
    assert_eq!(verdict(&Link::Bus, &g, &whole), Verdict::Pass);
    assert_eq!(
        verdict(&Link::Bus, &g, &extra),
        Verdict::Refuse,
        "extra bytes"
    );
    let h = parse_header(&whole).unwrap();
    for cut in [h.body_at + 2, whole.len() - 1] {
        assert!(
            !args_are(&grant(set_text, EL), &h, &whole[..cut]),
            "cut at {cut}"
        );
    }
    // Padding that is not zero (between the text "hi" and the length of a typing).
    let (iface, member) = ins.spec();
    let mut typing = call_with(
        Some(APP),
        EL,
        iface,
        member,
        "isi",
        &body(false, &[I(0), S("hi"), I(2)]),
    );
    let _typing = g.grant(grant(ins, EL));
    assert_eq!(verdict(&Link::Bus, &g, &typing), Verdict::Pass);
    // The body: position (4 bytes), then 4 + 2 + 1 bytes of text, then one pad byte.
    let at = parse_header(&typing).unwrap().body_at + 11;
    assert_eq!(typing[at], 0, "a padding byte");
    typing[at] = 7;
    assert_eq!(verdict(&Link::Bus, &g, &typing), Verdict::Refuse, "padding");
    drop(_typing);
    let _guard = g.grant(grant(set_text, EL));
    let mut no_nul = whole.clone();
    *no_nul.last_mut().unwrap() = b'!';
    assert!(!args_are(&grant(set_text, EL), &h, &no_nul), "no NUL");
    // A grant whose arguments do not fit its method lets nothing through.
    let mut odd = grant(set_text, EL);
    odd.args = Args::Index;
    assert!(!args_are(&odd, &h, &whole));
    // The text never shows in the grant's debug form.
    let secret = Grant {
        args: Args::Text("hunter2".into()),
        ..grant(set_text, EL)
    };
    assert!(!format!("{secret:?}").contains("hunter2"));
}

#[test]
fn on_a_peer_to_peer_link_the_link_names_the_app() {
    let g = Grants::new();
    let _guard = g.grant(grant(
        ActMethod::SelectChild,
        "/org/a11y/atspi/accessible/3",
    ));
    let m = call_with(
        None,
        "/org/a11y/atspi/accessible/3",
        "org.a11y.atspi.Selection",
        "SelectChild",
        "i",
        &[0; 4],
    );
    let link = |bus: &str, pid| Link::App {
        bus_name: bus.into(),
        pid,
    };
    assert_eq!(verdict(&link(APP, 42), &g, &m), Verdict::Pass);
    assert_eq!(
        verdict(&link(APP, 43), &g, &m),
        Verdict::Refuse,
        "another pid"
    );
    assert_eq!(
        verdict(&link(":1.8", 42), &g, &m),
        Verdict::Refuse,
        "another name"
    );
    let elsewhere = call_with(
        Some(":1.8"),
        "/org/a11y/atspi/accessible/3",
        "org.a11y.atspi.Selection",
        "SelectChild",
        "i",
        &[0; 4],
    );
    assert_eq!(
        verdict(&link(APP, 42), &g, &elsewhere),
        Verdict::Refuse,
        "a destination naming another app"
    );
    let on_element = call_with(
        None,
        EL,
        "org.a11y.atspi.Selection",
        "SelectChild",
        "i",
        &[0; 4],
    );
    assert_eq!(
        verdict(&link(APP, 42), &g, &on_element),
        Verdict::Refuse,
        "another object"
    );
}

#[test]
fn one_grant_at_a_time_and_clearing_ends_it() {
    let g = Grants::new();
    let first = g.grant(grant(ActMethod::DoAction, EL));
    let second = g.grant(grant(ActMethod::InsertText, EL));
    let click = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    assert_eq!(verdict(&Link::Bus, &g, &click), Verdict::Refuse, "replaced");
    // The replaced grant's end does not end its successor.
    drop(first);
    assert_eq!(g.current().map(|g| g.method), Some(ActMethod::InsertText));
    g.clear();
    assert_eq!(g.current(), None);
    let typed = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.EditableText",
        "InsertText",
        "isi",
        &[0; 16],
    );
    assert_eq!(verdict(&Link::Bus, &g, &typed), Verdict::Refuse, "cleared");
    drop(second);
    assert_eq!(g.current(), None);
}

#[test]
fn refusals_are_reported_without_names_and_bounded() {
    let g = Grants::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    g.on_refusal(Arc::new(move |r| s.lock().unwrap().push(r)));
    let p = Policy::Input {
        link: Link::Bus,
        grants: g.clone(),
    };
    let click = call_with(
        Some(APP),
        EL,
        "org.a11y.atspi.Action",
        "DoAction",
        "i",
        &[0; 4],
    );
    let odd = call_with(Some(APP), EL, "x.y", "Z", "", &[]);
    p.refused(&parse_header(&click).unwrap());
    let _guard = g.grant(grant(ActMethod::DoAction, "/elsewhere"));
    p.refused(&parse_header(&odd).unwrap());
    for _ in 0..100 {
        p.refused(&parse_header(&odd).unwrap());
    }
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        Refused {
            method: Some(ActMethod::DoAction),
            granted: false
        }
    );
    assert_eq!(
        seen[1],
        Refused {
            method: None,
            granted: true
        }
    );
    assert!(
        seen.len() <= 2 * REPORTS_PER_SECOND as usize,
        "{}",
        seen.len()
    );
    // The reader's refusals are not reported here.
    Policy::Reader.refused(&parse_header(&click).unwrap());
}

/// The reader may subscribe to one application's broadcast AT-SPI events and nothing
/// else: no eavesdropping (which would show it the input agent's calls, with typed text),
/// no other interface, no rule sent anywhere but the bus.
#[test]
fn the_reader_adds_only_event_matches() {
    let add = |dest: Option<&str>, member: &str, rule: &str| {
        let mut body = (rule.len() as u32).to_le_bytes().to_vec();
        body.extend_from_slice(rule.as_bytes());
        body.push(0);
        call_with(
            dest,
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            member,
            "s",
            &body,
        )
    };
    let verdict = |m: &[u8]| Policy::Reader.judge(&parse_header(m).unwrap(), m);
    let good = "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object'";
    for member in ["AddMatch", "RemoveMatch"] {
        assert_eq!(
            verdict(&add(Some("org.freedesktop.DBus"), member, good)),
            Verdict::Pass,
            "{member}"
        );
    }
    assert_eq!(
        verdict(&add(
            Some("org.freedesktop.DBus"),
            "AddMatch",
            "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',member='StateChanged',path='/org/a11y/atspi/accessible/7'"
        )),
        Verdict::Pass
    );
    for bad in [
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',eavesdrop='true'",
        "eavesdrop='true'",
        "type='method_call',sender=':1.42',interface='org.a11y.atspi.Event.Object'",
        "type='signal',interface='org.a11y.atspi.Event.Object'",
        "type='signal',sender=':1.42'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Action'",
        "type='signal',sender=':1.42',interface='org.freedesktop.DBus'",
        "type='signal',sender='org.a11y.atspi.Registry',interface='org.a11y.atspi.Event.Object'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',destination=':1.7'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',arg0='x'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',type='signal'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',member='a\\'b'",
        "type='signal',sender=':1.42',interface='org.a11y.atspi.Event.Object',",
        "",
    ] {
        assert_eq!(
            verdict(&add(Some("org.freedesktop.DBus"), "AddMatch", bad)),
            Verdict::Refuse,
            "{bad}"
        );
    }
    // Only to the bus itself, only those two members.
    assert_eq!(
        verdict(&add(Some(":1.42"), "AddMatch", good)),
        Verdict::Refuse
    );
    assert_eq!(verdict(&add(None, "AddMatch", good)), Verdict::Refuse);
    assert_eq!(
        verdict(&add(Some("org.freedesktop.DBus"), "BecomeMonitor", good)),
        Verdict::Refuse
    );
    // The input agent subscribes to nothing.
    let input = Policy::Input {
        link: Link::Bus,
        grants: Grants::new(),
    };
    let m = add(Some("org.freedesktop.DBus"), "AddMatch", good);
    assert_eq!(input.judge(&parse_header(&m).unwrap(), &m), Verdict::Refuse);
}

#[test]
fn reads_pass_and_actions_and_setters_are_refused() {
    let get = call(
        5,
        "/org/a11y/atspi/accessible/1",
        "org.a11y.atspi.Accessible",
        "GetRole",
        0,
    );
    assert_eq!(message_len(&get).unwrap(), Some(get.len()));
    let h = parse_header(&get).unwrap();
    assert_eq!(h.serial, 5);
    assert_eq!(h.member.as_deref(), Some("GetRole"));
    assert_eq!(h.destination.as_deref(), Some(":1.7"));
    assert_eq!(judge(&h, &get), Verdict::Pass);
    for (iface, member) in [
        ("org.a11y.atspi.Action", "DoAction"),
        ("org.a11y.atspi.EditableText", "SetTextContents"),
        ("org.freedesktop.DBus.Properties", "Set"),
        ("org.a11y.atspi.Component", "GrabFocus"),
        ("org.freedesktop.systemd1.Manager", "StartTransientUnit"),
    ] {
        let m = call(6, "/x", iface, member, 0);
        assert_eq!(
            judge(&parse_header(&m).unwrap(), &m),
            Verdict::Refuse,
            "{iface}.{member}"
        );
        let m = call(6, "/x", iface, member, NO_REPLY_EXPECTED);
        assert_eq!(
            judge(&parse_header(&m).unwrap(), &m),
            Verdict::Drop,
            "{iface}.{member}"
        );
    }
}
