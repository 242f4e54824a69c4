use super::*;

#[test]
fn the_refusal_is_a_well_formed_error_reply() {
    let h = parse_header(&call(9, "/x", "org.a11y.atspi.Action", "DoAction", 0)).unwrap();
    let e = refusal_message(&h, 77);
    assert_eq!(message_len(&e).unwrap(), Some(e.len()));
    let back = parse_header(&e).unwrap();
    assert_eq!(back.msg_type, ERROR);
    assert_eq!(back.serial, 77);
}

#[test]
fn names_logged_from_a_refused_call_are_cut_and_escaped() {
    let hostile = "x\nFORGED log line ".repeat(20);
    let logged = format!("{:?}", log_name(Some(&hostile)));
    assert!(!logged.contains('\n'), "{logged}");
    assert!(logged.contains("\\n"), "{logged}");
    assert_eq!(log_name(Some(&hostile)).chars().count(), 64);
    assert_eq!(log_name(None), "");
}

#[test]
fn a_header_field_given_twice_is_refused() {
    let mut m = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
    // Turn the DESTINATION field (code 6) into a second MEMBER field (code 3).
    let at = m
        .windows(4)
        .position(|w| w == [6, 1, b's', 0])
        .expect("the destination field");
    m[at] = 3;
    assert!(parse_header(&m).is_err());
}

#[test]
fn the_boundary_tracker_finds_message_ends_in_any_cut() {
    let a = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
    let b = call(2, "/org/a11y/atspi/accessible/root", "a.b", "Cee", 0);
    let stream: Vec<u8> = [a.clone(), b.clone(), a.clone()].concat();
    let ends = [a.len(), a.len() + b.len(), stream.len()];
    for cut in 1..stream.len() {
        let mut t = Boundary::default();
        for (i, piece) in stream.chunks(cut).enumerate() {
            t.feed(piece).unwrap();
            let fed = ((i + 1) * cut).min(stream.len());
            assert_eq!(t.at_end(), ends.contains(&fed), "cut {cut} at {fed}");
        }
    }
    let mut t = Boundary::default();
    assert!(t.feed(b"x234567890123456").is_err());
}

#[test]
fn malformed_headers_are_refused() {
    assert!(message_len(b"x23456789012345678").is_err());
    let mut m = call(1, "/x", "a.b", "C", 0);
    // An unknown field type.
    m[17] = 1;
    m[18] = b'v';
    assert!(parse_header(&m).is_err());
    // A known field of another type: the DESTINATION (a string) made a SIGNATURE field,
    // which must be a `g`; and the PATH given as a string.
    let mut m = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
    assert_eq!(parse_header(&m).unwrap().signature, None);
    let at = m
        .windows(4)
        .position(|w| w == [6, 1, b's', 0])
        .expect("the destination field");
    m[at] = 8;
    assert_eq!(
        parse_header(&m).err(),
        Some("a header field of the wrong type")
    );
    let mut m = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
    let at = m
        .windows(4)
        .position(|w| w == [1, 1, b'o', 0])
        .expect("the path field");
    m[at + 2] = b's';
    assert_eq!(
        parse_header(&m).err(),
        Some("a header field of the wrong type")
    );
}
