//! The host's control lines under structure-aware fuzzing, through the engine's parse path
//! (`Engine::control`) on the mock desktop: verbs of the contract and others, sessions of this
//! host and of others, approval ids, answers of every type, then mutated (truncated, bytes
//! flipped, not objects, huge). Every line gets JSON-object answers, nothing panics, and a
//! line naming another host's session never changes that session.

mod common;

use std::time::Duration;

use common::Fixture;
use nish_decider::engine::EngineConfig;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

fn verb() -> impl Strategy<Value = Value> {
    let method = prop_oneof![
        Just(json!("takeover.resume")),
        Just(json!("session.revoke")),
        Just(json!("approval.answer")),
        ".{0,20}".prop_map(Value::String),
        Just(json!(7)),
        Just(Value::Null),
    ];
    let session = prop_oneof![
        Just(None),
        Just(Some(json!("mcp:test-host:4242424"))),
        Just(Some(json!("mcp:other:4200077"))),
        ".{0,24}".prop_map(|s| Some(json!(s))),
        Just(Some(json!(["mcp:other:4200077"]))),
    ];
    let id = prop_oneof![
        Just(None),
        Just(Some(json!("a1"))),
        ".{0,8}".prop_map(|s| Some(json!(s))),
        any::<i64>().prop_map(|n| Some(json!(n))),
    ];
    let approve = prop_oneof![
        Just(None),
        any::<bool>().prop_map(|b| Some(json!(b))),
        Just(Some(json!("yes"))),
    ];
    (method, session, id, approve, any::<bool>()).prop_map(
        |(method, session, id, approve, params_as_list)| {
            let mut params = serde_json::Map::new();
            if let Some(s) = session {
                params.insert("session".into(), s);
            }
            if let Some(i) = id {
                params.insert("id".into(), i);
            }
            if let Some(a) = approve {
                params.insert("approve".into(), a);
            }
            let params = if params_as_list {
                Value::Array(params.into_values().collect())
            } else {
                Value::Object(params)
            };
            json!({"method": method, "params": params})
        },
    )
}

#[derive(Clone, Debug)]
enum Mutation {
    None,
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    NotObject(Value),
    Huge(usize),
}

fn line() -> impl Strategy<Value = String> {
    let m = prop_oneof![
        4 => Just(Mutation::None),
        2 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        2 => (any::<prop::sample::Index>(), 1u8..=127).prop_map(|(i, b)| Mutation::Flip(i, b)),
        1 => prop_oneof![Just(json!([1, 2])), Just(json!("takeover.resume")), Just(Value::Null),
                         Just(json!(1e308))].prop_map(Mutation::NotObject),
        1 => (1usize..20_000).prop_map(Mutation::Huge),
    ];
    (verb(), m).prop_map(|(v, m)| {
        let text = v.to_string();
        match m {
            Mutation::None => text,
            Mutation::Truncate(i) => text.chars().take(i.index(text.len() + 1)).collect(),
            Mutation::Flip(i, x) => {
                let mut b = text.into_bytes();
                let n = i.index(b.len());
                b[n] ^= x;
                String::from_utf8_lossy(&b).into_owned()
            }
            Mutation::NotObject(v) => v.to_string(),
            Mutation::Huge(n) => {
                json!({"method": "session.revoke", "params": {"session": "x".repeat(n)}})
                    .to_string()
            }
        }
    })
}

#[test]
fn fuzz_control_lines_through_the_engine() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let f = Fixture::with_config(
        true,
        EngineConfig {
            settle_interval: Duration::ZERO,
            ..EngineConfig::default()
        },
    );
    // Another host's live session: no line of this host may touch it.
    let (other, _rx) = f.other_session("other", 4_200_077);
    rt.block_on(async {
        f.start_on(
            &other,
            json!({"apps": ["Notes"]}),
            nish_testd::person::PersonOp::Approve {
                apps: None,
                takeover: false,
                clipboard: false,
            },
        )
        .await
        .ok();
    });
    let cases = std::env::var("NISH_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256u32);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&line(), |l| {
            let answers = rt.block_on(f.engine.control(&f.session, &l));
            prop_assert!(!answers.is_empty() && answers.len() <= 2, "{answers:?}");
            for a in &answers {
                let v: Value = serde_json::from_str(a).expect("answers are JSON");
                prop_assert!(v.is_object() && v["event"].is_string(), "{a}");
                prop_assert!(a.len() <= 4096, "an answer of {} bytes", a.len());
            }
            prop_assert_eq!(other.state().phase.as_str(), "granted");
            Ok(())
        })
        .unwrap();
    // The session of this host still answers calls.
    let st = rt.block_on(f.call("get_session_state", json!({})));
    st.ok();
}
