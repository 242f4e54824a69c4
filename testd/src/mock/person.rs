//! The simulated person: answers the consent dialog, moves the pointer, presses a key, clicks
//! Continue (`nish-testd person ...`).

use super::*;

impl MockBackend {
    /// The simulated person's input: answers the open consent dialog, moves the pointer,
    /// presses a key, or clicks Continue.
    pub async fn person(&self, op: PersonOp) -> Result<String, DriverError> {
        match op {
            PersonOp::Approve {
                apps,
                takeover,
                clipboard,
            } => {
                let p = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    // A dialog whose request was dropped (closed) is not there to answer.
                    .filter(|p| !p.tx.is_closed());
                let Some(p) = p else {
                    return Err(DriverError::new(
                        ErrorCode::NoSession,
                        "no consent dialog is open",
                    ));
                };
                let lines = &p.req.apps;
                let ticked: Vec<&nish_proto::wire::indicator::ConsentApp> = match apps {
                    Some(want) => lines
                        .iter()
                        .filter(|a| want.iter().any(|w| *w == a.name || *w == a.program))
                        .collect(),
                    None if lines.iter().all(|a| !a.ticked) => lines.iter().collect(),
                    None => lines.iter().filter(|a| a.ticked).collect(),
                };
                let programs: Vec<String> = ticked.iter().map(|a| a.program.clone()).collect();
                let ticked: Vec<String> = ticked.iter().map(|a| a.name.clone()).collect();
                let answer = ConsentAnswer {
                    allow: true,
                    apps: ticked.clone(),
                    programs,
                    takeover: takeover && p.req.takeover,
                    clipboard: clipboard && p.req.clipboard,
                };
                let msg = format!(
                    "allowed {} of {} listed apps{}{}",
                    ticked.len(),
                    p.req.apps.len(),
                    if answer.takeover { ", takeover" } else { "" },
                    if answer.clipboard { ", clipboard" } else { "" }
                );
                let _ = p.tx.send(answer);
                Ok(msg)
            }
            PersonOp::Deny => {
                let p = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    // A dialog whose request was dropped (closed) is not there to answer.
                    .filter(|p| !p.tx.is_closed());
                let Some(p) = p else {
                    return Err(DriverError::new(
                        ErrorCode::NoSession,
                        "no consent dialog is open",
                    ));
                };
                let _ = p.tx.send(ConsentAnswer {
                    allow: false,
                    apps: vec![],
                    programs: vec![],
                    takeover: false,
                    clipboard: false,
                });
                Ok("denied".into())
            }
            PersonOp::Move { x, y } => {
                let mut d = self.desk();
                d.pointer = (x.clamp(0, SCREEN.w - 1), y.clamp(0, SCREEN.h - 1));
                let mut paused = false;
                if d.indicator.is_some()
                    && let Some((bx, by)) = d.baseline
                    && ((d.pointer.0 - bx).abs() > POINTER_SLACK_PX
                        || (d.pointer.1 - by).abs() > POINTER_SLACK_PX)
                {
                    d.person = Some(PausedReason::PointerMoved);
                    paused = true;
                }
                drop(d);
                if paused {
                    let _ = self.events_tx.send(BackendEvent::PersonInput {
                        reason: PausedReason::PointerMoved,
                    });
                }
                Ok(format!("pointer at {x},{y}"))
            }
            PersonOp::Key { name } => {
                let takeover = {
                    let mut d = self.desk();
                    let on = d.indicator.is_some();
                    if on {
                        d.person = Some(PausedReason::KeyPressed);
                    }
                    on
                };
                if takeover {
                    let _ = self.events_tx.send(BackendEvent::PersonInput {
                        reason: PausedReason::KeyPressed,
                    });
                }
                Ok(format!(
                    "pressed {}",
                    nish_proto::model::escape_clip(&name, 20)
                ))
            }
            PersonOp::Continue => {
                let ind = self.desk().indicator.clone();
                match ind {
                    Some((session, true)) => {
                        let _ = self.events_tx.send(BackendEvent::Continue { session });
                        Ok("clicked Continue".into())
                    }
                    _ => Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "no paused indicator with a Continue button",
                    )),
                }
            }
        }
    }
}
