//! The one call an act may make ([`act_grant`]): what the D-Bus filter lets through of the
//! input agent's links while the act runs.

use nish_proto::wire::input::{Expect, SemanticOp};

use crate::busfilter::{ActMethod, Args, Grant};

/// The one call an act may make, as the broker asked for it: the element's application and
/// object (for a select, the parent the snapshot showed) and the act's method. `None` when the
/// handles do not name an object of one application.
pub fn act_grant(target: &Expect, op: &SemanticOp, utf16: bool) -> Option<Grant> {
    let split = |h: &str| -> Option<(String, String)> {
        let (bus, path) = h.split_once('|')?;
        (bus.starts_with(':') && path.starts_with('/')).then(|| (bus.to_string(), path.to_string()))
    };
    let (bus_name, element) = split(&target.handle)?;
    let (method, path, args) = match op {
        SemanticOp::Action { index, .. } => (ActMethod::DoAction, element, Args::Action(*index)),
        SemanticOp::InsertText { text } => (
            ActMethod::InsertText,
            element,
            Args::Typed {
                text: text.clone(),
                utf16,
            },
        ),
        SemanticOp::SetText { text } => (
            ActMethod::SetTextContents,
            element,
            Args::Text(text.clone()),
        ),
        SemanticOp::SetNumber { value } => (
            ActMethod::SetCurrentValue,
            element,
            Args::Number(value.to_bits()),
        ),
        SemanticOp::Select => {
            let (pbus, ppath) = split(target.parent_handle.as_deref()?)?;
            if pbus != bus_name {
                return None;
            }
            (ActMethod::SelectChild, ppath, Args::Index)
        }
    };
    Some(Grant {
        bus_name,
        pid: target.pid,
        path,
        method,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acts_grant_names_its_element_and_its_one_method() {
        let mut t = Expect {
            handle: ":1.7|/org/a11y/atspi/accessible/12".into(),
            window_id: 1,
            pid: 42,
            role: "push_button".into(),
            name: String::new(),
            states: Default::default(),
            frame: None,
            window_frame: nish_proto::model::Rect::new(0, 0, 10, 10),
            collapsed_option: false,
            parent_handle: Some(":1.7|/org/a11y/atspi/accessible/3".into()),
        };
        let g = act_grant(
            &t,
            &SemanticOp::Action {
                name: "click".into(),
                index: 2,
            },
            false,
        )
        .unwrap();
        assert_eq!(
            g,
            Grant {
                bus_name: ":1.7".into(),
                pid: 42,
                path: "/org/a11y/atspi/accessible/12".into(),
                method: ActMethod::DoAction,
                args: Args::Action(2),
            }
        );
        let m = |op| act_grant(&t, &op, false).map(|g| (g.method, g.path, g.args));
        let el = "/org/a11y/atspi/accessible/12".to_string();
        // Its text or number, exactly.
        assert_eq!(
            m(SemanticOp::SetNumber { value: 1.5 }),
            Some((
                ActMethod::SetCurrentValue,
                el.clone(),
                Args::Number(1.5f64.to_bits())
            ))
        );
        assert_eq!(
            m(SemanticOp::SetText { text: "x".into() }),
            Some((
                ActMethod::SetTextContents,
                el.clone(),
                Args::Text("x".into())
            ))
        );
        assert_eq!(
            m(SemanticOp::InsertText {
                text: "héllo".into()
            }),
            Some((
                ActMethod::InsertText,
                el.clone(),
                Args::Typed {
                    text: "héllo".into(),
                    utf16: false
                }
            ))
        );
        // Typing into a Qt app: its length in UTF-16 units.
        let typing = SemanticOp::InsertText {
            text: "héllo".into(),
        };
        assert_eq!(
            act_grant(&t, &typing, true).map(|g| g.args),
            Some(Args::Typed {
                text: "héllo".into(),
                utf16: true
            })
        );
        use nish_proto::wire::input::counts_utf16;
        assert!(counts_utf16("Qt") && counts_utf16("QT") && !counts_utf16("GTK"));
        // A select reaches the parent the snapshot showed, of the same application only.
        assert_eq!(
            m(SemanticOp::Select),
            Some((
                ActMethod::SelectChild,
                "/org/a11y/atspi/accessible/3".to_string(),
                Args::Index
            ))
        );
        t.parent_handle = Some(":1.8|/org/a11y/atspi/accessible/3".into());
        assert_eq!(act_grant(&t, &SemanticOp::Select, false), None);
        t.parent_handle = None;
        assert_eq!(act_grant(&t, &SemanticOp::Select, false), None);
        t.handle = "org.gtk.App|/x".into();
        assert_eq!(
            act_grant(
                &t,
                &SemanticOp::Action {
                    name: "click".into(),
                    index: 0,
                },
                false
            ),
            None
        );
    }
}
