//! The input agent's own D-Bus calls: a closed list of the calls that change an application
//! ([`ActMethod`]), each with its timeout, and the one read-only call the reader's list
//! (`nish_atspi::dbus::Read`) does not have ([`Look`]); both are rows of the one table
//! `nish_proto::atspi_calls::CALLS` the broker's filter is made from, and each call is sent
//! only with the arguments of its row. Every other call goes through the reader's list. The
//! broker's filter on the input agent's links lets reads through and an act only when it is the
//! one the broker asked for (`nish_agenthost::busfilter`).
//!
//! There is no way to name another method here: no focus (`GrabFocus`), no scrolling, no
//! window geometry, no synthetic events (`DeviceEventController`), no clipboard (`CutText`,
//! `PasteText`). Each act has a typed function whose body is fixed; `Properties.Set` is
//! reachable only for `org.a11y.atspi.Value.CurrentValue`.

use std::time::Duration;

use nish_atspi::a11y::AppLink;
use nish_atspi::dbus::{Call, CallError, fits};
use nish_proto::atspi_calls::Spec;
use serde::de::DeserializeOwned;
use zbus::zvariant::{DynamicType, Value};

/// Timeout of every act call. An act that does not answer in time may still have happened.
pub const ACT_TIMEOUT: Duration = Duration::from_millis(1500);

pub use nish_proto::atspi_calls::{ActMethod, Look};

async fn raw_call<B, R>(
    link: &AppLink,
    path: &str,
    call: Call,
    body: &B,
    timeout: Duration,
) -> Result<R, CallError>
where
    B: serde::Serialize + DynamicType,
    R: DeserializeOwned + zbus::zvariant::Type,
{
    let Spec {
        interface: iface,
        member: method,
        ..
    } = call.spec();
    // Any other arguments would be refused by the broker's filter: not sent.
    if !fits(call, body) {
        tracing::error!(call = ?call, "a call with other arguments than its own");
        return Err(CallError::Other);
    }
    let reply = match tokio::time::timeout(
        timeout,
        link.conn
            .call_method(link.dest(), path, Some(iface), method, body),
    )
    .await
    {
        Err(_) => return Err(CallError::Timeout),
        Ok(Err(e)) => return Err(CallError::from_zbus(&e)),
        Ok(Ok(m)) => m,
    };
    reply
        .body()
        .deserialize::<R>()
        .map_err(|_| CallError::BadReply)
}

async fn act<B, R>(link: &AppLink, path: &str, act: ActMethod, body: &B) -> Result<R, CallError>
where
    B: serde::Serialize + DynamicType,
    R: DeserializeOwned + zbus::zvariant::Type,
{
    raw_call(link, path, Call::Act(act), body, ACT_TIMEOUT).await
}

/// `Accessible.GetIndexInParent`.
pub async fn index_in_parent(
    link: &AppLink,
    path: &str,
    timeout: Duration,
) -> Result<i32, CallError> {
    raw_call(link, path, Call::Look(Look::IndexInParent), &(), timeout).await
}

/// Does action `index`; the application's answer (false: it did not do it).
pub async fn do_action(link: &AppLink, path: &str, index: i32) -> Result<bool, CallError> {
    act(link, path, ActMethod::DoAction, &(index,)).await
}

/// Inserts `text` at character `position`. The length argument is the text's length as the
/// toolkit reads it ([`nish_proto::wire::input::insert_text_length`]).
pub async fn insert_text(
    link: &AppLink,
    path: &str,
    position: i32,
    text: &str,
    utf16: bool,
) -> Result<bool, CallError> {
    let len = nish_proto::wire::input::insert_text_length(text, utf16).ok_or(CallError::Other)?;
    act(link, path, ActMethod::InsertText, &(position, text, len)).await
}

/// Replaces the whole text.
pub async fn set_text_contents(link: &AppLink, path: &str, text: &str) -> Result<bool, CallError> {
    act(link, path, ActMethod::SetTextContents, &(text,)).await
}

/// Sets `Value.CurrentValue`.
pub async fn set_current_value(link: &AppLink, path: &str, value: f64) -> Result<(), CallError> {
    act(
        link,
        path,
        ActMethod::SetCurrentValue,
        &("org.a11y.atspi.Value", "CurrentValue", Value::F64(value)),
    )
    .await
}

/// Selects child `index` of a container with `Selection`.
pub async fn select_child(link: &AppLink, path: &str, index: i32) -> Result<bool, CallError> {
    act(link, path, ActMethod::SelectChild, &(index,)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only methods that may change an application.
    const ALLOWED_ACTS: &[(&str, &str)] = &[
        ("org.a11y.atspi.Action", "DoAction"),
        ("org.a11y.atspi.EditableText", "InsertText"),
        ("org.a11y.atspi.EditableText", "SetTextContents"),
        ("org.freedesktop.DBus.Properties", "Set"),
        ("org.a11y.atspi.Selection", "SelectChild"),
    ];

    /// Methods that move focus, scroll, move windows, fake input or touch the clipboard.
    const NEVER: &[&str] = &[
        "GrabFocus",
        "ScrollTo",
        "ScrollToPoint",
        "ScrollSubstringTo",
        "SetExtents",
        "SetPosition",
        "SetSize",
        "GenerateKeyboardEvent",
        "GenerateMouseEvent",
        "CutText",
        "CopyText",
        "PasteText",
        "DeleteText",
        "SelectAll",
        "ClearSelection",
        "DeselectChild",
        "SetCaretOffset",
        "SetSelection",
    ];

    #[test]
    fn acts_are_a_closed_list() {
        assert_eq!(ActMethod::ALL.len(), ALLOWED_ACTS.len());
        for a in ActMethod::ALL {
            let spec = a.spec();
            assert!(ALLOWED_ACTS.contains(&spec), "{spec:?}");
            assert!(!NEVER.contains(&spec.1), "{spec:?}");
            assert!(!spec.0.contains("DeviceEventController"), "{spec:?}");
        }
        assert!(ACT_TIMEOUT <= Duration::from_secs(2));
        assert!(ACT_TIMEOUT > Duration::ZERO);
    }

    #[test]
    fn every_method_call_goes_through_a_closed_list() {
        // Outside this module, D-Bus calls go through the reader's `call` (its `Read` list)
        // or the functions above; nothing else names a method.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            seen += 1;
            if path.file_name().is_some_and(|n| n == "calls.rs") {
                continue;
            }
            for needle in [
                "call_method(",
                "Proxy",
                "MethodCall",
                "zbus::message::Builder",
            ] {
                assert!(!src.contains(needle), "{}: {needle}", path.display());
            }
        }
        assert!(seen >= 8, "scanned {seen} files");
    }

    #[test]
    fn an_act_or_a_look_is_sent_only_with_its_own_arguments() {
        // The bodies the functions above send, and others.
        let act = |a: ActMethod| Call::Act(a);
        assert!(fits(Call::Look(Look::IndexInParent), &()));
        assert!(!fits(Call::Look(Look::IndexInParent), &(0i32,)));
        assert!(fits(act(ActMethod::DoAction), &(0i32,)));
        assert!(!fits(act(ActMethod::DoAction), &(0u32,)));
        assert!(fits(act(ActMethod::SelectChild), &(2i32,)));
        assert!(fits(act(ActMethod::InsertText), &(0i32, "hi", 2i32)));
        assert!(!fits(act(ActMethod::InsertText), &(0i32, "hi")));
        assert!(fits(act(ActMethod::SetTextContents), &("hi",)));
        assert!(!fits(act(ActMethod::SetTextContents), &("hi", 0i32)));
        assert!(fits(
            act(ActMethod::SetCurrentValue),
            &("org.a11y.atspi.Value", "CurrentValue", Value::F64(1.5))
        ));
        assert!(!fits(
            act(ActMethod::SetCurrentValue),
            &("org.a11y.atspi.Value", "CurrentValue", 1.5f64)
        ));
    }

    #[test]
    fn the_reads_the_filter_refuses_are_never_named() {
        use nish_proto::atspi_calls::Agent;
        // The filter refuses the input agent `Properties.GetAll` and `Accessible.GetAttributes`
        // (the reader's only): its sources, and the shared library's it calls, never send one.
        let refused: Vec<_> = nish_atspi::dbus::Read::ALL
            .iter()
            .filter(|r| !r.row().senders.any_time(Agent::Input))
            .map(|r| format!("{r:?}"))
            .collect();
        assert_eq!(refused, ["GetAttributes", "GetAllProperties"]);
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for dir in [root.join("src"), root.join("../atspi/src")] {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "rs")
                    || path
                        .file_name()
                        .is_some_and(|n| n == "dbus.rs" || n == "calls.rs")
                {
                    continue;
                }
                let src = std::fs::read_to_string(&path).unwrap();
                seen += 1;
                for r in &refused {
                    assert!(!src.contains(r.as_str()), "{}: {r}", path.display());
                }
            }
        }
        assert!(seen >= 12, "scanned {seen} files");
    }

    #[test]
    fn typed_text_is_counted_as_its_toolkit_reads_it() {
        use nish_proto::wire::input::insert_text_length as text_length;
        // "a😀✓": 8 bytes, 4 UTF-16 units, 3 characters.
        assert_eq!(text_length("a😀✓", false), Some(8));
        assert_eq!(text_length("a😀✓", true), Some(4));
        assert_eq!(text_length("ascii", true), text_length("ascii", false));
        let qt = crate::live::Toolkit {
            name: "Qt".into(),
            version: "6.4.2".into(),
        };
        let gtk = crate::live::Toolkit {
            name: "GTK".into(),
            version: "3.24.38".into(),
        };
        assert!(qt.counts_utf16());
        assert!(!gtk.counts_utf16());
    }
}
