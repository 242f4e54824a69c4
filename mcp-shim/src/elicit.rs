//! Host approvals through MCP elicitation, for a host with no control pipe.
//!
//! When the client declared form elicitation in `initialize` (protocols before 2026-07-28,
//! where a server may still send requests to the client), the shim tells the broker its host
//! can answer approvals, and answers each `approval.request` event itself: it asks the client
//! `elicitation/create` with what the act is and why it is asked (the tool, the reasons, the
//! target's role and label as the broker described them; never typed text, never clipboard
//! contents), and turns the person's answer into the `approval.answer` line a control pipe
//! would have sent (echoing the request's digest). Accept with the box ticked approves; anything
//! else (unticked, decline, cancel, no answer before the request expires) denies.
//!
//! The answer comes from the client's own UI, not from the model: a model cannot send it. A
//! host that answers elicitations by itself (an "auto-approve" setting) approves everything;
//! `nish-mcp --no-elicitation` keeps approvals off this path (they then need a control pipe,
//! or they are refused).
//!
//! A control pipe wins: with `--control-fd`, approval requests go to the pipe only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::elicitor::Elicitor;
use crate::link::BrokerLink;
use crate::server::HostName;

/// The approval events of the broker, answered through the client until the channel closes.
pub async fn run(
    mut events: mpsc::Receiver<String>,
    elicitor: Arc<Elicitor>,
    link: Arc<BrokerLink>,
    host: Arc<HostName>,
) {
    let asking: Arc<Mutex<HashMap<String, AbortHandle>>> = Arc::default();
    while let Some(line) = events.recv().await {
        let Ok(ev) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = ev["id"].as_str().unwrap_or_default().to_string();
        match ev["event"].as_str() {
            Some("approval.request") if !id.is_empty() => {
                let Some(peer) = elicitor.peer() else {
                    continue;
                };
                let (link, host, asking2) = (link.clone(), host.clone(), asking.clone());
                let key = id.clone();
                let task = tokio::spawn(async move {
                    let approve = ask(&peer, &ev).await;
                    asking2
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&key);
                    let line = answer_line(&key, approve, ev["digest"].as_str());
                    if let Err(e) = link.control(&host.get(), line).await {
                        tracing::warn!(code = e.code.as_str(), "approval answer not delivered");
                    }
                });
                asking
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, task.abort_handle());
            }
            Some("approval.withdrawn") => {
                // The call behind it was withdrawn: stop asking (the client's request is
                // dropped, which cancels it).
                if let Some(t) = asking.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
                    t.abort();
                }
            }
            _ => {}
        }
    }
}

/// Asks the client about one approval request; true only for an accepted form with the box
/// ticked, before the request expires.
async fn ask(peer: &Peer<RoleServer>, ev: &Value) -> bool {
    let expires = Duration::from_millis(ev["expires_in_ms"].as_u64().unwrap_or(60_000));
    let Ok(schema) = ElicitationSchema::builder()
        .required_bool_property("allow", |b| {
            b.title("Allow this once")
                .description("Tick to let it happen this one time; leave unticked to refuse.")
                .with_default(false)
        })
        .build()
    else {
        return false;
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(ev),
        requested_schema: schema,
    };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(expires);
    let answer = match peer.send_request_with_option(request, options).await {
        Ok(handle) => handle.await_response().await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(ClientResult::ElicitResult(r)) => {
            r.action == ElicitationAction::Accept
                && r.content
                    .as_ref()
                    .and_then(|c| c.get("allow"))
                    .and_then(Value::as_bool)
                    == Some(true)
        }
        Ok(_) => {
            tracing::info!("the client answered the elicitation with something else");
            false
        }
        Err(e) => {
            tracing::info!(error = %e, "the approval was not answered through the client");
            false
        }
    }
}

/// What the person reads: what would happen and why they are asked. Built from the broker's
/// description of the act (its labels and descriptions are app text, already escaped and cut by
/// the broker, and shown in quotes as the app's own words).
pub fn message(ev: &Value) -> String {
    let tool = ev["tool"].as_str().unwrap_or("a tool");
    let a = &ev["action"];
    let mut lines = vec![format!(
        "nish-driver asks before it runs {tool} on your desktop."
    )];
    let element = |v: &Value| -> String {
        let role = v["role"].as_str().unwrap_or("element").replace('_', " ");
        let named = match v["label"].as_str() {
            Some(l) if !l.is_empty() => format!("{role} \"{l}\""),
            _ => format!("{role} with no label"),
        };
        // The description (an icon-only button's tooltip), when the element has one.
        match v["description"].as_str() {
            Some(d) if !d.is_empty() => format!("{named} described \"{d}\""),
            _ => named,
        }
    };
    if a["role"].is_string() {
        lines.push(format!(
            "On: {} (labels are the app's own words)",
            element(a)
        ));
    }
    // What the act reaches at send time, when that is more than the element named.
    let list = |key: &str, title: &str, lines: &mut Vec<String>| match &a[key] {
        Value::Array(rows) if !rows.is_empty() => {
            let names: Vec<String> = rows.iter().map(element).collect();
            lines.push(format!("{title}: {}", names.join(", ")));
        }
        Value::String(s) if s == "unknown" => lines.push(format!("{title}: not known")),
        _ => {}
    };
    list("under_point", "Under the pointer", &mut lines);
    list("focus", "With the keyboard focus on", &mut lines);
    list("default_buttons", "The window's default button", &mut lines);
    if let Some(n) = a["text_len"].as_u64() {
        lines.push(format!("It would type {n} characters."));
    }
    if let Some(keys) = a["keys"].as_array() {
        let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        if !keys.is_empty() {
            lines.push(format!("Keys: {}", keys.join("+")));
        }
    }
    let reasons: Vec<&str> = ev["reasons"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(reason_text)
                .collect()
        })
        .unwrap_or_default();
    if !reasons.is_empty() {
        lines.push(format!("Why you are asked: {}.", reasons.join("; ")));
    }
    lines.join("\n")
}

/// A reason of `approval.request` in words.
fn reason_text(r: &str) -> &'static str {
    match r {
        "consequential_label" => "the control reads as sending, paying, deleting or the like",
        "no_label" => "the control it reaches has no label to judge it by",
        "unknown_target" => "what it reaches could not be read",
        "typing" => "it types into a field",
        "enter_after_typing" => "it presses Enter after typing",
        "observe_read" => "it reads the window after acting",
        "clipboard_read" => "it reads your clipboard",
        _ => "the host asked to approve such acts",
    }
}

/// The control line answering approval `id`.
pub fn answer_line(id: &str, approve: bool, digest: Option<&str>) -> String {
    let mut params = json!({"id": id, "approve": approve});
    if let Some(d) = digest {
        params["digest"] = d.into();
    }
    json!({"method": "approval.answer", "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_what_and_why_without_typed_text() {
        let ev = json!({"event": "approval.request", "id": "a3", "tool": "click",
            "reasons": ["consequential_label"], "digest": "00ff",
            "action": {"tool": "click", "role": "push_button", "label": "Send",
                       "text_len": null, "keys": null}});
        let m = message(&ev);
        assert!(m.contains("runs click"), "{m}");
        assert!(
            m.contains("On: push button \"Send\" (labels are the app's own words)"),
            "{m}"
        );
        assert!(m.contains("sending, paying"), "{m}");
        let ev = json!({"event": "approval.request", "id": "a5", "tool": "click",
            "reasons": ["consequential_label"],
            "action": {"role": "panel", "label": "Compose",
                       "under_point": [{"role": "push_button", "label": "Send"}]}});
        let m = message(&ev);
        assert!(m.contains("Under the pointer: push button \"Send\""), "{m}");
        let ev = json!({"event": "approval.request", "id": "a6", "tool": "click",
            "reasons": ["consequential_label"],
            "action": {"role": "push_button", "label": "", "description": "Send"}});
        let m = message(&ev);
        assert!(
            m.contains("On: push button with no label described \"Send\""),
            "{m}"
        );
        let ev = json!({"event": "approval.request", "id": "a4", "tool": "type_text",
            "reasons": ["typing"], "action": {"role": "entry", "label": "", "text_len": 12}});
        let m = message(&ev);
        assert!(
            m.contains("type 12 characters") && m.contains("entry with no label"),
            "{m}"
        );
        let line = answer_line("a3", true, Some("00ff"));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"method": "approval.answer", "params": {"id": "a3", "approve": true, "digest": "00ff"}})
        );
        // The line is what the broker's control parser reads.
        assert!(nish_proto::control::Verb::parse(&line).is_ok());
        let deny: Value = serde_json::from_str(&answer_line("a4", false, None)).unwrap();
        assert!(deny["params"].get("digest").is_none());
    }
}
