//! Structure-aware fuzzing on stable Rust, bounded so every `cargo test` runs it.
//!
//! Arbitrary messages of every direction's enum are encoded as frames, then mutated
//! (truncated, bytes flipped, lengths inflated, headers changed, garbage appended) and given to
//! every direction's frame decoder, through both the blocking reader and the incremental
//! cutter. A decoder must never panic, and never allocate for what a frame merely claims: a
//! counting allocator checks that the largest single allocation stays within a small multiple
//! of the frame's own size (a claimed 2^42-byte string would be noticed at once).
//!
//! The corpus in `tests/corpus/<direction>/` (one frame per file) is replayed the same way:
//! `bomb-*` files must be refused by their direction's decoder, `seed-*` files must decode and
//! encode back to the same bytes (`NISH_BLESS_CORPUS=1` rewrites the seeds).
//!
//! Element tokens (`Token::parse`) and tool arguments (`validate::check_args`) are fuzzed here
//! too. `NISH_FUZZ_CASES` sets the cases per property (default 256).

#[path = "support/sys.rs"]
mod sys;

#[global_allocator]
static ALLOC: sys::Counting = sys::Counting;

use std::path::{Path, PathBuf};

use nish_proto::model::{Ifaces, Node, Rect, StateSet, Token, Tree, TruncReason, WindowInfo};
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use nish_proto::wire::codec::{self, FrameCutter, FrameError};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentApp, ConsentControl, ConsentDialog, ConsentRequest,
    ConsentShown, HostProgram, IndicatorToBroker, ShownControl,
};
use nish_proto::wire::input::{
    BrokerToInput, Expect, InputProbe, InputToBroker, KeyboardFocus, PersonInput, SemanticOp,
    SynthEnd, SynthOp,
};
use nish_proto::wire::reader::{
    BrokerToReader, DesktopProbe, Freshness, ReaderToBroker, SettleBounds, SettleReport,
    SettleWait, TreeFreshness, WalkLimits,
};
use nish_proto::wire::shim::{ApproveOpts, BrokerToShim, CallResult, Image, ShimToBroker};
use nish_proto::wire::{
    AgentFailure, ConnectTarget, Handed, Hello, LockdownReport, MAX_CLIENT_FRAME_BYTES,
    MAX_FRAME_BYTES, Role,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

// ---- decoders ----

/// Decodes one whole frame as `T` through the cutter and the blocking reader; both must agree.
/// `Ok` holds the frame encoded again from the decoded message.
fn run<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(
    frame: &[u8],
    max: usize,
) -> Result<Vec<u8>, String> {
    let mut cutter = FrameCutter::new(max);
    let cut: Result<Option<T>, FrameError> = cutter.push(frame).and_then(|()| cutter.next_frame());
    let read: Result<T, FrameError> = codec::read_frame(&mut &frame[..], max);
    match (cut, read) {
        (Ok(Some(a)), Ok(b)) => {
            assert_eq!(a, b, "the cutter and the reader decoded differently");
            codec::encode(&a, usize::MAX).map_err(|e| e.to_string())
        }
        (Ok(Some(a)), Err(e)) => panic!("the cutter decoded {a:?}, the reader failed: {e}"),
        (Ok(None), Ok(b)) => panic!("the reader decoded {b:?} from an incomplete frame"),
        (Ok(None), Err(e)) | (Err(_), Err(e)) => Err(e.to_string()),
        (Err(e), Ok(b)) => panic!("the reader decoded {b:?}, the cutter failed: {e}"),
    }
}

/// A direction: its corpus folder, its receiver's maximum and its decoder.
struct Dir {
    name: &'static str,
    max: usize,
    run: fn(&[u8], usize) -> Result<Vec<u8>, String>,
}

const DIRS: &[Dir] = &[
    Dir {
        name: "hello",
        max: MAX_CLIENT_FRAME_BYTES,
        run: run::<Hello>,
    },
    Dir {
        name: "shim-to-broker",
        max: MAX_CLIENT_FRAME_BYTES,
        run: run::<ShimToBroker>,
    },
    Dir {
        name: "broker-to-shim",
        max: MAX_FRAME_BYTES,
        run: run::<BrokerToShim>,
    },
    Dir {
        name: "cli-to-broker",
        max: MAX_CLIENT_FRAME_BYTES,
        run: run::<CliToBroker>,
    },
    Dir {
        name: "broker-to-cli",
        max: MAX_FRAME_BYTES,
        run: run::<BrokerToCli>,
    },
    Dir {
        name: "broker-to-reader",
        max: MAX_FRAME_BYTES,
        run: run::<BrokerToReader>,
    },
    Dir {
        name: "reader-to-broker",
        max: MAX_FRAME_BYTES,
        run: run::<ReaderToBroker>,
    },
    Dir {
        name: "broker-to-input",
        max: MAX_FRAME_BYTES,
        run: run::<BrokerToInput>,
    },
    Dir {
        name: "input-to-broker",
        max: MAX_FRAME_BYTES,
        run: run::<InputToBroker>,
    },
    Dir {
        name: "broker-to-indicator",
        max: MAX_CLIENT_FRAME_BYTES,
        run: run::<BrokerToIndicator>,
    },
    Dir {
        name: "indicator-to-broker",
        max: MAX_FRAME_BYTES,
        run: run::<IndicatorToBroker>,
    },
];

fn dir(name: &str) -> &'static Dir {
    DIRS.iter().find(|d| d.name == name).unwrap()
}

/// What one frame may cost a decoder: its own bytes a few times over (the cutter's buffer, the
/// body, decoded strings) and the in-memory form of what it decoded (a row of a tree is a few
/// wire bytes and a couple of hundred bytes in memory, and vectors grow by doubling).
fn allowance(frame: &[u8]) -> usize {
    64 * frame.len() + 4096
}

/// Runs every decoder on `frame`; panics when one allocates beyond the allowance. Returns the
/// worst ratio of largest allocation to frame size seen.
fn all_decoders(frame: &[u8]) -> f64 {
    let mut worst = 0f64;
    for d in DIRS {
        let (_, largest, _) = sys::measure(|| (d.run)(frame, d.max));
        assert!(
            largest <= allowance(frame),
            "{}: a frame of {} bytes made an allocation of {largest} bytes",
            d.name,
            frame.len()
        );
        worst = worst.max(largest as f64 / frame.len().max(1) as f64);
    }
    worst
}

// ---- arbitrary messages ----

fn s() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,12}",
        Just(String::new()),
        "[a-z_]{1,20}",
        Just("mcp:host:4242".to_string())
    ]
}

fn rect() -> impl Strategy<Value = Rect> {
    (any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()).prop_map(|(x, y, w, h)| Rect {
        x,
        y,
        w,
        h,
    })
}

fn window() -> impl Strategy<Value = WindowInfo> {
    (
        any::<u64>(),
        any::<u32>(),
        s(),
        s(),
        rect(),
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
    )
        .prop_map(
            |(window_id, pid, app, title, frame, active, visible, stacking)| WindowInfo {
                window_id,
                pid,
                app,
                title,
                frame,
                active,
                visible,
                stacking,
            },
        )
}

fn node() -> impl Strategy<Value = Node> {
    (
        (s(), s(), any::<u64>(), proptest::option::of(s())),
        (
            proptest::collection::vec(s(), 0..3),
            proptest::option::of(rect()),
            proptest::option::of(any::<u32>()),
        ),
        (any::<u16>(), any::<u32>(), any::<u16>(), s()),
        (s(), proptest::collection::vec((s(), s()), 0..3)),
    )
        .prop_map(
            |(
                (role, name, states, value),
                (actions, frame, parent),
                (depth, child_count, ifaces, handle),
                (description, field_attrs),
            )| Node {
                role,
                name,
                description,
                field_attrs,
                states: StateSet(states),
                value,
                actions,
                frame,
                parent,
                depth,
                child_count,
                ifaces: Ifaces(ifaces),
                handle,
            },
        )
}

fn lockdown() -> impl Strategy<Value = LockdownReport> {
    (any::<[bool; 3]>(), s(), s()).prop_map(|(b, landlock, detail)| LockdownReport {
        no_new_privs: b[0],
        caps_empty: b[1],
        seccomp: b[2],
        landlock,
        detail,
    })
}

fn failure() -> impl Strategy<Value = AgentFailure> {
    (s(), s()).prop_map(|(code, message)| AgentFailure { code, message })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..64)
}

fn hello() -> impl Strategy<Value = Hello> {
    (0usize..5, any::<u32>(), s()).prop_map(|(r, proto_version, driver_version)| Hello {
        role: [
            Role::Shim,
            Role::Cli,
            Role::Reader,
            Role::Input,
            Role::Indicator,
        ][r],
        proto_version,
        driver_version,
    })
}

fn shim_to_broker() -> impl Strategy<Value = ShimToBroker> {
    prop_oneof![
        (s(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(host, has_control, consequential, reads)| ShimToBroker::Open {
                host,
                has_control,
                approve: ApproveOpts {
                    consequential,
                    reads
                },
            }
        ),
        (any::<u64>(), s(), s()).prop_map(|(id, tool, args_json)| ShimToBroker::Call {
            id,
            tool,
            args_json
        }),
        s().prop_map(|line| ShimToBroker::Control { line }),
        any::<u64>().prop_map(|id| ShimToBroker::Cancel { id }),
    ]
}

fn broker_to_shim() -> impl Strategy<Value = BrokerToShim> {
    let image = (s(), bytes()).prop_map(|(mime, data)| Image { mime, data });
    prop_oneof![
        s().prop_map(|session| BrokerToShim::Opened { session }),
        (
            any::<u64>(),
            any::<bool>(),
            s(),
            s(),
            proptest::collection::vec(image, 0..3)
        )
            .prop_map(|(id, is_error, structured_json, text, images)| {
                BrokerToShim::Result {
                    id,
                    result: CallResult {
                        is_error,
                        structured_json,
                        text,
                        images,
                    },
                }
            }),
        s().prop_map(|line| BrokerToShim::Event { line }),
        s().prop_map(|error_json| BrokerToShim::Refused { error_json }),
    ]
}

fn act_path() -> impl Strategy<Value = nish_proto::wire::input::ActPath> {
    use nish_proto::wire::input::ActPath;
    prop_oneof![
        s().prop_map(|name| ActPath::Action { name }),
        Just(ActPath::Selection),
        Just(ActPath::EditableText),
        Just(ActPath::Value),
    ]
}

fn cli_to_broker() -> impl Strategy<Value = CliToBroker> {
    prop_oneof![
        Just(CliToBroker::Status),
        Just(CliToBroker::Stop),
        Just(CliToBroker::Doctor),
    ]
}

fn broker_to_cli() -> impl Strategy<Value = BrokerToCli> {
    prop_oneof![
        s().prop_map(|json| BrokerToCli::Status { json }),
        s().prop_map(|message| BrokerToCli::Done { message }),
        s().prop_map(|error_json| BrokerToCli::Refused { error_json }),
    ]
}

fn broker_to_reader() -> impl Strategy<Value = BrokerToReader> {
    let limits = (any::<u32>(), any::<u16>(), any::<u64>(), any::<bool>()).prop_map(
        |(max_elements, max_depth, budget_ms, details)| WalkLimits {
            max_elements,
            max_depth,
            budget_ms,
            details,
        },
    );
    let freshness = prop_oneof![
        Just(Freshness::Walk),
        (any::<u64>(), any::<Option<u64>>())
            .prop_map(|(generation, have)| Freshness::MayReuse { generation, have }),
    ];
    prop_oneof![
        any::<u64>().prop_map(|id| BrokerToReader::ListWindows { id }),
        (any::<u64>(), window(), limits, freshness).prop_map(|(id, window, limits, freshness)| {
            BrokerToReader::ReadTree {
                id,
                window,
                limits,
                freshness,
            }
        }),
        (
            any::<u64>(),
            window(),
            proptest::collection::vec(s(), 0..4),
            proptest::option::of(any::<u32>()),
            proptest::option::of(rect())
        )
            .prop_map(|(id, window, secure, stream, stream_part)| {
                BrokerToReader::Capture {
                    id,
                    window,
                    secure,
                    stream,
                    stream_part,
                }
            }),
        any::<u64>().prop_map(|id| BrokerToReader::Probe { id }),
        (any::<u64>(), window(), s()).prop_map(|(id, window, element)| BrokerToReader::Watch {
            id,
            window,
            element
        }),
        (any::<[u64; 5]>(), 0..3u8).prop_map(|(n, w)| BrokerToReader::Settle {
            id: n[0],
            watch: n[1],
            wait: [SettleWait::Own, SettleWait::AnyEvent, SettleWait::Quiet][w as usize],
            bounds: SettleBounds {
                own_max_ms: n[2],
                quiet_ms: n[3],
                quiet_min_ms: n[3] / 3,
                max_ms: n[4],
                act_ago_ms: (w == 0).then_some(n[4] / 2),
            },
        }),
        (any::<u64>(), window(), proptest::collection::vec(s(), 0..4)).prop_map(
            |(id, window, handles)| BrokerToReader::ReadObjects {
                id,
                window,
                handles
            }
        ),
        (any::<u64>(), window(), proptest::collection::vec(s(), 0..4)).prop_map(
            |(id, window, handles)| BrokerToReader::States {
                id,
                window,
                handles
            }
        ),
        any::<[u64; 4]>().prop_map(|n| BrokerToReader::Rekeep {
            id: n[0],
            window_id: n[1],
            from: n[2],
            to: n[3]
        }),
    ]
}

fn tree_freshness() -> impl Strategy<Value = TreeFreshness> {
    prop_oneof![
        Just(TreeFreshness::Walked),
        any::<u64>().prop_map(|version| TreeFreshness::Kept { version }),
        any::<[u64; 2]>().prop_map(|[version, age_ms]| TreeFreshness::Reused { version, age_ms }),
    ]
}

fn reader_to_broker() -> impl Strategy<Value = ReaderToBroker> {
    let trunc = prop_oneof![
        Just(None),
        Just(Some(TruncReason::MaxElements)),
        Just(Some(TruncReason::MaxDepth)),
        Just(Some(TruncReason::TimeBudget)),
        Just(Some(TruncReason::AppNotResponding)),
    ];
    let tree = (window(), proptest::collection::vec(node(), 0..4), trunc).prop_map(
        |(window, nodes, truncated)| Tree {
            window,
            nodes,
            truncated,
        },
    );
    let probe = (
        any::<bool>(),
        s(),
        proptest::collection::vec(s(), 0..3),
        proptest::option::of((any::<u16>(), any::<u16>())),
        any::<bool>(),
        proptest::option::of(s()),
        proptest::collection::vec(any::<u32>(), 0..3),
    )
        .prop_map(
            |(
                display_ok,
                display,
                missing_extensions,
                xinput_version,
                atspi_ok,
                atspi_reason,
                pids_without_tree,
            )| {
                DesktopProbe {
                    display_ok,
                    display,
                    missing_extensions,
                    xinput_version,
                    atspi_ok,
                    atspi_reason,
                    pids_without_tree,
                }
            },
        );
    prop_oneof![
        lockdown().prop_map(ReaderToBroker::Lockdown),
        (any::<u64>(), proptest::collection::vec(window(), 0..3))
            .prop_map(|(id, windows)| ReaderToBroker::Windows { id, windows }),
        (any::<u64>(), tree, any::<u64>(), s(), tree_freshness()).prop_map(
            |(id, tree, walk_ms, toolkit, freshness)| ReaderToBroker::Tree {
                id,
                tree,
                walk_ms,
                toolkit,
                freshness,
            }
        ),
        any::<[u64; 3]>().prop_map(|[id, version, age_ms]| ReaderToBroker::Unchanged {
            id,
            version,
            age_ms
        }),
        (any::<u64>(), any::<[u32; 3]>(), bytes()).prop_map(|(id, n, data)| ReaderToBroker::Png {
            id,
            width: n[0],
            height: n[1],
            redacted: n[2],
            data
        }),
        (any::<u64>(), probe).prop_map(|(id, probe)| ReaderToBroker::Probe { id, probe }),
        (any::<u64>(), failure()).prop_map(|(id, failure)| ReaderToBroker::Failed { id, failure }),
        (
            any::<u64>(),
            proptest::collection::vec(proptest::option::of(node()), 0..3)
        )
            .prop_map(|(id, nodes)| ReaderToBroker::Objects { id, nodes }),
        (
            any::<u64>(),
            proptest::collection::vec(proptest::option::of(any::<u64>()), 0..3),
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(id, states, app_windows)| ReaderToBroker::States {
                id,
                states: states.into_iter().map(|s| s.map(StateSet)).collect(),
                app_windows
            }),
        any::<[u64; 2]>().prop_map(|n| ReaderToBroker::Watching {
            id: n[0],
            watch: n[1]
        }),
        (any::<u64>(), any::<bool>()).prop_map(|(id, moved)| ReaderToBroker::Rekept { id, moved }),
        (any::<[u64; 2]>(), any::<[u32; 2]>(), any::<[bool; 6]>()).prop_map(|(n, c, b)| {
            ReaderToBroker::Settled {
                id: n[0],
                report: SettleReport {
                    events: c[0],
                    ignored: c[1],
                    own_seen: b[0],
                    quiet: b[1],
                    structural: b[2],
                    window_known: b[3],
                    ms: n[1],
                    overflow: b[4],
                    changed: b[5]
                        .then(|| vec![format!(":1.{}|/org/a11y/atspi/accessible/{}", c[0], c[1])]),
                },
            }
        }),
    ]
}

fn broker_to_input() -> impl Strategy<Value = BrokerToInput> {
    let expect = (
        (s(), any::<u64>(), any::<u32>(), s(), s()),
        (
            any::<u64>(),
            proptest::option::of(rect()),
            rect(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (handle, window_id, pid, role, name),
                (states, frame, window_frame, collapsed_option),
            )| {
                Expect {
                    handle,
                    window_id,
                    pid,
                    role,
                    name,
                    states: StateSet(states),
                    frame,
                    window_frame,
                    collapsed_option,
                    parent_handle: None,
                }
            },
        );
    let op = prop_oneof![
        (s(), any::<u32>()).prop_map(|(name, index)| SemanticOp::Action { name, index }),
        Just(SemanticOp::Select),
        s().prop_map(|text| SemanticOp::InsertText { text }),
        s().prop_map(|text| SemanticOp::SetText { text }),
        any::<f64>()
            .prop_filter("comparable", |v| !v.is_nan())
            .prop_map(|value| SemanticOp::SetNumber { value }),
    ];
    let synth = prop_oneof![
        (any::<i32>(), any::<i32>(), any::<u8>(), any::<u8>()).prop_map(|(x, y, button, count)| {
            SynthOp::Click {
                x,
                y,
                button,
                count,
            }
        }),
        s().prop_map(|text| SynthOp::Type { text }),
        proptest::collection::vec(s(), 0..4).prop_map(|keys| SynthOp::Keys { keys }),
        (any::<i32>(), any::<i32>(), s(), any::<u32>()).prop_map(|(x, y, direction, amount)| {
            SynthOp::Scroll {
                x,
                y,
                direction,
                amount,
            }
        }),
        any::<[i32; 4]>().prop_map(|p| SynthOp::Drag {
            from: (p[0], p[1]),
            to: (p[2], p[3])
        }),
        (any::<i32>(), any::<i32>(), any::<u64>()).prop_map(|(x, y, duration_ms)| SynthOp::Move {
            x,
            y,
            duration_ms
        }),
        any::<u64>().prop_map(|window_id| SynthOp::Raise { window_id }),
    ];
    prop_oneof![
        (any::<u64>(), expect, op).prop_map(|(id, target, op)| BrokerToInput::Semantic {
            id,
            target,
            op
        }),
        (any::<u64>(), any::<u64>(), synth)
            .prop_map(|(id, window_id, op)| BrokerToInput::Synthetic { id, window_id, op }),
        any::<u64>().prop_map(|id| BrokerToInput::Cancel { id }),
        any::<u64>().prop_map(|id| BrokerToInput::ReleaseAll { id }),
        (any::<u64>(), any::<bool>()).prop_map(|(id, on)| BrokerToInput::Watch { id, on }),
        any::<u64>().prop_map(|id| BrokerToInput::Probe { id }),
        any::<u64>().prop_map(|id| BrokerToInput::Focus { id }),
        any::<u64>().prop_map(|id| BrokerToInput::ClipboardRead { id }),
        (any::<u64>(), s(), s()).prop_map(|(id, owner, text)| BrokerToInput::ClipboardWrite {
            id,
            owner,
            text
        }),
        (any::<u64>(), proptest::option::of(s()))
            .prop_map(|(id, owner)| BrokerToInput::ClipboardRelease { id, owner }),
    ]
}

fn person_input() -> impl Strategy<Value = PersonInput> {
    prop_oneof![
        Just(PersonInput::PointerMoved),
        Just(PersonInput::KeyPressed),
        Just(PersonInput::ButtonPressed),
    ]
}

fn input_to_broker() -> impl Strategy<Value = InputToBroker> {
    let end = prop_oneof![
        Just(SynthEnd::Done),
        (person_input(), any::<u64>())
            .prop_map(|(reason, typed)| SynthEnd::Stopped { reason, typed }),
        any::<u64>().prop_map(|typed| SynthEnd::Cancelled { typed }),
        (failure(), any::<u64>()).prop_map(|(failure, typed)| SynthEnd::Broke { failure, typed }),
    ];
    let probe = (
        any::<bool>(),
        proptest::option::of(any::<(u16, u16)>()),
        proptest::option::of(any::<(u16, u16)>()),
        any::<bool>(),
    )
        .prop_map(|(display_ok, xtest, xinput, clipboard_ok)| InputProbe {
            display_ok,
            xtest,
            xinput,
            clipboard_ok,
        });
    prop_oneof![
        lockdown().prop_map(InputToBroker::Lockdown),
        (any::<u64>(), act_path()).prop_map(|(id, path)| InputToBroker::Done { id, path }),
        (any::<u64>(), end).prop_map(|(id, end)| InputToBroker::Synth { id, end }),
        any::<u64>().prop_map(|id| InputToBroker::Ack { id }),
        (any::<u64>(), probe).prop_map(|(id, probe)| InputToBroker::Probe { id, probe }),
        (
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..4),
            any::<bool>()
        )
            .prop_map(|(id, chain, popup)| InputToBroker::Focus {
                id,
                focus: KeyboardFocus { chain, popup }
            }),
        person_input().prop_map(|input| InputToBroker::Person { input }),
        (any::<u64>(), s()).prop_map(|(id, text)| InputToBroker::Clipboard { id, text }),
        (any::<u64>(), failure(), any::<bool>())
            .prop_map(|(id, failure, sent)| InputToBroker::Failed { id, failure, sent }),
    ]
}

fn broker_to_indicator() -> impl Strategy<Value = BrokerToIndicator> {
    let app =
        (s(), any::<bool>(), any::<u32>(), s()).prop_map(|(name, ticked, windows, program)| {
            ConsentApp {
                name,
                ticked,
                windows,
                program,
            }
        });
    let dialog = (
        (any::<u64>(), s(), s(), any::<u32>(), s()),
        (
            proptest::collection::vec(app, 0..4),
            any::<u32>(),
            any::<u32>(),
            any::<[bool; 2]>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (id, host_claimed, exe, pid, script),
                (apps, missing_requested, lease_minutes, lines, timeout_ms),
            )| ConsentDialog {
                id,
                request: ConsentRequest {
                    host_claimed,
                    program: HostProgram { exe, pid, script },
                    apps,
                    missing_requested,
                    lease_minutes,
                    takeover: lines[0],
                    clipboard: lines[1],
                    timeout_ms,
                },
            },
        );
    prop_oneof![
        dialog.prop_map(BrokerToIndicator::ShowConsent),
        any::<bool>().prop_map(|accept_xtest_clicks| BrokerToIndicator::Config {
            accept_xtest_clicks
        }),
        any::<u64>().prop_map(|id| BrokerToIndicator::CancelConsent { id }),
        (s(), any::<bool>(), any::<u64>()).prop_map(|(session, paused, show)| {
            BrokerToIndicator::ShowTakeover {
                session,
                paused,
                show,
            }
        }),
        (s(), any::<bool>())
            .prop_map(|(session, paused)| BrokerToIndicator::SetPaused { session, paused }),
        s().prop_map(|session| BrokerToIndicator::HideTakeover { session }),
        Just(BrokerToIndicator::DriverPress),
        (
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<u32>()
        )
            .prop_map(|(id, setup, screen)| BrokerToIndicator::Connected {
                id,
                result: Ok(Handed::X11 { setup, screen }),
            }),
        (any::<u64>(), s(), s()).prop_map(|(id, code, message)| BrokerToIndicator::Connected {
            id,
            result: Err(AgentFailure { code, message }),
        }),
    ]
}

fn indicator_to_broker() -> impl Strategy<Value = IndicatorToBroker> {
    let answer = (
        any::<bool>(),
        proptest::collection::vec(s(), 0..4),
        proptest::collection::vec(s(), 0..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(allow, apps, programs, takeover, clipboard)| ConsentAnswer {
                allow,
                apps,
                programs,
                takeover,
                clipboard,
            },
        );
    prop_oneof![
        lockdown().prop_map(IndicatorToBroker::Lockdown),
        (any::<u64>(), answer).prop_map(|(id, answer)| IndicatorToBroker::Consent { id, answer }),
        (
            any::<u64>(),
            s(),
            proptest::collection::vec((0u32..6, any::<u32>(), any::<bool>()), 0..6),
            proptest::option::of(any::<u32>()),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(id, lang, controls, focus, keys, assistive)| {
                IndicatorToBroker::ConsentShown {
                    id,
                    shown: ConsentShown {
                        lang,
                        controls: controls
                            .into_iter()
                            .map(|(k, i, ticked)| ShownControl {
                                control: match k {
                                    0 => ConsentControl::App(i),
                                    1 => ConsentControl::Takeover,
                                    2 => ConsentControl::Clipboard,
                                    3 => ConsentControl::Deny,
                                    _ => ConsentControl::Allow,
                                },
                                ticked,
                            })
                            .collect(),
                        focus,
                        keys,
                        assistive,
                    },
                }
            }),
        (s(), any::<u64>())
            .prop_map(|(session, show)| IndicatorToBroker::TakeoverShown { session, show }),
        s().prop_map(|session| IndicatorToBroker::Continue { session }),
        (s(), s())
            .prop_map(|(session, reason)| IndicatorToBroker::TakeoverLost { session, reason }),
        Just(IndicatorToBroker::Stop),
        any::<bool>().prop_map(|hotkey_grabbed| IndicatorToBroker::Ready { hotkey_grabbed }),
        any::<u64>().prop_map(|id| IndicatorToBroker::Connect {
            id,
            target: ConnectTarget::X11
        }),
        (any::<u64>(), s()).prop_map(|(id, bus_name)| IndicatorToBroker::Connect {
            id,
            target: ConnectTarget::App { bus_name }
        }),
    ]
}

// ---- mutations ----

#[derive(Clone, Debug)]
enum Mutation {
    None,
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    /// A length (or any integer) replaced by a huge varint at a position of the body, the
    /// header fixed to the new size so the frame is whole.
    Inflate(prop::sample::Index, u64),
    Header(u32),
    Append(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let huge = prop_oneof![
        Just(1u64 << 32),
        Just(1u64 << 42),
        Just(1u64 << 62),
        Just(u64::MAX),
        any::<u64>()
    ];
    prop_oneof![
        1 => Just(Mutation::None),
        2 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        3 => (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        4 => (any::<prop::sample::Index>(), huge).prop_map(|(i, v)| Mutation::Inflate(i, v)),
        1 => any::<u32>().prop_map(Mutation::Header),
        1 => proptest::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
    ]
}

fn mutate(mut frame: Vec<u8>, m: &Mutation) -> Vec<u8> {
    match m {
        Mutation::None => {}
        Mutation::Truncate(i) => frame.truncate(i.index(frame.len() + 1)),
        Mutation::Flip(i, mask) => {
            let n = i.index(frame.len());
            frame[n] ^= mask;
        }
        Mutation::Inflate(i, v) => {
            if frame.len() > 4 {
                let at = 4 + i.index(frame.len() - 4);
                let mut huge = vec![253u8];
                huge.extend_from_slice(&v.to_le_bytes());
                frame.splice(at..at + 1, huge);
                let body = (frame.len() - 4) as u32;
                frame[..4].copy_from_slice(&body.to_be_bytes());
            }
        }
        Mutation::Header(h) => frame[..4].copy_from_slice(&h.to_be_bytes()),
        Mutation::Append(extra) => frame.extend_from_slice(extra),
    }
    frame
}

fn cases() -> u32 {
    std::env::var("NISH_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Arbitrary messages of one direction, encoded, mutated, given to every decoder. Unmutated
/// frames must decode in their own direction and encode back to the same bytes.
fn fuzz_direction<T>(name: &str, strategy: impl Strategy<Value = T>)
where
    T: Serialize + std::fmt::Debug,
{
    let own = dir(name);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let worst = std::cell::Cell::new(0f64);
    runner
        .run(&(strategy, mutation()), |(msg, m)| {
            let frame = codec::encode(&msg, usize::MAX).unwrap();
            if matches!(m, Mutation::None) {
                let back = (own.run)(&frame, usize::MAX)
                    .unwrap_or_else(|e| panic!("{name}: {msg:?} did not decode: {e}"));
                prop_assert_eq!(&back, &frame);
            }
            let frame = mutate(frame, &m);
            worst.set(worst.get().max(all_decoders(&frame)));
            Ok(())
        })
        .unwrap();
    eprintln!(
        "{name}: {} cases, largest allocation at most {:.1} x the frame",
        cases(),
        worst.get()
    );
}

#[test]
fn fuzz_hello() {
    fuzz_direction("hello", hello());
}
#[test]
fn fuzz_shim_to_broker() {
    fuzz_direction("shim-to-broker", shim_to_broker());
}
#[test]
fn fuzz_broker_to_shim() {
    fuzz_direction("broker-to-shim", broker_to_shim());
}
#[test]
fn fuzz_cli_to_broker() {
    fuzz_direction("cli-to-broker", cli_to_broker());
}
#[test]
fn fuzz_broker_to_cli() {
    fuzz_direction("broker-to-cli", broker_to_cli());
}
#[test]
fn fuzz_broker_to_reader() {
    fuzz_direction("broker-to-reader", broker_to_reader());
}
#[test]
fn fuzz_reader_to_broker() {
    fuzz_direction("reader-to-broker", reader_to_broker());
}
#[test]
fn fuzz_broker_to_input() {
    fuzz_direction("broker-to-input", broker_to_input());
}
#[test]
fn fuzz_input_to_broker() {
    fuzz_direction("input-to-broker", input_to_broker());
}
#[test]
fn fuzz_broker_to_indicator() {
    fuzz_direction("broker-to-indicator", broker_to_indicator());
}
#[test]
fn fuzz_indicator_to_broker() {
    fuzz_direction("indicator-to-broker", indicator_to_broker());
}

#[test]
fn fuzz_raw_bytes() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(any::<u32>(), proptest::collection::vec(any::<u8>(), 0..256)),
            |(len, body)| {
                // A frame whose header claims the body's length, and one whose header claims
                // anything at all.
                let mut whole = (body.len() as u32).to_be_bytes().to_vec();
                whole.extend_from_slice(&body);
                all_decoders(&whole);
                let mut any_len = len.to_be_bytes().to_vec();
                any_len.extend_from_slice(&body);
                all_decoders(&any_len);
                Ok(())
            },
        )
        .unwrap();
}

// ---- the corpus ----

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// The seeds: one or more valid messages per direction.
fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let e = |m: &dyn erased::Frame| m.frame();
    let report = LockdownReport {
        no_new_privs: true,
        caps_empty: true,
        seccomp: true,
        landlock: "full".into(),
        detail: String::new(),
    };
    let win = WindowInfo {
        window_id: 4_194_311,
        pid: 4242,
        app: "Notes".into(),
        title: "Untitled".into(),
        frame: Rect::new(10, 20, 640, 480),
        active: true,
        visible: true,
        stacking: 3,
    };
    vec![
        ("hello", "seed-shim", e(&Hello::new(Role::Shim))),
        ("hello", "seed-reader", e(&Hello::new(Role::Reader))),
        (
            "shim-to-broker",
            "seed-open",
            e(&ShimToBroker::Open {
                host: "claude-code".into(),
                has_control: true,
                approve: ApproveOpts::default(),
            }),
        ),
        (
            "shim-to-broker",
            "seed-call",
            e(&ShimToBroker::Call {
                id: 3,
                tool: "type_text".into(),
                args_json: r#"{"element_token":"s4:17","text":"hello"}"#.into(),
            }),
        ),
        (
            "shim-to-broker",
            "seed-cancel",
            e(&ShimToBroker::Cancel { id: 3 }),
        ),
        (
            "shim-to-broker",
            "seed-control",
            e(&ShimToBroker::Control {
                line: r#"{"method":"takeover.resume"}"#.into(),
            }),
        ),
        (
            "broker-to-shim",
            "seed-result",
            e(&BrokerToShim::Result {
                id: 3,
                result: CallResult {
                    is_error: false,
                    structured_json: r#"{"ok":true}"#.into(),
                    text: "done".into(),
                    images: vec![Image {
                        mime: "image/png".into(),
                        data: vec![0x89, b'P', b'N', b'G'],
                    }],
                },
            }),
        ),
        ("cli-to-broker", "seed-stop", e(&CliToBroker::Stop)),
        (
            "broker-to-cli",
            "seed-done",
            e(&BrokerToCli::Done {
                message: "stopped 1 session(s)".into(),
            }),
        ),
        (
            "broker-to-reader",
            "seed-read-tree",
            e(&BrokerToReader::ReadTree {
                id: 9,
                window: win.clone(),
                limits: WalkLimits::default(),
                freshness: Freshness::MayReuse {
                    generation: 8,
                    have: Some(3),
                },
            }),
        ),
        (
            "reader-to-broker",
            "seed-tree",
            e(&ReaderToBroker::Tree {
                id: 9,
                tree: Tree {
                    window: win.clone(),
                    nodes: vec![Node {
                        role: "push_button".into(),
                        name: "Save".into(),
                        description: "Save the file".into(),
                        field_attrs: vec![("text-input-type".into(), "search".into())],
                        states: StateSet(0b1011),
                        value: None,
                        actions: vec!["click".into()],
                        frame: Some(Rect::new(12, 40, 80, 24)),
                        parent: Some(0),
                        depth: 1,
                        child_count: 0,
                        ifaces: Ifaces(33),
                        handle: ":1.42/org/a11y/atspi/accessible/7".into(),
                    }],
                    truncated: Some(TruncReason::TimeBudget),
                },
                walk_ms: 12,
                toolkit: "GTK".into(),
                freshness: TreeFreshness::Kept { version: 3 },
            }),
        ),
        (
            "reader-to-broker",
            "seed-unchanged",
            e(&ReaderToBroker::Unchanged {
                id: 10,
                version: 3,
                age_ms: 40,
            }),
        ),
        (
            "reader-to-broker",
            "seed-lockdown",
            e(&ReaderToBroker::Lockdown(report.clone())),
        ),
        (
            "broker-to-input",
            "seed-insert-text",
            e(&BrokerToInput::Semantic {
                id: 4,
                target: Expect {
                    handle: ":1.42/7".into(),
                    window_id: 4_194_311,
                    pid: 4242,
                    role: "entry".into(),
                    name: "Name".into(),
                    states: StateSet(5),
                    frame: Some(Rect::new(1, 2, 3, 4)),
                    window_frame: Rect::new(0, 0, 640, 480),
                    collapsed_option: false,
                    parent_handle: None,
                },
                op: SemanticOp::InsertText { text: "Ada".into() },
            }),
        ),
        (
            "input-to-broker",
            "seed-failed",
            e(&InputToBroker::Failed {
                id: 4,
                failure: AgentFailure {
                    code: "element_not_found".into(),
                    message: "gone".into(),
                },
                sent: false,
            }),
        ),
        (
            "input-to-broker",
            "seed-focus",
            e(&InputToBroker::Focus {
                id: 5,
                focus: KeyboardFocus {
                    chain: vec![4_194_312, 4_194_311],
                    popup: true,
                },
            }),
        ),
        (
            "broker-to-indicator",
            "seed-consent",
            e(&BrokerToIndicator::ShowConsent(ConsentDialog {
                id: 2,
                request: ConsentRequest {
                    host_claimed: "claude-code".into(),
                    program: HostProgram {
                        exe: "/usr/bin/claude".into(),
                        pid: 4200,
                        script: String::new(),
                    },
                    apps: vec![ConsentApp {
                        name: "Notes".into(),
                        ticked: true,
                        windows: 1,
                        program: "notes".into(),
                    }],
                    missing_requested: 0,
                    lease_minutes: 15,
                    takeover: true,
                    clipboard: false,
                    timeout_ms: 60_000,
                },
            })),
        ),
        (
            "broker-to-indicator",
            "seed-connected",
            e(&BrokerToIndicator::Connected {
                id: 1,
                result: Ok(Handed::X11 {
                    setup: vec![1, 0, 11, 0, 0, 0, 0, 0],
                    screen: 0,
                }),
            }),
        ),
        (
            "indicator-to-broker",
            "seed-connect",
            e(&IndicatorToBroker::Connect {
                id: 1,
                target: ConnectTarget::X11,
            }),
        ),
        (
            "indicator-to-broker",
            "seed-consent-shown",
            e(&IndicatorToBroker::ConsentShown {
                id: 3,
                shown: ConsentShown {
                    lang: "de".into(),
                    controls: vec![
                        ShownControl {
                            control: ConsentControl::App(0),
                            ticked: true,
                        },
                        ShownControl {
                            control: ConsentControl::Deny,
                            ticked: false,
                        },
                        ShownControl {
                            control: ConsentControl::Allow,
                            ticked: false,
                        },
                    ],
                    focus: Some(1),
                    keys: true,
                    assistive: false,
                },
            }),
        ),
        (
            "indicator-to-broker",
            "seed-lost",
            e(&IndicatorToBroker::TakeoverLost {
                session: "mcp:claude-code:4242".into(),
                reason: "indicator_unmapped".into(),
            }),
        ),
    ]
}

mod erased {
    pub trait Frame {
        fn frame(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Frame for T {
        fn frame(&self) -> Vec<u8> {
            nish_proto::wire::codec::encode(self, usize::MAX).unwrap()
        }
    }
}

#[test]
fn corpus_seeds_are_current() {
    let bless = std::env::var_os("NISH_BLESS_CORPUS").is_some();
    for (direction, name, frame) in seeds() {
        let path = corpus().join(direction).join(format!("{name}.bin"));
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &frame).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (NISH_BLESS_CORPUS=1 writes the seeds)",
                path.display()
            )
        });
        assert_eq!(
            on_disk,
            frame,
            "{} is stale (NISH_BLESS_CORPUS=1 rewrites it)",
            path.display()
        );
    }
}

#[test]
fn the_corpus_replays() {
    let mut files = 0;
    let mut bombs = 0;
    for d in DIRS {
        let folder = corpus().join(d.name);
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        paths.sort();
        for p in paths {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".bin") {
                continue;
            }
            let frame = std::fs::read(&p).unwrap();
            all_decoders(&frame);
            let own = (d.run)(&frame, d.max);
            if name.starts_with("bomb-") {
                let why = own.expect_err(&format!("{}/{name} decoded", d.name));
                eprintln!("{}/{name}: refused ({why})", d.name);
                bombs += 1;
            } else {
                let back = own.unwrap_or_else(|e| panic!("{}/{name}: {e}", d.name));
                assert_eq!(back, frame, "{}/{name} does not encode back", d.name);
            }
            files += 1;
        }
    }
    assert!(bombs >= 20, "only {bombs} bombs in the corpus");
    assert!(files > bombs, "no seeds in the corpus");
    eprintln!("{files} corpus files replayed, {bombs} bombs refused");
}

// ---- tokens and tool arguments ----

#[test]
fn fuzz_tokens() {
    let mut runner = TestRunner::new(Config {
        cases: cases() * 4,
        failure_persistence: None,
        ..Config::default()
    });
    let token_like = prop_oneof![
        "[a-zA-Z0-9]{0,40}:[0-9]{0,8}",
        ".{0,64}",
        "s[0-9]{1,3}:[0-9]{1,6}",
        "[a-z0-9]{1,32}:[0-9]{1,6}[:x ]?.{0,3}",
    ];
    runner
        .run(&token_like, |t| {
            let ((), largest, _) = sys::measure(|| {
                if let Some(tok) = Token::parse(&t) {
                    // What parses prints in a form that parses to the same token.
                    assert_eq!(Token::parse(&tok.to_string()), Some(tok.clone()));
                    assert!(tok.snapshot_id.len() <= 32);
                }
            });
            prop_assert!(largest <= 128 + t.len());
            Ok(())
        })
        .unwrap();
}

const MARKER: &str = "VALUE-MARKER-7d1e";

/// A value for a JSON schema: usually valid, sometimes not.
fn from_schema(schema: &Value, depth: u32) -> BoxedStrategy<Value> {
    let wrong = prop_oneof![
        Just(Value::Null),
        Just(json!(true)),
        Just(json!(-1)),
        Just(json!(1e300)),
        Just(json!(MARKER)),
        Just(json!([MARKER])),
        Just(json!({"x": MARKER})),
        Just(json!("s1:1")),
        Just(Value::String(MARKER.repeat(20_000))),
    ];
    let right: BoxedStrategy<Value> = if let Some(options) = schema["enum"].as_array() {
        proptest::sample::select(options.clone()).boxed()
    } else {
        match schema["type"].as_str() {
            Some("string") => prop_oneof![
                "s[0-9]{1,2}:[0-9]{1,3}".prop_map(Value::String),
                ".{0,20}".prop_map(|s| Value::String(format!("{s}{MARKER}"))),
                Just(json!("")),
            ]
            .boxed(),
            Some("integer") => prop_oneof![
                (-5i64..5000).prop_map(|n| json!(n)),
                any::<i64>().prop_map(|n| json!(n)),
                Just(json!(u64::MAX)),
            ]
            .boxed(),
            Some("number") => any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f))
                .boxed(),
            Some("boolean") => any::<bool>().prop_map(|b| json!(b)).boxed(),
            Some("array") if depth < 4 => {
                proptest::collection::vec(from_schema(&schema["items"], depth + 1), 0..5)
                    .prop_map(Value::Array)
                    .boxed()
            }
            Some("object") if depth < 4 => object(schema, depth),
            _ => Just(Value::Null).boxed(),
        }
    };
    prop_oneof![8 => right, 1 => wrong].boxed()
}

fn object(schema: &Value, depth: u32) -> BoxedStrategy<Value> {
    let props: Vec<(String, Value)> = schema["properties"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = props
        .into_iter()
        .map(|(k, v)| {
            proptest::option::weighted(0.8, from_schema(&v, depth + 1))
                .prop_map(move |val| val.map(|val| (k.clone(), val)))
                .boxed()
        })
        .collect();
    (fields, proptest::option::weighted(0.1, ".{1,8}"))
        .prop_map(|(fields, extra)| {
            let mut m: serde_json::Map<String, Value> = fields.into_iter().flatten().collect();
            if let Some(k) = extra {
                m.insert(k, json!(MARKER));
            }
            Value::Object(m)
        })
        .boxed()
}

#[test]
fn fuzz_tool_arguments() {
    for tool in nish_proto::tools::TOOLS {
        let schema = tool.input_schema();
        let mut runner = TestRunner::new(Config {
            cases: cases() / 4,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&from_schema(&schema, 0), |args| {
                match nish_proto::validate::check_args(tool.name, &args) {
                    Ok(()) => {}
                    Err(e) => {
                        prop_assert_eq!(e.code, nish_proto::ErrorCode::InvalidArguments);
                        prop_assert!(
                            !e.message.contains(MARKER),
                            "{}: the message echoes a value: {}",
                            tool.name,
                            e.message
                        );
                        prop_assert!(e.message.chars().count() <= 300);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
    // Unknown tools and non-objects are refused, not panicked on.
    assert!(nish_proto::validate::check_args("no_such_tool", &json!({})).is_err());
    assert!(nish_proto::validate::check_args("click", &json!([1, 2])).is_err());
}

/// The naive way to decode a string: size the buffer by the length prefix, then fill it.
fn trusting_string_decoder(body: &[u8]) -> Result<String, &'static str> {
    let (&marker, rest) = body.split_first().ok_or("empty")?;
    let (len, rest) = match marker {
        253 => {
            let (n, rest) = rest.split_at_checked(8).ok_or("short")?;
            (u64::from_le_bytes(n.try_into().unwrap()) as usize, rest)
        }
        n if n < 251 => (n as usize, rest),
        _ => return Err("marker"),
    };
    let mut buf = Vec::with_capacity(len);
    let bytes = rest.get(..len).ok_or("short")?;
    buf.extend_from_slice(bytes);
    String::from_utf8(buf).map_err(|_| "utf-8")
}

#[test]
fn the_allowance_catches_a_decoder_that_allocates_what_is_claimed() {
    // A decoder that trusts the claim, on a 10-byte body claiming a 64 MiB string: it
    // allocates the claim before failing (as bincode's own decoder did). The measurement used
    // above sees that.
    let mut body = vec![253u8];
    body.extend_from_slice(&(64u64 << 20).to_le_bytes());
    body.push(b'x');
    let (r, largest, _) = sys::measure(|| trusting_string_decoder(&body));
    assert!(r.is_err());
    assert!(largest >= 64 << 20, "{largest}");
    assert!(largest > allowance(&body));
    // The bounded decoder refuses the same body without allocating.
    let (r, largest, _) = sys::measure(|| codec::decode::<String>(&body));
    assert!(r.is_err());
    assert!(largest <= allowance(&body), "{largest}");
}
