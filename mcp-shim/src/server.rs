//! The MCP side: `tools/list` from the proto tool table, `tools/call` forwarded to the broker.

use std::sync::{Arc, Mutex};

use nish_proto::tools::TOOLS;
use nish_proto::{CONTRACT_VERSION, DRIVER_VERSION, INSTRUCTIONS, SERVER_NAME};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::link::BrokerLink;
use crate::render;
use crate::splice::Splices;

/// Where the host's name comes from: the MCP client's `clientInfo.name` once known, else the
/// `--host` argument, else `host`.
#[derive(Debug, Default)]
pub struct HostName {
    from_client: Mutex<Option<String>>,
    fallback: Option<String>,
}

impl HostName {
    /// A host name with an optional `--host` fallback.
    pub fn new(fallback: Option<String>) -> Self {
        HostName {
            from_client: Mutex::new(None),
            fallback: fallback.filter(|s| !s.trim().is_empty()),
        }
    }

    /// Records the client's own name (from `initialize`, or from a 2026-07-28 request's
    /// `_meta`).
    pub fn learn(&self, name: &str) {
        if name.trim().is_empty() {
            return;
        }
        let mut g = self.from_client.lock().unwrap_or_else(|e| e.into_inner());
        if g.as_deref() != Some(name) {
            *g = Some(name.to_string());
        }
    }

    /// The name to open a session with. The broker escapes and cuts it.
    pub fn get(&self) -> String {
        let g = self.from_client.lock().unwrap_or_else(|e| e.into_inner());
        g.clone()
            .or_else(|| self.fallback.clone())
            .unwrap_or_else(|| "host".to_string())
    }
}

/// The shim's MCP server.
#[derive(Debug, Clone)]
pub struct Shim {
    link: Arc<BrokerLink>,
    host: Arc<HostName>,
    tools: Arc<Vec<Tool>>,
    splices: Arc<Splices>,
    elicitor: Arc<crate::elicitor::Elicitor>,
}

/// Every tool of the proto table, as rmcp tools, in table order. No `outputSchema` (contract
/// §8: not advertised yet).
pub fn tool_list() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|t| {
            let mut tool: Tool = serde_json::from_value(t.list_entry())
                .expect("every proto tool entry is a valid MCP tool");
            tool.output_schema = None;
            tool
        })
        .collect()
}

impl Shim {
    /// A server forwarding to `link`, whose results' structured content goes out through a
    /// [`crate::splice::SpliceWriter`] of `splices`.
    pub fn new(link: Arc<BrokerLink>, host: Arc<HostName>, splices: Arc<Splices>) -> Self {
        Shim {
            link,
            host,
            tools: Arc::new(tool_list()),
            splices,
            elicitor: Arc::default(),
        }
    }

    /// Asks approvals through the client's elicitation when it offers it (see
    /// [`crate::elicitor`]).
    pub fn with_elicitor(mut self, elicitor: Arc<crate::elicitor::Elicitor>) -> Self {
        self.elicitor = elicitor;
        self
    }

    fn learn_host(&self, ctx: &RequestContext<RoleServer>) {
        if let Some(info) = ctx.meta.client_info() {
            self.host.learn(&info.name);
        } else if let Some(params) = ctx.peer.peer_info() {
            self.host.learn(&params.client_info.name);
        }
    }
}

impl ServerHandler for Shim {
    /// The server info: name and driver version, and the contract version (contract §1) in the
    /// result's `_meta.contract_version` (MCP's Implementation has no field of its own for it)
    /// and in the description.
    fn get_info(&self) -> ServerConfig {
        let mut server = Implementation::new(SERVER_NAME, DRIVER_VERSION);
        server.description = Some(format!(
            "Reads and operates desktop apps with the person's consent (contract {CONTRACT_VERSION})"
        ));
        let mut meta = serde_json::Map::new();
        meta.insert("contract_version".into(), CONTRACT_VERSION.into());
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(server)
            .with_instructions(INSTRUCTIONS);
        info.meta = Some(MetaObject(meta));
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // Learn the host's name now: a control line may come before the first call.
        self.host.learn(&request.client_info.name);
        ctx.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request);
        self.elicitor.offer(&ctx.peer);
        result
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.learn_host(&ctx);
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.learn_host(&ctx);
        let args_json = match &request.arguments {
            Some(map) => serde_json::to_string(map).map_err(|e| {
                McpError::internal_error(format!("cannot encode the arguments: {e}"), None)
            })?,
            None => "{}".to_string(),
        };
        let tool = request.name.as_ref();
        let host = self.host.get();
        // A call can wait long (a host approval takes up to 60 s): a client that asked for
        // progress hears from the call every few seconds, which keeps its request alive.
        let _progress = ctx.meta.get_progress_token().map(|token| {
            let peer = ctx.peer.clone();
            AbortOnDrop(tokio::spawn(async move {
                let mut n = 0u32;
                loop {
                    tokio::time::sleep(PROGRESS_EVERY).await;
                    n += 1;
                    let p = ProgressNotificationParam::new(token.clone(), f64::from(n))
                        .with_message(PROGRESS_MESSAGE);
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
            }))
        });
        let result = tokio::select! {
            r = self.link.call(&host, tool, args_json) => r,
            () = ctx.ct.cancelled() => {
                tracing::debug!(tool = %nish_proto::model::escape_clip(tool, 64), "call cancelled by the client");
                return Err(McpError::internal_error("cancelled", None));
            }
        };
        Ok(match result {
            Ok((id, r)) => render::call_result(id, r, Some(&self.splices)),
            Err(e) => {
                tracing::info!(
                    tool = %nish_proto::model::escape_clip(tool, 64),
                    code = e.code.as_str(),
                    "call failed in the shim"
                );
                render::driver_error(&e)
            }
        }
        .into())
    }
}

/// How often a long call tells a client that asked for progress that it is still running.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// What a progress notification says.
pub const PROGRESS_MESSAGE: &str =
    "still running: waiting for the person's answer, the desktop, or the host's approval";

/// Ends a task when dropped (the call it reports on is over, or was cancelled).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_list_is_the_proto_table_without_output_schemas() {
        let tools = tool_list();
        assert_eq!(tools.len(), TOOLS.len());
        for (tool, def) in tools.iter().zip(TOOLS) {
            // What goes on the wire is exactly the proto entry: nothing lost, nothing added.
            assert_eq!(
                serde_json::to_value(tool).unwrap(),
                def.list_entry(),
                "{}",
                def.name
            );
            assert!(tool.output_schema.is_none());
        }
        let size = serde_json::to_vec(&serde_json::json!({ "tools": tools }))
            .unwrap()
            .len();
        assert!(size <= nish_proto::tools::MAX_TOOLS_LIST_BYTES, "{size}");
    }

    #[test]
    fn host_name_prefers_the_client_then_the_flag_then_host() {
        assert_eq!(HostName::new(None).get(), "host");
        assert_eq!(HostName::new(Some("  ".into())).get(), "host");
        let h = HostName::new(Some("flag".into()));
        assert_eq!(h.get(), "flag");
        h.learn("");
        assert_eq!(h.get(), "flag");
        h.learn("NishBot");
        assert_eq!(h.get(), "NishBot");
    }
}

/// The shim's MCP request path under structure-aware fuzzing: JSON-RPC messages (initialize,
/// tools/list, tools/call with arbitrary names and arguments, pings, notifications, unknown
/// methods) built from the real tool table, then mutated (truncated, bytes flipped, garbage,
/// long lines), sent to a real rmcp session of the shim over an in-memory pipe. The broker is
/// unreachable, so calls answer backend_unavailable. Whatever comes in, the shim must not
/// panic and must not hang: a ping after the fuzzed input is answered, or the session ends.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use rmcp::ServiceExt;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn message() -> impl Strategy<Value = Value> {
        let names: Vec<String> = TOOLS.iter().map(|t| t.name.to_string()).collect();
        let tool = prop_oneof![
            proptest::sample::select(names),
            ".{0,24}",
            Just("x".repeat(5000)),
        ];
        let scalar = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,32}".prop_map(Value::String),
            "s[0-9]{1,2}:[0-9]{1,3}".prop_map(Value::String),
        ];
        let args = proptest::collection::btree_map(
            prop_oneof![
                Just("element_token".to_string()),
                Just("text".to_string()),
                Just("app".to_string()),
                Just("apps".to_string()),
                Just("input".to_string()),
                ".{1,12}"
            ],
            prop_oneof![
                scalar.clone(),
                proptest::collection::vec(scalar.clone(), 0..4).prop_map(Value::Array),
            ],
            0..5,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()));
        let id = prop_oneof![
            (1i64..1_000_000).prop_map(|n| json!(n)),
            ".{0,8}".prop_map(Value::String),
            Just(Value::Null),
        ];
        prop_oneof![
            (id.clone(), tool, proptest::option::of(args)).prop_map(|(id, name, args)| {
                let mut params = json!({"name": name});
                if let Some(a) = args {
                    params["arguments"] = a;
                }
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            }),
            id.clone()
                .prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})),
            id.clone()
                .prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "ping"})),
            (id.clone(), ".{0,20}")
                .prop_map(|(id, m)| json!({"jsonrpc": "2.0", "id": id, "method": m})),
            ".{0,20}"
                .prop_map(|m| json!({"jsonrpc": "2.0", "method": format!("notifications/{m}")})),
            (id, ".{0,12}").prop_map(|(id, name)| json!({"jsonrpc": "2.0", "id": id,
                "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}})),
        ]
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        None,
        Truncate(prop::sample::Index),
        Flip(prop::sample::Index, u8),
        Garbage(Vec<u8>),
        Long(usize),
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        let m = prop_oneof![
            4 => Just(Mutation::None),
            2 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
            2 => (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
            1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Garbage),
            1 => (1usize..300_000).prop_map(Mutation::Long),
        ];
        (message(), m).prop_map(|(v, m)| {
            let mut b = v.to_string().into_bytes();
            match m {
                Mutation::None => {}
                Mutation::Truncate(i) => b.truncate(i.index(b.len() + 1)),
                Mutation::Flip(i, x) => {
                    let n = i.index(b.len());
                    b[n] ^= x;
                }
                Mutation::Garbage(g) => b = g,
                Mutation::Long(n) => b = format!("{{\"x\":\"{}\"}}", "y".repeat(n)).into_bytes(),
            }
            b.retain(|c| *c != b'\n');
            b.push(b'\n');
            b
        })
    }

    /// Runs one session: initialize, the fuzzed lines, then a ping. True when the ping was
    /// answered; false when the session ended first.
    async fn session(lines: Vec<Vec<u8>>) -> bool {
        let (host, shim_side) = tokio::io::duplex(1 << 20);
        let (shim_rd, shim_wr) = tokio::io::split(shim_side);
        let link = Arc::new(BrokerLink::new(
            std::path::PathBuf::from("/nonexistent/nish-fuzz/broker.sock"),
            None,
        ));
        let splices = crate::splice::Splices::new();
        let shim = Shim::new(link, Arc::new(HostName::new(None)), splices.clone());
        let server = tokio::spawn(async move {
            let out = crate::splice::SpliceWriter::new(shim_wr, splices);
            if let Ok(service) = shim.serve((shim_rd, out)).await {
                let _ = service.waiting().await;
            }
        });
        let (rd, mut wr) = tokio::io::split(host);
        let mut out = BufReader::new(rd).lines();
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"}}});
        wr.write_all(format!("{init}\n").as_bytes()).await.unwrap();
        wr.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        let writer = tokio::spawn(async move {
            for l in lines {
                if wr.write_all(&l).await.is_err() {
                    return;
                }
            }
            let ping = b"{\"jsonrpc\":\"2.0\",\"id\":\"final-ping\",\"method\":\"ping\"}\n";
            let _ = wr.write_all(ping).await;
            // Keep the pipe open until the session is done with it.
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        });
        let answered = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            while let Ok(Some(l)) = out.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&l)
                    && v["id"] == "final-ping"
                {
                    return true;
                }
            }
            false
        })
        .await
        .expect("the shim neither answered the ping nor ended the session: it hangs");
        writer.abort();
        server.abort();
        match server.await {
            Err(e) if e.is_panic() => panic!("the shim's session panicked"),
            _ => {}
        }
        answered
    }

    #[test]
    fn fuzz_the_mcp_request_path() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cases = std::env::var("NISH_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .map_or(48, |n| (n / 4).max(8));
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let answered = std::sync::atomic::AtomicU32::new(0);
        runner
            .run(&proptest::collection::vec(line(), 1..6), |lines| {
                if rt.block_on(session(lines)) {
                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        // Most sessions survive their input (malformed lines are answered with errors).
        let answered = answered.into_inner();
        assert!(answered > 0, "no session answered the final ping");
        eprintln!("MCP request path: {cases} sessions fuzzed, {answered} answered the final ping");
        // And a clean session answers.
        assert!(rt.block_on(session(vec![])));
    }
}
