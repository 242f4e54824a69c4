//! The MCP side: `tools/list` from the proto tool table, `tools/call` forwarded to the broker.

use std::sync::{Arc, Mutex};

use nish_proto::tools::TOOLS;
use nish_proto::{DRIVER_VERSION, SERVER_NAME};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::link::BrokerLink;
use crate::render;

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
    /// A server forwarding to `link`.
    pub fn new(link: Arc<BrokerLink>, host: Arc<HostName>) -> Self {
        Shim {
            link,
            host,
            tools: Arc::new(tool_list()),
        }
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
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, DRIVER_VERSION))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // Learn the host's name now: a control line may come before the first call.
        self.host.learn(&request.client_info.name);
        ctx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
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
        let result = tokio::select! {
            r = self.link.call(&host, tool, args_json) => r,
            () = ctx.ct.cancelled() => {
                tracing::debug!(tool = %nish_proto::model::escape_clip(tool, 64), "call cancelled by the client");
                return Err(McpError::internal_error("cancelled", None));
            }
        };
        Ok(match result {
            Ok((id, r)) => render::call_result(id, r),
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
